"""`python -m core.generation_metrics`, kept under its name: the module is core.eval.generation_metrics (issue 29). PKGMOVE-ALIAS"""
if __name__ != "__main__":
    raise ImportError("core.generation_metrics moved to core.eval.generation_metrics: import that")

import runpy
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `core` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
runpy.run_module("core.eval.generation_metrics", run_name="__main__", alter_sys=True)
