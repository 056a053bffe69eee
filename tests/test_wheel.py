"""The wheel is complete: built from a copy of the sources, installed into a fresh venv, imported from
outside the repository, it carries every module and every data file (SPIR-V kernels, assets) of vkml/.

No network: the wheel is built without build isolation and installed without dependencies; the fresh
venv borrows numpy & co. from the project's venv through a .pth line (which does not activate the
project's editable install, so `import vkml` can only find the wheel).
"""
import os, re, shutil, subprocess, sys, sysconfig, zipfile
from pathlib import Path
import pytest
from conftest import ROOT

pytestmark = pytest.mark.timeout(120)


def run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=100, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def package_files() -> set:
    "Every file of the vkml package in the working tree, as wheel paths (bytecode caches left out)."
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "vkml").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # build from a copy: setuptools writes build/ and *.egg-info next to the sources
    src.mkdir()
    for f in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / f).exists(): shutil.copy(ROOT / f, src / f)
    shutil.copytree(ROOT / "vkml", src / "vkml", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", tmp / "dist", src])
    (whl,) = (tmp / "dist").glob("vkml-*.whl")
    return whl


def test_wheel_has_every_package_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(package_files() - names)
    assert not missing, f"files of vkml/ missing from the wheel (add them to package-data in pyproject.toml): {missing}"
    spv = sorted(n for n in package_files() if n.endswith(".spv"))
    assert all(n in names for n in spv)  # the shipped kernels, once vkml/spirv exists


def test_wheel_installs_and_imports(wheel, tmp_path):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    py = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index", "-q", wheel])
    site = Path(run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
    (site / "_vkml_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # numpy, vulkan, ... from our venv
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    out = run([py, "-c", "import vkml; print(vkml.__version__); print(vkml.__file__)"], cwd=outside, env=env)
    version, where = out.split()
    expected = re.search(r'__version__\s*=\s*"([^"]+)"', (ROOT / "vkml" / "__init__.py").read_text()).group(1)
    assert version == expected
    assert Path(where).is_relative_to(site), f"imported vkml from {where}, not from the wheel in {site}"
