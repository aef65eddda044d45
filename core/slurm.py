"""A cluster run's state from Slurm, followed to its end, or stopped (the backend is core.run.slurm).

    python -m core.slurm --run-dir runs/<id> [--follow | --stop | --stop-now]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `core` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.run.launcher import LaunchError
from core.run.records import TERMINAL_STATES
from core.run.rundir import RunDir
from core.run.slurm import SlurmBackend, describe


def main(argv: list[str] | None = None) -> int:
    """python -m core.slurm --run-dir runs/<id> [--follow | --stop | --stop-now]: a cluster run's
    state (Slurm's job, nodes, pending reason), followed to its end, or stopped."""
    parser = argparse.ArgumentParser(prog="python -m core.slurm", description=main.__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, help="the run folder the submission printed")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--follow", action="store_true", help="print each change until the run is over")
    what.add_argument("--stop", action="store_true", help="graceful stop: a checkpoint, then the end")
    what.add_argument("--stop-now", action="store_true", help="scancel at once")
    args = parser.parse_args(argv)
    backend, run = SlurmBackend(), RunDir(os.path.abspath(args.run_dir))
    try:
        if args.stop or args.stop_now:
            status = backend.stop(run, graceful=args.stop)
        else:
            status, last = backend.refresh(run), ""
            while True:
                line = describe(status)
                if line != last:
                    print(line, flush=True)
                    last = line
                if not args.follow or status.state in TERMINAL_STATES:
                    break
                time.sleep(2.0)
                status = backend.refresh(run)
            return 0 if status.state not in ("failed",) else 1
    except LaunchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(describe(status))
    return 0



if __name__ == "__main__":
    sys.exit(main())
