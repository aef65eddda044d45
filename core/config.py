"""Resolve and check a run's config: print the resolved YAML (exit 0) or every problem (exit 2).

    python -m core.config --config configs/lora_demo.yaml train.learning_rate=1e-4

The settings themselves are core.spec.config; this is their command line.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # run as a script: make `core` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.spec.config import ConfigError, load_config


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print the resolved YAML (exit 0) or every problem (exit 2)."""
    parser = argparse.ArgumentParser(prog="python -m core.config", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="YAML config file")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="e.g. train.learning_rate=1e-4")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, args.overrides)
    except ConfigError as err:
        print(f"error: invalid config\n{err}", file=sys.stderr)
        return 2
    sys.stdout.write(config.to_yaml())
    return 0


if __name__ == "__main__":
    sys.exit(main())
