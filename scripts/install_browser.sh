#!/usr/bin/env bash
# Installs the browser the console's browser test drives: Debian's own `chromium` package, plus the
# Noto CJK fonts so the Chinese labels render in screenshots, from the distribution's apt sources
# (run as root, e.g. by CI before `make test`). Test tools never download a browser themselves (no
# `playwright install`); the test launches /usr/bin/chromium. Does nothing when both are there.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
PACKAGES=(chromium fonts-noto-cjk)

missing=()
for package in "${PACKAGES[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ -x "$CHROMIUM" ] && [ ${#missing[@]} -eq 0 ]; then
    echo "chromium already installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "error: installing ${missing[*]} needs root (apt-get); run: sudo $0" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"

"$CHROMIUM" --version
