"""Issue 38: app/'s modules moved into packages (tabs, runs, charts, data, auth). Rewrites every reference to
the old flat paths (`from app import jobs`, `app.jobs.X`, `app/jobs.py`, the page's scripts) in app/, core/,
tests/, bench/, scripts/, docs/ and the top-level files; moves a module still flat (git mv). Rerun it on code
written against the flat layout (a branch made before the move):

    .venv/bin/python scripts/app_packages.py .
"""
import re, subprocess, sys
from pathlib import Path

ROOT = Path(sys.argv[1])
PACKAGES = {
    "tabs": ("train_tab", "train_callbacks", "monitor_tab", "monitor_callbacks", "runs_tab", "runs_callbacks",
             "try_tab", "try_callbacks", "eval_callbacks", "data_callbacks", "form", "form_sync", "changes",
             "early_script", "widgets"),
    "runs": ("jobs", "run_status", "exports", "serving", "cluster", "devices"),
    "charts": ("metrics", "svg_chart", "figures"),
    "data": ("datasets", "catalog", "data_preview", "preference_preview", "sample_html"),
    "auth": ("access", "sessions"),
}
ASSETS = {"tabs": ("status_timer.js", "monitor_feed.js", "runs_watch.js", "data_preview_fold.js")}
DOCS = {
    "tabs": "The console's tabs: per tab a layout module (`*_tab`) and its callbacks (plain values in and out,\ntested without a browser), the form made from the config's fields, and the page's scripts.",
    "runs": "Runs as the console handles them: starting, queueing and stopping (`jobs`), their status lines,\nthe cluster choice, this machine's devices, downloads (`exports`) and serving.",
    "charts": "Charts: `metrics.jsonl` read incrementally, drawn as SVG, and the figures that judge a run.",
    "data": "Datasets as the console lists and previews them: the model and data catalogs, the previews.",
    "auth": "Who may see and do what: logins, run ownership, per-session locks.",
}
PKG_OF = {m: p for p, ms in PACKAGES.items() for m in ms}

def git(*a):
    subprocess.run(["git", "-C", str(ROOT), *a], check=True)

for pkg, mods in PACKAGES.items():
    (ROOT / "app" / pkg).mkdir(exist_ok=True)
    if not (ROOT / "app" / pkg / "__init__.py").exists():
        (ROOT / "app" / pkg / "__init__.py").write_text(f'"""{DOCS[pkg]}"""\n')
    for name in [f"{m}.py" for m in mods] + list(ASSETS.get(pkg, ())):
        if (ROOT / "app" / name).exists():
            git("mv", f"app/{name}", f"app/{pkg}/{name}")

names = "|".join(sorted(PKG_OF, key=len, reverse=True))
DOTTED = re.compile(rf"(?<![\w.])app\.({names})\b")
PATH = re.compile(rf"(?<![\w/])app/({names})\.py\b")
ASSET = {a: p for p, al in ASSETS.items() for a in al}
ASSET_RE = re.compile(r"(?<![\w/])app/(" + "|".join(re.escape(a) for a in ASSET) + r")\b")
FROM_APP = re.compile(r"^(?P<indent>[ \t]*)from app import (?P<names>[^\n(#]+?)(?P<tail>[ \t]*(#[^\n]*)?)$", re.M)

def split_from(m):
    items = [s.strip() for s in m.group("names").split(",") if s.strip()]
    groups = {}
    for item in items:
        base = item.split(" as ")[0].strip()
        groups.setdefault(PKG_OF.get(base), []).append(item)
    lines = []
    for i, (pkg, its) in enumerate(groups.items()):
        where = f"app.{pkg}" if pkg else "app"
        lines.append(f"{m.group('indent')}from {where} import {', '.join(its)}" + (m.group("tail") if i == 0 else ""))
    return "\n".join(lines)

files = [p for top in ("app", "core", "tests", "bench", "scripts", "docs") for p in (ROOT / top).rglob("*")
         if p.suffix in (".py", ".md", ".js", ".txt", ".yaml", ".toml", ".cfg", ".ini") and "__pycache__" not in p.parts]
files += [ROOT / f for f in ("README.md", "Makefile", "Dockerfile", ".ci/run", "pyproject.toml", "setup.cfg", "pytest.ini")
          if (ROOT / f).is_file()]
changed = 0
for p in files:
    if p.resolve() == Path(__file__).resolve():
        continue
    t = p.read_text(encoding="utf-8")
    n = FROM_APP.sub(split_from, t) if p.suffix == ".py" else t
    n = DOTTED.sub(lambda m: f"app.{PKG_OF[m.group(1)]}.{m.group(1)}", n)
    n = PATH.sub(lambda m: f"app/{PKG_OF[m.group(1)]}/{m.group(1)}.py", n)
    n = ASSET_RE.sub(lambda m: f"app/{ASSET[m.group(1)]}/{m.group(1)}", n)
    if n != t:
        p.write_text(n, encoding="utf-8")
        changed += 1
print("files changed", changed)
