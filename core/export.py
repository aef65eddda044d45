"""`python -m core.export`, kept under its name: the command line is core.engine.export_main (issues 29, 39). PKGMOVE-ALIAS"""
if __name__ != "__main__":
    raise ImportError("core.export moved to core.engine.export: import that")

import runpy
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `core` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
runpy.run_module("core.engine.export_main", run_name="__main__", alter_sys=True)
