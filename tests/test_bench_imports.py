"""bench/: every script starts on this install (issue 41). A script run as `python bench/NAME.py` has
bench/ first on sys.path, so a module there named like an installed package shadows it for every
library the script imports: `bench/kernels.py` hid Hugging Face's `kernels` package from
transformers 5.25 ("cannot import name 'CUDAProperties' from 'kernels'"), and nothing but a real
run showed it, because the scripts import transformers inside their functions. These tests check
the names, run every script's `--help`, and (slow) execute every import statement of bench/ with
the sys.path a script gets. No benchmark runs."""
from __future__ import annotations

import ast
import importlib.metadata
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import skips

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")
# folders put first on sys.path: bench/ by running a script; data/ by bench/packing.py and
# models/make_tiny_demo.py (to import make_demo_data)
FIRST_ON_PATH = (BENCH, ROOT / "data")
HEAVY = {"family_runs", "model_parity"}  # load MindSpore or PyTorch at import: seconds each


def installed_names() -> set[str]:
    """Every top-level module name something else may import: the standard library, what the
    installed distributions declare, and what the sys.path entries outside this repository hold."""
    names = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    names |= set(importlib.metadata.packages_distributions())
    outside = [p for p in sys.path if p and not Path(p).resolve().is_relative_to(ROOT)]
    names |= {m.name for m in pkgutil.iter_modules(outside)}
    return names


def shadowing(folder: Path, names: set[str]) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__" and p.stem in names)


@pytest.mark.slow
def test_a_module_named_like_an_installed_package_or_a_standard_module_is_reported(tmp_path):
    """The check below sees the packages the scripts use (it cannot pass by seeing nothing)."""
    for name in ("json", "numpy", "mindspore", "transformers", "mindtune_bench_step", "__init__"):
        (tmp_path / f"{name}.py").write_text("")
    assert shadowing(tmp_path, installed_names()) == ["json", "mindspore", "numpy", "transformers"]


@pytest.mark.slow
@pytest.mark.parametrize("folder", FIRST_ON_PATH, ids=lambda p: p.name)
def test_no_module_first_on_a_scripts_path_is_named_like_an_installed_one(folder):
    assert shadowing(folder, installed_names()) == [], (
        f"{folder.relative_to(ROOT)}/ is first on sys.path when its scripts run: rename these modules, "
        "they hide the installed ones of the same name")


@pytest.mark.slow  # a Python process per script: ~25 s in all on a loaded 2-core machine
@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.slow) if s in HEAVY else s for s in SCRIPTS])
def test_every_bench_script_starts_and_prints_its_help(script, tmp_path):
    """`python bench/NAME.py --help`: its top-level imports under a script's own sys.path, its
    options parsed, and nothing made (real_models.py once took `--help` for a folder to fill)."""
    result = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), "--help"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith(f"usage: {script}.py"), result.stdout[:500]
    assert list(tmp_path.iterdir()) == []


def import_statements() -> list[str]:
    """Every absolute import statement in bench/, top level and inside functions, each once."""
    seen: dict[str, None] = {}
    for path in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0
                                                and node.module != "__future__"):
                seen[ast.unparse(node)] = None
    return list(seen)


RUN_IMPORTS = """
import json, sys, traceback
root, bench, data, statements = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
sys.path[:1] = [root, bench]  # what `python bench/NAME.py` gets once the script put the repo first
sys.path.append(data)         # bench/packing.py's make_demo_data (it puts data/ first itself)
failed = {}
for statement in statements:
    try:
        exec(statement, {})
    except BaseException as err:  # noqa: BLE001 -- every failure is reported, with its statement
        missing = err.name if isinstance(err, ModuleNotFoundError) else None
        failed[statement] = [missing, "".join(traceback.format_exception_only(err)).strip()]
print(json.dumps(failed))
"""


@pytest.mark.slow
def test_every_import_of_the_bench_scripts_resolves_as_a_script_runs_it():
    """The scripts import transformers, peft, torch, lm-eval, MindSpore... inside their functions, so
    `--help` does not reach them: here each import statement runs in one process whose sys.path is
    a bench script's, which is where bench/kernels.py broke transformers 5.25."""
    statements = import_statements()
    assert "from transformers import AutoModelForCausalLM" in statements  # the one that broke
    result = subprocess.run([sys.executable, "-c", RUN_IMPORTS, str(ROOT), str(BENCH), str(ROOT / "data"),
                             json.dumps(statements)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    failed = json.loads(result.stdout.strip().splitlines()[-1])
    absent = sorted({missing for missing, _ in failed.values()
                     if missing and missing.split(".")[0] not in {"bench", "core", "app", "tests"}})
    if absent and all(missing in absent for missing, _ in failed.values()):
        skips.skip("reference", f"could not import {', '.join(absent)} (requirements-dev.txt)")
    assert failed == {}, "\n".join(f"{statement}: {error}" for statement, (_, error) in failed.items())
