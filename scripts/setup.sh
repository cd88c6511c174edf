#!/usr/bin/env bash
# Installs everything the tests use that cargo does not. Idempotent; run as root or with
# sudo on a Debian machine.
#   kubectl                  the API server's tests drive it
#   openssl                  test keys for the GCS upload tests
#   junitparser              CI parses the JUnit file strictly
#   PyYAML                   the TestGrid config test loads the generated YAML
#   python-openstackclient   the mock OpenStack is judged by the real openstack CLI
#   boto3, awscli, moto      the mock AWS is judged by them, side by side with moto
#   gcp-storage-emulator,    uploads to GCS are read back with Google's client
#   google-cloud-storage
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
python3 -c 'import boto3, moto' 2>/dev/null && command -v aws >/dev/null 2>&1 \
  || python3 -m pip install --quiet boto3 awscli 'moto[server]'
python3 -c 'import gcp_storage_emulator, google.cloud.storage' 2>/dev/null \
  || python3 -m pip install --quiet gcp-storage-emulator==2026.7.19 google-cloud-storage==3.17.1

command -v kubectl >/dev/null && kubectl version --client 2>/dev/null | head -1
python3 -c 'import junitparser; print("junitparser", junitparser.version)'
