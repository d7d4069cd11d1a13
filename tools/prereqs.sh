#!/usr/bin/env bash
# Installs the machine packages the build needs beyond Go: a C compiler for
# the in-container enforcement library (nodeplugin/shim) and its tests, and
# libseccomp's headers with pkg-config for runc (the real nodes' runtime).
# Does nothing when they are present; otherwise installs them with apt-get
# (as root, or through sudo).
set -euo pipefail

missing=()
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[[ -e /usr/include/stdio.h ]] || missing+=(libc6-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
[[ -e /usr/include/seccomp.h ]] || missing+=(libseccomp-dev)
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
echo "prereqs: installing ${missing[*]} with apt-get"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "prereqs: ${missing[*]} missing and not root: install them (apt-get install ${missing[*]}) and rerun" >&2
    exit 1
  fi
  sudo=(sudo)
fi
"${sudo[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
