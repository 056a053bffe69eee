"""README.md is generated from nbs/index.ipynb by scripts/readme.py and must not drift from it."""
import importlib.util, json
from conftest import ROOT


def load_readme_script():
    spec = importlib.util.spec_from_file_location("vkml_readme_script", ROOT / "scripts" / "readme.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_is_generated_from_index():
    rd = load_readme_script()
    assert (ROOT / "README.md").read_text(encoding="utf-8") == rd.render(), \
        "README.md is stale: run `.venv/bin/python scripts/readme.py` (edit nbs/index.ipynb, not README.md)"


def test_render_rules(tmp_path):
    "Markdown as is, code fenced without directives, hidden cells left out, the notebook list expanded."
    rd = load_readme_script()
    cells = [dict(cell_type="markdown", source="# T\n> sub\n\n<!-- notebooks -->", metadata={}),
             dict(cell_type="code", source="#| hide\nsecret = 1", metadata={}, outputs=[], execution_count=None),
             dict(cell_type="code", source="#| eval: false\nx = 1 + 1", metadata={}, outputs=[], execution_count=None)]
    nb = tmp_path / "index.ipynb"
    nb.write_text(json.dumps(dict(cells=cells, metadata={}, nbformat=4, nbformat_minor=5)))
    out = rd.render(nb)
    assert "```python\nx = 1 + 1\n```" in out and "secret" not in out and "#|" not in out
    assert "(nbs/01_dtypes.ipynb)" in out and "<!-- notebooks -->" not in out


def test_index_has_no_default_exp():
    nb = json.loads((ROOT / "nbs" / "index.ipynb").read_text(encoding="utf-8"))
    assert not any("default_exp" in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
