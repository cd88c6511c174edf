#!/usr/bin/env bash
# Installs everything the tests use that cargo does not: kubectl (the API server's tests
# drive it), junitparser (CI parses the JUnit file strictly) and PyYAML (the TestGrid
# config test loads the generated YAML) and the openstack CLI (the mock OpenStack is
# judged by it), a GCS emulator with Google's storage client (uploads are read back with
# it) and openssl (test keys). Idempotent; run as root or
# with sudo on a Debian machine.
set -euo pipefail

need_apt=()
command -v kubectl >/dev/null 2>&1 || need_apt+=(kubectl)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-pip)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

python3 -c 'import junitparser' 2>/dev/null || python3 -m pip install --quiet 'junitparser>=3,<5'
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet pyyaml
command -v openstack >/dev/null 2>&1 || python3 -m pip install --quiet python-openstackclient python-octaviaclient
python3 -c 'import gcp_storage_emulator, google.cloud.storage' 2>/dev/null \
  || python3 -m pip install --quiet gcp-storage-emulator==2026.7.19 google-cloud-storage==3.17.1

command -v kubectl >/dev/null && kubectl version --client 2>/dev/null | head -1
python3 -c 'import junitparser; print("junitparser", junitparser.version)'
