"""The import layers of core/ and app/ (issue 29 item 1), checked on the source and on real imports.

Packages (README, Architecture) and the arrows each may have:

    spec     <- nothing else of core          (MindSpore-free)
    weights  <- nothing else of core          (MindSpore-free)
    run      -> spec                          (MindSpore-free)
    eval     -> spec, run                     (MindSpore-free)
    data     -> spec, run                     (MindSpore-free)
    engine   -> spec, weights, run, eval, data  (MindSpore)
    core/*.py, the entry points -> any package, and each other
    app      -> the MindSpore-free packages only; core never imports app

Every import of a core or app module counts, also one inside a function; only `if TYPE_CHECKING:`
blocks are left out. A function-level import of another core module must be in LAZY, with the reason.
The checks take the tree's root, and each is also run on a copy with a planted violation, which it
must report.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package names only (no dotted module paths here: /work/tools/pkgmove.py rewrites those)
MINDSPORE_FREE = ("spec", "weights", "run", "eval", "data")
ALLOWED = {
    "spec": set(),
    "weights": {"spec"},  # its errors are core messages (spec.errors, spec.messages)
    "run": {"spec"},
    "eval": {"spec", "run"},
    "data": {"spec", "run"},
    "engine": {"spec", "weights", "run", "eval", "data"},
    "entry": {"spec", "weights", "run", "eval", "data", "engine", "entry"},
    "app": set(MINDSPORE_FREE) | {"app"},
}
# function-level imports of core modules that are deliberate: (importer, imported) -> why
LAZY = {
    ("core.dry_run", "core.engine.trainer"): "MindSpore loads only after a config error is answered",
    ("core.dry_run", "core.engine.generate"): "MindSpore loads only after a config error is answered",
    ("core.dry_run", "core.engine.devices"): "MindSpore loads only after a config error is answered",
    ("core.evaluate", "core.engine.generate"): "MindSpore and lm-eval load only when tasks run",
    ("core.evaluate", "core.engine.lm_eval_model"): "MindSpore and lm-eval load only when tasks run",
    ("core.lm_eval_cli", "core.eval.eval_tasks"): "lm-eval's own CLI: a missing lm-eval is said before MindSpore loads",
    ("core.lm_eval_cli", "core.evaluate"): "lm-eval's own CLI: a missing lm-eval is said before MindSpore loads",
    ("core.lm_eval_cli", "core.engine.generate"): "lm-eval's own CLI: MindSpore loads only when it runs",
    ("core.lm_eval_cli", "core.engine.lm_eval_model"): "lm-eval's own CLI: MindSpore loads only when it runs",
    ("core.engine.export", "core.engine.lora"): "the streamed PEFT and merged exports never load MindSpore",
    ("core.engine.export", "core.engine.checkpoint"): "the streamed PEFT and merged exports never load MindSpore",
    ("core.export", "core.engine.gguf_run"): "llama.cpp and MindSpore load only for the GGUF formats",
    ("core.engine.fused", "core.engine.layers"): "the kernel library builds (bench/fused_kernels.py) without loading MindSpore",
    ("core.run.ranks", "core.run.ckpt_store"): "NumPy in a rank's supervisor only when a verdict is written",
    ("app.runs.cluster", "core.run.ranks"): "the console's own choice (app is not core)",
    ("app.tabs.train_callbacks", "core.run.slurm"): "the console's own choice (app is not core)",
    ("app.tabs.train_callbacks", "core.spec.memory"): "the console works without the estimate",
}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "app":
        return "app"
    if parts[0] != "core" or len(parts) == 1:
        return None
    return parts[1] if parts[1] in ALLOWED else "entry"


def _imported(node: ast.AST, modules: set[str]) -> list[str]:
    """The core/app modules an import statement loads (`from core.x import y`: core.x.y when that is a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]
        return subs or [node.module]
    return []


def import_graph(root: Path) -> list[tuple[str, str, bool, int]]:
    """(importer, imported, at function level, line) for each import of a core or app module."""
    files = sorted([*root.glob("core/**/*.py"), *root.glob("app/**/*.py")])
    modules = {module_name(root, p) for p in files}
    edges = []
    for path in files:
        importer = module_name(root, path)

        def visit(node, nested):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and getattr(child.test, "id", getattr(child.test, "attr", "")) == "TYPE_CHECKING":
                    continue
                inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                for name in _imported(child, modules):
                    if name.split(".")[0] in ("core", "app"):
                        edges.append((importer, name, nested, child.lineno))
                visit(child, inner)
        visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return edges


def layer_violations(root: Path) -> list[str]:
    out = []
    for importer, imported, _, line in import_graph(root):
        a, b = layer(importer), layer(imported)
        if a is None or b is None or a == b and a != "entry":
            continue
        if b not in ALLOWED[a]:
            out.append(f"{importer} (line {line}) imports {imported}: {a} may import only "
                       f"{', '.join(sorted(ALLOWED[a])) or 'nothing else of core'}")
    return out


def package_cycles(root: Path) -> list[list[str]]:
    """Circles between packages (app, core's packages, the entry points as one), from the real imports."""
    arrows: dict[str, set[str]] = {}
    for importer, imported, _, _ in import_graph(root):
        a, b = layer(importer), layer(imported)
        if a and b and a != b:
            arrows.setdefault(a, set()).add(b)
    return _cycles(arrows)


def module_cycles(root: Path) -> list[list[str]]:
    """Circles between modules, inside a package too, function-level imports included."""
    arrows: dict[str, set[str]] = {}
    for importer, imported, _, _ in import_graph(root):
        if importer != imported and not importer.startswith(imported + "."):  # a package's own __init__
            arrows.setdefault(importer, set()).add(imported)
    return _cycles(arrows)


def _cycles(arrows: dict[str, set[str]]) -> list[list[str]]:
    cycles, state = [], {}

    def dfs(node, path):
        state[node] = "open"
        for nxt in sorted(arrows.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                dfs(nxt, path + [nxt])
        state[node] = "done"
    for start in sorted(arrows):
        if start not in state:
            dfs(start, [start])
    return cycles


def unexplained_lazy_imports(root: Path) -> list[str]:
    return [f"{importer} (line {line}) imports {imported} inside a function: import it at the top, or add "
            "it to LAZY with the reason"
            for importer, imported, nested, line in import_graph(root)
            if nested and imported.startswith("core.") and (importer, imported) not in LAZY]


PROBE = r"""
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
leaks = []
for name in json.loads(sys.argv[2]):
    before = "mindspore" in sys.modules
    importlib.import_module(name)
    if not before and "mindspore" in sys.modules:
        leaks.append(name)
print(json.dumps({"leaks": leaks, "loaded": sorted(m for m in sys.modules if m.split(".")[0] == "mindspore")[:3]}))
"""


def mindspore_leaks(root: Path, packages: list[str]) -> list[str]:
    """The modules of `packages` ("app" or a core package) whose import loads MindSpore, each package
    imported in a fresh interpreter one module at a time."""
    leaks = []
    for package in packages:
        folder = root / "app" if package == "app" else root / "core" / package
        names = [module_name(root, p) for p in sorted(folder.glob("**/*.py"))]
        names = [n for n in names if n != "app.__main__"]
        done = subprocess.run([sys.executable, "-c", PROBE, str(root), json.dumps(names)], cwd=root,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"importing {package}: {done.stderr[-2000:]}"
        leaks += [f"{name} loads MindSpore" for name in json.loads(done.stdout.splitlines()[-1])["leaks"]]
    return leaks


OURS = ("core", "app", "bench")
WHOLE_MODULES = tuple(f"{top}." for top in OURS)


def missing_attributes(files: list[Path]) -> list[str]:
    """`module.name` uses, in `files`, of a core/app module imported whole (`import core.run.launcher
    as launcher`, `from core.run import launcher`) whose module has no such name: a name moved to
    another module and left behind at a use (stop 33's CI failure: a Slurm test's teardown called
    `launcher.list_runs` after the listing moved to core.run.runs; bench/fused_kernels.py called
    `train_step.PROJECTIONS` and `make_25m` long after bench/train_step.py dropped them). Modules that
    do not import here (an optional package missing) are left out."""
    found = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                aliases.update({a.asname: a.name for a in node.names if a.asname and a.name.startswith(WHOLE_MODULES)})
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in OURS:
                aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                                if is_module(f"{node.module}.{a.name}")})
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and \
                    isinstance(node.value, ast.Name) and node.value.id in aliases:
                try:
                    module = importlib.import_module(aliases[node.value.id])
                except Exception:  # noqa: BLE001 - an optional package missing: not this check's concern
                    continue
                if not hasattr(module, node.attr):
                    found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:"
                                 f"{node.lineno}: {aliases[node.value.id]}.{node.attr}")
    return sorted(set(found))


def is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, AttributeError):  # `from core.x import Name`: core.x is a module, not a package
        return False


def tree_files() -> list[Path]:
    return [p for top in ("app", "core", "tests", "bench", "scripts") for p in sorted((ROOT / top).rglob("*.py"))
            if "__pycache__" not in p.parts]


# ---- the tree as it is ------------------------------------------------------------------------------

def test_the_packages_exist_and_nothing_of_core_is_left_flat_but_the_entry_points():
    packages = sorted(p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").is_file())
    assert packages == sorted(ALLOWED.keys() - {"entry", "app"})
    flat = sorted(p.stem for p in (ROOT / "core").glob("*.py") if p.stem != "__init__")
    # the entry points, each a command line of its own (`python -m core.<name>`): no aliases (issue 38)
    assert flat == ["config", "dry_run", "evaluate", "export", "generate", "generation_metrics", "lm_eval_cli",
                    "ranks", "reward_worker", "serve", "slurm", "slurm_node", "train"]
    assert all('if __name__ == "__main__":' in (ROOT / "core" / f"{name}.py").read_text(encoding="utf-8")
               for name in flat)
    library = [p.relative_to(ROOT).as_posix() for p in (ROOT / "core").glob("*/**/*.py")
               if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")]
    assert library == []  # a package module is imported, never run: its command line is an entry point


def test_the_console_is_in_packages_by_what_they_do():
    """issue 38: app/ is no flat folder: the tabs, the runs, the charts, the data views and who may do
    what each a package; on top only the server, what every callback shares and the entry points."""
    packages = sorted(p.name for p in (ROOT / "app").iterdir() if (p / "__init__.py").is_file())
    assert packages == ["auth", "charts", "data", "runs", "tabs", "texts"]
    flat = sorted(p.stem for p in (ROOT / "app").glob("*.py"))
    assert flat == ["__init__", "__main__", "background", "container", "context", "i18n", "paths", "server",
                    "settings"]
    assert all(len(list((ROOT / "app" / name).glob("*.py"))) >= 3 for name in packages)


@pytest.mark.slow
def test_every_import_follows_the_layers():
    graph = import_graph(ROOT)
    assert len(graph) > 300  # the walk sees the real imports (about 440 at the move)
    assert layer_violations(ROOT) == []


@pytest.mark.slow
def test_no_circles_between_packages_or_modules():
    assert package_cycles(ROOT) == []
    assert module_cycles(ROOT) == []


@pytest.mark.slow
def test_function_level_imports_of_core_are_only_the_deliberate_ones():
    assert unexplained_lazy_imports(ROOT) == []
    graph = {(a, b) for a, b, nested, _ in import_graph(ROOT) if nested}
    assert set(LAZY) <= graph, f"LAZY lists imports that are gone: {sorted(set(LAZY) - graph)}"


@pytest.mark.slow
def test_every_module_attribute_used_exists():
    files = tree_files()
    assert len(files) > 200
    assert missing_attributes(files) == []


def test_a_name_left_behind_by_a_move_is_reported(tmp_path):
    use = tmp_path / "teardown.py"
    use.write_text("import core.run.launcher as launcher\nfrom core.run import runs\n\n"
                   "def teardown(runs_dir):\n    launcher.list_runs(runs_dir)\n    runs.list_runs(runs_dir)\n",
                   encoding="utf-8")
    assert missing_attributes([use]) == ["teardown.py:5: core.run.launcher.list_runs"]


@pytest.mark.slow
def test_the_console_and_the_mindspore_free_packages_load_no_mindspore():
    assert mindspore_leaks(ROOT, [*MINDSPORE_FREE, "app"]) == []


# ---- planted violations: each check must report them --------------------------------------------

@pytest.fixture
def tree(tmp_path):
    for name in ("core", "app"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "kernels"))
    return tmp_path


def plant(tree: Path, relative: str, line: str, at_top: bool = True) -> None:
    path = tree / relative
    text = path.read_text(encoding="utf-8")
    head, sep, rest = text.partition("from __future__ import annotations\n")
    path.write_text(head + sep + line + "\n" + rest if at_top else text + "\n\ndef _planted():\n    " + line + "\n",
                    encoding="utf-8")


def without_lines(violations: list[str]) -> list[str]:
    return [re.sub(r" \(line \d+\)", "", v) for v in violations]


@pytest.mark.slow
def test_a_spec_module_importing_the_engine_is_reported(tree):
    assert layer_violations(tree) == []
    plant(tree, "core/spec/config.py", "import core.engine.layers")
    assert without_lines(layer_violations(tree)) == [
        "core.spec.config imports core.engine.layers: spec may import only nothing else of core"]


@pytest.mark.slow
def test_the_console_importing_the_engine_is_reported(tree):
    plant(tree, "app/runs/jobs.py", "from core.engine.model import CausalLM", at_top=False)
    assert without_lines(layer_violations(tree)) == [
        "app.runs.jobs imports core.engine.model: app may import only app, data, eval, run, spec, weights"]


@pytest.mark.slow
def test_core_importing_app_is_reported(tree):
    plant(tree, "core/run/rundir.py", "from app import i18n")
    assert without_lines(layer_violations(tree)) == ["core.run.rundir imports app.i18n: run may import only spec"]


@pytest.mark.slow
def test_a_circle_between_packages_is_reported(tree):
    assert package_cycles(tree) == []
    plant(tree, "core/spec/memory.py", "import core.run.atomic")  # run -> spec already (rundir reads config)
    assert package_cycles(tree) in (
        [["run", "spec", "run"]], [["spec", "run", "spec"]])


@pytest.mark.slow
def test_an_unexplained_function_level_import_is_reported(tree):
    assert unexplained_lazy_imports(tree) == []
    plant(tree, "core/run/launcher.py", "from core.run.rundir import RunDir", at_top=False)
    assert without_lines(unexplained_lazy_imports(tree)) == [
        "core.run.launcher imports core.run.rundir inside a function: import it at the top, or add it to LAZY "
        "with the reason"]


@pytest.mark.slow
def test_mindspore_loaded_by_a_free_package_is_reported(tree):
    plant(tree, "core/spec/errors.py", "import mindspore  # planted")
    assert mindspore_leaks(tree, ["spec"]) == ["core.spec.errors loads MindSpore"]


# the objective seam (issue 36): what differs between objectives lives in their own modules; everything
# else asks the run's objective (core.engine.objectives) or its spec (core.spec.objectives)
OBJECTIVE_MODULES = ("core/spec/objectives.py", "core/engine/objectives/", "core/engine/preference.py",
                     "core/engine/grpo.py", "core/engine/reward_model.py", "core/data/preference.py",
                     "core/data/pairs.py", "core/data/prompts.py")
# a comparison with an objective's name; an ObjectiveSpec's own `.kind` (sft, preference, rl, reward) is asked
_NAMED_OBJECTIVE = re.compile(r"""(?<!\.kind )(==|!=)\s*["'](sft|dpo|simpo|orpo|kto|grpo|reward)["']|"""
                              r"""in \(["'](sft|dpo|simpo|orpo|kto|grpo|reward)["']""")


def objective_branches(root: Path) -> list[str]:
    found = []
    for path in sorted([*root.glob("core/**/*.py"), *root.glob("app/**/*.py")]):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(OBJECTIVE_MODULES):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "objective" in line and _NAMED_OBJECTIVE.search(line.split("#")[0]):
                found.append(f"{rel}:{number}: {line.strip()}")
    return found


def test_no_module_outside_the_objectives_branches_on_an_objectives_name(tmp_path):
    assert objective_branches(ROOT) == []
    planted = tmp_path / "core" / "run" / "x.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("def f(cfg):\n    return cfg.train.objective == 'dpo'\n")
    assert objective_branches(tmp_path) == ["core/run/x.py:2: return cfg.train.objective == 'dpo'"]
