#!/usr/bin/env bash
# Installs everything the tests use that cargo does not. Idempotent; run as root or with
# sudo on a Debian machine.
#   kubectl                  the API server's tests drive it
#   openssl                  test keys for the GCS upload tests
#   junitparser, lxml        CI parses the JUnit file strictly, with two parsers
#   PyYAML                   the TestGrid config test loads the generated YAML
#   python-openstackclient   the mock OpenStack is judged by the real openstack CLI
#   boto3, awscli, moto      the mock AWS is judged by them, side by side with moto
#   gcp-storage-emulator,    uploads to GCS are read back with Google's client
#   google-cloud-storage
#   azure-identity,          the mock Azure is judged by the Azure SDK for Python
#   azure-mgmt-compute/-network
#   google-cloud-compute     the mock GCP is judged by Google's Compute client for Python
#                            (and by gcloud, which the machine image ships: google-cloud-cli)
#   pyvmomi                  the mock vSphere is judged by VMware's Python SDK...
#   Go 1.26                  ...side by side with vcsim (govmomi v0.53.0's simulator, built
#                            from the Go module proxy on first use); the Go judges
#                            (judges/go: gophercloud, aws-sdk-go-v2, govmomi) need it too
#   kubernetes (PyPI)        the embedded API server is judged by the official Python client
#   chromium                 the TestGrid-style dashboard is screenshotted headless
#   setpriv (util-linux)     the real control plane's processes die with their parent
#   gsutil (own venv)        uploads are read back with Google's gsutil too; it pins old
#                            dependencies, so it gets a virtualenv of its own
set -euo pipefail

need_apt=()
command -v kubectl >/dev/null 2>&1 || need_apt+=(kubectl)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-pip)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# Go 1.26: the tarball's /usr/local/go/bin/go counts (the tests look there too). Debian's
# golang-go is older; Go >= 1.21 with GOTOOLCHAIN=auto fetches go1.26 through the module
# proxy when a go.mod asks for it.
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || need_apt+=(golang-go)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# setpriv (util-linux): `cluster --apiserver real` starts etcd and kube-apiserver under
# `setpriv --pdeathsig KILL` so that they die with it.
command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

python3 -c 'import junitparser' 2>/dev/null || python3 -m pip install --quiet 'junitparser>=3,<5'
python3 -c 'import lxml' 2>/dev/null || python3 -m pip install --quiet 'lxml==6.0.2'
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet pyyaml
command -v openstack >/dev/null 2>&1 || python3 -m pip install --quiet python-openstackclient python-octaviaclient
python3 -c 'import boto3, moto' 2>/dev/null && command -v aws >/dev/null 2>&1 \
  || python3 -m pip install --quiet boto3 awscli 'moto[server]'
python3 -c 'import gcp_storage_emulator, google.cloud.storage' 2>/dev/null \
  || python3 -m pip install --quiet gcp-storage-emulator==2026.7.19 google-cloud-storage==3.17.1
python3 -c 'import pyVmomi' 2>/dev/null || python3 -m pip install --quiet 'pyvmomi==9.1.1.0'
python3 -c 'import azure.identity, azure.mgmt.compute, azure.mgmt.network' 2>/dev/null \
  || python3 -m pip install --quiet 'azure-identity==1.27.0' 'azure-mgmt-compute==39.0.0' 'azure-mgmt-network==33.1.0'
python3 -c 'import google.cloud.compute_v1' 2>/dev/null \
  || python3 -m pip install --quiet 'google-cloud-compute==1.57.0'
python3 -c 'import kubernetes' 2>/dev/null || python3 -m pip install --quiet 'kubernetes==37.0.2'
if ! command -v gsutil >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO python3 -m venv /opt/ccm-conformance-gsutil
  $SUDO /opt/ccm-conformance-gsutil/bin/pip install --quiet 'gsutil==5.38'
  $SUDO ln -sf /opt/ccm-conformance-gsutil/bin/gsutil /usr/local/bin/gsutil
fi

# The first line only, read to the end: `| head -1` closes the pipe early and kubectl's
# SIGPIPE fails the script under pipefail (seen once in CI: exit 141).
command -v kubectl >/dev/null && kubectl version --client 2>/dev/null | sed -n 1p
python3 -c 'import junitparser; print("junitparser", junitparser.version)'
