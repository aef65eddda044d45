#!/usr/bin/env bash
# Installs a C++ compiler (Debian's g++) for the CPU's fused attention kernel, which
# core/fused_attention.py builds on first use (run as root, e.g. by CI before `make test`). Without
# one, training still runs, on MindSpore's composed attention ops (slower). Does nothing when a
# compiler is there.
set -euo pipefail

if command -v "${CXX:-g++}" >/dev/null 2>&1; then
    echo "C++ compiler already installed: $("${CXX:-g++}" --version | head -1)"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "error: installing g++ needs root (apt-get); run: sudo $0" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends g++
g++ --version | head -1
