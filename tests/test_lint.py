"""The exported package passes ruff with its default rules (pyproject.toml's [tool.ruff.lint] says which
few it leaves out and why): no unused imports or variables, no undefined names, no dead expressions.
Findings are fixed in the notebooks (nbs/), then `nbdev-export` writes vkml/ again."""
import shutil, subprocess, sys
from pathlib import Path
import pytest
from conftest import ROOT


def ruff() -> list:
    exe = Path(sys.executable).parent / "ruff"
    if exe.exists(): return [str(exe)]
    if shutil.which("ruff"): return [shutil.which("ruff")]
    pytest.fail("ruff is not installed: it is in the dev extra (scripts/setup.sh installs it)")


def test_ruff_finds_nothing_in_the_package():
    r = subprocess.run([*ruff(), "check", "--no-cache", "vkml"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"ruff check vkml:\n{r.stdout[-6000:]}\n{r.stderr[-2000:]}"


def test_ruff_would_catch_an_unused_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\n")
    r = subprocess.run([*ruff(), "check", "--no-cache", "--isolated", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "F401" in r.stdout


def star_sources(f: Path) -> list:
    "The modules `f` star-imports (`from vkml.core.dtypes import *`, relative or not), as dotted names."
    import re
    parts = list(f.relative_to(ROOT).with_suffix("").parts)
    pkg = parts[:-1]
    out = []
    for m in re.finditer(r"^from (\.*)([\w.]*) import \*", f.read_text(encoding="utf-8"), re.M):
        dots, name = len(m.group(1)), m.group(2)
        out.append(".".join(pkg[: len(pkg) - dots + 1] + [name]) if dots else name)
    return out


def test_every_name_is_defined_somewhere():
    """ruff cannot say whether a name is defined when a module star-imports (F405): each such name must
    come from one of the modules it star-imports. (A merge once brought code using `np` into a module
    whose unused `import numpy` had just been removed; only running that path showed it.)"""
    import importlib, json
    r = subprocess.run([*ruff(), "check", "--no-cache", "--isolated", "--select", "F405", "--output-format", "json", "vkml"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    bad = []
    for e in json.loads(r.stdout or "[]"):
        f = Path(e["filename"])
        name = e["message"].split("`")[1]
        mods = [importlib.import_module(m) for m in star_sources(f)]
        if not any(name in getattr(m, "__all__", [n for n in vars(m) if not n.startswith("_")]) for m in mods):
            bad.append(f"{f.relative_to(ROOT)}:{e['location']['row']}: {name}")
    assert not bad, "names defined nowhere (import them in the notebook's export cell):\n" + "\n".join(bad)
