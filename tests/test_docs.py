"""The offline docs build works: every notebook has a page, every exported module an API page, and a
headless Chromium renders the pages (screenshots checked to be more than a blank page).

The site is built into a temporary folder from the notebooks test_notebooks.py already executed
(conftest.py runs this file last), so the notebooks are not run twice; any it did not run are run here.
A notebook that fails still gets its page (with the traceback): test_notebooks.py reports the failure.
"""
import importlib, os, re, shutil, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
from conftest import ROOT, env_flag

sys.path.insert(0, str(ROOT / "scripts"))
import readme  # noqa: E402

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def site(tmp_path_factory, executed_nbs) -> Path:
    tmp = tmp_path_factory.mktemp("docs")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs.py"), "--executed", str(executed_nbs),
                        "--build", str(tmp / "build"), "--site", str(tmp / "site"),
                        "--allow-errors"],  # a failing notebook is test_notebooks.py's failure; here, its page
                       capture_output=True, text=True, timeout=360, cwd=ROOT)
    assert r.returncode == 0, f"scripts/docs.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return tmp / "site"


def page(site: Path, nb: Path) -> Path:
    return site / ("index.html" if nb.name == "index.ipynb" else f"{nb.stem}.html")


def modules() -> list:
    spec = importlib.util.spec_from_file_location("_vkml_modidx", ROOT / "vkml" / "_modidx.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return sorted(m.d["syms"])


def test_every_notebook_has_a_page(site):
    nbs = readme.reading_order()
    assert nbs and nbs[0].name == "index.ipynb"
    for nb in nbs:
        f = page(site, nb)
        assert f.exists(), f"no page for {nb.name}"
    for md in (site.parent / "build" / "md").glob("*.md"):
        code = re.findall(r"```python\n(.*?)```", md.read_text(encoding="utf-8"), re.S)
        leaked = [l for block in code for l in block.splitlines() if l.lstrip().startswith("#|")]
        assert not leaked, f"nbdev directives left in {md.name}: {leaked}"


def test_hidden_cells_stay_hidden(site):
    html = (site / "index.html").read_text(encoding="utf-8")
    assert "vkML" in html and "make test" in html
    assert "from fastcore.test import" not in html  # index.ipynb's `#| hide` cell


def test_every_module_has_an_api_page(site):
    for name in modules():
        f = site / "api" / f"{name}.html"
        assert f.exists(), f"no API page for {name}"
        mod = importlib.import_module(name)
        html = f.read_text(encoding="utf-8")
        missing = [n for n in mod.__all__ if n not in html]
        assert not missing, f"{name}'s API page lacks {missing}"
    assert "make_node" in (site / "api" / "vkml.core.graph.html").read_text(encoding="utf-8")


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe: return exe
    if env_flag("VKML_REQUIRE_CHROMIUM"): pytest.fail("VKML_REQUIRE_CHROMIUM=1 but no chromium: apt-get install chromium")
    pytest.skip("no chromium for the screenshots (scripts/setup.sh --docs installs it)")


def browse(exe, url, tmp, *args) -> subprocess.CompletedProcess:
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           f"--user-data-dir={tmp / 'profile'}", "--hide-scrollbars", "--window-size=1280,900", *args, url]
    return subprocess.run(cmd, capture_output=True, timeout=90)


@pytest.mark.parametrize("path,text", [("index.html", "Quick start"), ("api/vkml.core.graph.html", "make_node")])
def test_screenshot(site, tmp_path, path, text):
    import matplotlib.image
    exe = chromium()
    url = (site / path).as_uri()
    dom = browse(exe, url, tmp_path, "--dump-dom")
    assert dom.returncode == 0 and text in dom.stdout.decode(errors="replace"), dom.stderr[-2000:]
    png = tmp_path / "shot.png"
    r = browse(exe, url, tmp_path, f"--screenshot={png}")
    assert r.returncode == 0 and png.exists(), r.stderr[-2000:]
    img = matplotlib.image.imread(png)[..., :3]
    assert img.shape[:2] == (900, 1280)
    # A rendered page, not a blank or error page: Material's coloured header bar (so the CSS loaded),
    # a light body, and text in it (many distinct anti-aliased colours).
    top, body = img[5:40], img[100:]
    assert ((top.max(-1) - top.min(-1)) > 0.2).mean() > 0.8, "no coloured header bar: the theme's CSS did not load"
    assert body.mean() > 0.7, "the page body is not light"
    assert len(np.unique((body * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50, "no text on the page"


@pytest.mark.parametrize("nb", ["41_experiment_submission", "42_experiment_fusion", "36_tutorial", "33_data"])
def test_plots_are_in_their_pages(site, nb):
    "The experiments' and the tutorial's figures reach their pages as images that exist."
    html = (site / f"{nb}.html").read_text(encoding="utf-8")
    srcs = re.findall(r'<img[^>]+src="([^"]+\.png)"', html)
    assert srcs, f"no plot in {nb}.html"
    for s in srcs: assert (site / s).exists(), f"{nb}.html shows {s}, which is not in the site"


def test_each_page_says_what_it_teaches_and_links_to_the_next(site):
    "A notebook opens with its title and what it teaches (`> ...`); its page ends with a link to the next one."
    nbs = readme.reading_order()
    for nb, nxt in zip(nbs, nbs[1:]):
        t, s = readme.title(nb)
        assert t != nb.stem and s, f"{nb.name} does not open with `# Title` and `> what it teaches`"
        html = page(site, nb).read_text(encoding="utf-8")
        assert f'href="{page(site, nxt).name}"' in html.split('class="vkml-next"')[-1], f"{nb.name}'s page does not link to {nxt.name}"


def test_long_code_stays_inside_the_page(site):
    "docs/extra.css reaches every page: code scrolls sideways inside its block, outputs wrap."
    css = (site / "extra.css").read_text(encoding="utf-8")
    assert "overflow-x: auto" in css and "pre-wrap" in css
    for nb in readme.reading_order():
        assert "extra.css" in page(site, nb).read_text(encoding="utf-8"), f"{nb.name}'s page lacks extra.css"


def test_api_pages_are_grouped_by_part(site):
    import yaml
    sys.path.insert(0, str(ROOT / "scripts"))
    import docs
    nav = yaml.safe_load((site.parent / "build" / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    api = next(e["API reference"] for e in nav if "API reference" in e)
    groups = [next(iter(g)) for g in api]
    assert groups == [name for _, name in docs.PARTS if name in groups] and len(groups) > 1
    assert {"vkml.backends.vulkan.replay": "api/vkml.backends.vulkan.replay.md"} in next(g["The Vulkan backend"] for g in api if "The Vulkan backend" in g)
    html = (site / "api" / "vkml.nn.html").read_text(encoding="utf-8")   # a package that re-exports its parts has its page too
    assert "Linear" in html
