"""`python -m app`: the console's front door (see app/settings.py for the options)."""
from __future__ import annotations

import sys

from app.settings import SettingsError, parse_settings


def main(argv: list[str] | None = None) -> int:
    try:
        settings = parse_settings(argv)
    except SettingsError as err:
        print(f"mindtune: {err}", file=sys.stderr)
        return 2
    from app.server import serve  # imported after the checks: Gradio takes a few seconds to import

    serve(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
