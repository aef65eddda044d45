#!/usr/bin/env bash
# Installs a C++ compiler (Debian's g++) for the CPU's fused kernels, which
# core/engine/fused.py builds on first use (run as root, e.g. by CI before `make test`). Without
# one, training still runs, on MindSpore's composed ops (slower). Does nothing when a
# compiler is there.
set -euo pipefail

if command -v "${CXX:-g++}" >/dev/null 2>&1; then
    echo "C++ compiler already installed: $("${CXX:-g++}" --version | head -1)"
    exit 0
fi
. "$(dirname "$0")/apt_install.sh"
apt_install g++
g++ --version | head -1
