"""Score generated answers in a process of its own (core.eval.generation_metrics.score_apart starts it).

    python -m core.generation_metrics < {"predictions": [...], "references": [...]}

prints the scores as JSON on stdout.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `core` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.eval.generation_metrics import score_generations
from core.spec.codec import encode


def main() -> int:
    """stdin {"predictions": [...], "references": [...]} -> stdout the scores as JSON."""
    request = json.load(sys.stdin)
    scores = score_generations(request["predictions"], request["references"])
    json.dump(encode(scores), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
