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

. "$(dirname "$0")/apt_install.sh"
apt_install "${missing[@]}"

"$CHROMIUM" --version
