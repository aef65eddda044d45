"""A run's worker under its rank supervisor (core.run.ranks.Supervisor).

    python -m core.ranks --run-dir runs/<id>     # what core.run.launcher starts for one worker
    msrun ... core/ranks.py --run-dir runs/<id>  # msrun runs it once per rank (and for its scheduler)

Stdlib only (and psutil) until the worker, core/train.py, starts in a process of its own.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script by msrun: make `core` importable
    sys.path.insert(0, str(Path(os.path.abspath(__file__)).parents[1]))  # not resolved: a linked copy runs its own

from core.run.ranks import REPO_ROOT, Supervisor, exit_like


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--run-dir" not in argv or argv.index("--run-dir") + 1 >= len(argv):
        print("usage: python -m core.ranks --run-dir runs/<id>", file=sys.stderr)
        return 2
    if os.environ.get("MS_ROLE") == "MS_SCHED":  # msrun's scheduler: not a rank, nothing to supervise
        train = str(REPO_ROOT / "core" / "train.py")
        os.execv(sys.executable, [sys.executable, train, *argv])
    supervisor = Supervisor(argv[argv.index("--run-dir") + 1], argv)
    exit_like(supervisor.supervise())
    return 0



if __name__ == "__main__":
    sys.exit(main())
