"""`python -m core.ranks`, kept under its name: the module is core.run.ranks (issue 29). PKGMOVE-ALIAS"""
if __name__ != "__main__":
    raise ImportError("core.ranks moved to core.run.ranks: import that")

import runpy
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `core` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
runpy.run_module("core.run.ranks", run_name="__main__", alter_sys=True)
