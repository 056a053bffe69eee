"""Render README.md from nbs/index.ipynb (no Quarto): `scripts/readme.py` writes it, `--check` only compares.

Markdown cells are copied as they are; code cells become ```python blocks with their `#|` directive
lines removed; `#| hide` cells are left out. A markdown line `<!-- notebooks -->` expands into the
notebooks in reading order, each with its title and subtitle read from its first markdown cell, so
the list is never typed twice (docs.py expands it the same way).
"""
import json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
MARKER = "<!-- notebooks -->"
HEADER = "<!-- Generated from nbs/index.ipynb by scripts/readme.py: edit the notebook, not this file. -->\n\n"


def cell_source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def directives(code: str) -> dict:
    "The `#| key value` lines at the top of a code cell, as {key: value}."
    out = {}
    for line in code.splitlines():
        m = re.match(r"\s*#\s*\|\s*([\w-]+):?\s*(.*)", line)
        if not m:
            if line.strip(): break
            continue
        out[m.group(1)] = m.group(2).strip()
    return out


def strip_directives(code: str) -> str:
    return "\n".join(l for l in code.splitlines() if not re.match(r"\s*#\s*\|", l)).strip("\n")


def reading_order() -> list:
    "The notebooks in reading order: index first, then by their number."
    nbs = sorted(p for p in NBS.glob("*.ipynb") if p.name != "index.ipynb")
    return ([NBS / "index.ipynb"] if (NBS / "index.ipynb").exists() else []) + nbs


def title(nb_path: Path) -> tuple:
    "(title, subtitle) from the notebook's first markdown cell: `# Title` and `> subtitle`."
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    md = next((cell_source(c) for c in nb["cells"] if c["cell_type"] == "markdown"), "")
    t = re.search(r"^#\s+(.+)$", md, re.M)
    s = re.search(r"^>\s*(.+)$", md, re.M)
    return (t.group(1).strip() if t else nb_path.stem), (s.group(1).strip() if s else "")


def notebook_list(link=lambda p: f"nbs/{p.name}") -> str:
    "The Markdown list the `<!-- notebooks -->` marker expands into; `link` maps a notebook to its URL."
    lines = []
    for p in reading_order():
        if p.name == "index.ipynb": continue
        t, s = title(p)
        lines.append(f"1. [{t}]({link(p)}) (`{p.name}`)" + (f": {s}" if s else ""))
    return "\n".join(lines)


def expand(md: str, link=lambda p: f"nbs/{p.name}") -> str:
    "The notebook list put in for the marker, and links to `nbs/X.ipynb` made with `link` (a page in the docs)."
    md = md.replace(MARKER, notebook_list(link)) if MARKER in md else md
    return re.sub(r"\]\((?:nbs/)?(\d\d_[\w-]+\.ipynb)\)", lambda m: f"]({link(NBS / m.group(1))})", md)


def render(nb_path: Path = NBS / "index.ipynb") -> str:
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    parts = []
    for c in nb["cells"]:
        src = cell_source(c)
        if c["cell_type"] == "markdown":
            parts.append(expand(src.strip("\n")))
        elif c["cell_type"] == "code":
            if "hide" in directives(src): continue
            code = strip_directives(src)
            if code.strip(): parts.append(f"```python\n{code}\n```")
    return HEADER + "\n\n".join(parts) + "\n"


def main(argv):
    text, readme = render(), ROOT / "README.md"
    if "--check" in argv:
        if readme.read_text(encoding="utf-8") != text:
            print("README.md differs from nbs/index.ipynb: run scripts/readme.py", file=sys.stderr)
            return 1
        return 0
    readme.write_text(text, encoding="utf-8")
    print(f"wrote {readme.relative_to(ROOT)}")
    return 0


if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
