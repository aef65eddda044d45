#!/usr/bin/env bash
# Installs the browser the console's browser test drives: Debian's own `chromium` package, from the
# distribution's apt sources (run as root, e.g. by CI before `make test`). Test tools never download
# a browser themselves (no `playwright install`); the test launches /usr/bin/chromium.
# Does nothing when /usr/bin/chromium is already there.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    echo "chromium already installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "error: installing chromium needs root (apt-get); run: sudo $0" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium

"$CHROMIUM" --version
