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
