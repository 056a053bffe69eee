"""`make docs`: the documentation site, built offline, into _site/ (no Quarto).

1. Run every notebook in a real Jupyter kernel (nbclient), a time limit per cell; cells flagged with
   one of `tst_flags` (`#| slow`, `#| gpu`) are not run, as in the tests. With `--executed DIR`,
   a notebook already executed there (by tests/test_notebooks.py, from the same source) is reused.
2. Apply the nbdev directives: `#| hide` drops a cell, `#| echo: false` its code, `#| output: false`
   its outputs; every `#|` line goes.
3. Convert to Markdown with nbconvert (images extracted next to the page).
4. Write one API page per exported module (from vkml/_modidx.py): each public function and class,
   its signature and docstring, read with `inspect`.
5. Give each notebook page a link to the next one (the reading order), group the notebooks and the
   API pages by part of the book (PARTS), add docs/extra.css, and build with MkDocs and Material
   (docs/mkdocs.yml, plus the generated nav) into the site folder.

Usage: scripts/docs.py [--executed DIR] [--build DIR] [--site DIR] [--workers N] [--allow-errors]
"""
import argparse, concurrent.futures as cf, hashlib, importlib, inspect, json, os, re, shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import readme  # noqa: E402  (reading order, titles and the notebook list, shared with README.md)

NBS = ROOT / "nbs"
CELL_TIMEOUT = 300  # seconds per cell


def skip_flags() -> set:
    from nbdev.config import get_config
    f = get_config(ROOT).tst_flags
    return set(f.split() if isinstance(f, str) else f or [])


def sha(path: Path) -> str: return hashlib.sha256(path.read_bytes()).hexdigest()


# --- 1. execute -------------------------------------------------------------------------------------

def execute(path: str, allow_errors=False) -> str:
    "Run the notebook at `path` in a fresh python3 kernel (cwd nbs/); the executed notebook as JSON."
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    flags = skip_flags()
    for c in nb.cells:  # cells the tests skip are not run for the docs either
        if c.cell_type == "code" and flags & set(readme.directives(c.source)):
            c.metadata.setdefault("tags", []).append("skip-execution")
    NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=allow_errors,
                   resources={"metadata": {"path": str(NBS)}}).execute(stderr=subprocess.DEVNULL)  # the kernel's TCP notice
    nb.metadata["vkml_executed"] = {"source_sha256": sha(Path(path)), "by": "nbclient"}
    return nbformat.writes(nb)


def executed_notebooks(paths, reuse_dir, workers, allow_errors=False) -> dict:
    "{path: executed notebook JSON}: reused from `reuse_dir` where its source hash matches, else run now."
    out, todo = {}, []
    for p in paths:
        cand = reuse_dir / p.name if reuse_dir else None
        if cand and cand.exists():
            meta = json.loads(cand.read_text(encoding="utf-8")).get("metadata", {}).get("vkml_executed", {})
            if meta.get("source_sha256") == sha(p):
                out[p] = cand.read_text(encoding="utf-8"); continue
        todo.append(p)
    print(f"docs: {len(out)} notebooks already executed, running {len(todo)} in a Jupyter kernel")
    with cf.ProcessPoolExecutor(max_workers=max(1, workers)) as ex:
        futs = {ex.submit(execute, str(p), allow_errors): p for p in todo}
        for f in cf.as_completed(futs):
            p = futs[f]
            try: out[p] = f.result()
            except Exception as e: raise SystemExit(f"docs: {p.name} failed to execute:\n{e}") from None
    return out


# --- 2. directives -> 3. Markdown --------------------------------------------------------------------

def page_link(p: Path) -> str: return f"{p.stem}.md"


def apply_directives(nb):
    "nbdev's directives as nbconvert tags; `#|` lines removed; the notebook list expanded."
    for c in nb.cells:
        if c.cell_type == "markdown":
            c.source = readme.expand(c.source, link=page_link)
            continue
        if c.cell_type != "code": continue
        d = readme.directives(c.source)
        tags = c.metadata.setdefault("tags", [])
        if "hide" in d or "default_exp" in d: tags.append("remove_cell")
        if d.get("echo") == "false": tags.append("remove_input")
        if d.get("output") == "false": tags.append("remove_output")
        c.source = readme.strip_directives(c.source)
        if not c.source.strip() and not c.get("outputs"): tags.append("remove_cell")
    return nb


def to_markdown(nb_json: str, stem: str, out_dir: Path) -> Path:
    "Write `<stem>.md` and its extracted images (`<stem>_files/`) into `out_dir`."
    import nbformat
    from nbconvert import MarkdownExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
    from traitlets.config import Config
    nb = apply_directives(nbformat.reads(nb_json, as_version=4))
    cfg = Config()
    cfg.TagRemovePreprocessor.remove_cell_tags = {"remove_cell"}
    cfg.TagRemovePreprocessor.remove_input_tags = {"remove_input"}
    cfg.TagRemovePreprocessor.remove_all_outputs_tags = {"remove_output"}
    cfg.TagRemovePreprocessor.enabled = True
    cfg.ExtractOutputPreprocessor.output_filename_template = "{unique_key}_{cell_index}_{index}{extension}"
    ex = MarkdownExporter(config=cfg)
    ex.register_preprocessor(TagRemovePreprocessor(config=cfg), enabled=True)
    body, res = ex.from_notebook_node(nb, resources={"unique_key": stem, "output_files_dir": f"{stem}_files"})
    for name, data in res.get("outputs", {}).items():
        f = out_dir / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
    md = out_dir / f"{stem}.md"
    md.write_text(body, encoding="utf-8")
    return md


# --- 4. API reference ---------------------------------------------------------------------------------

def signature(obj) -> str:
    "The signature as written: string annotations (from `from __future__ import annotations`) unquoted."
    try: s = str(inspect.signature(obj))
    except (TypeError, ValueError): return "(...)"
    return re.sub(r"(: |-> )'([^']*)'", r"\1\2", s)


def doc_of(obj) -> str:
    d = inspect.getdoc(obj)
    return d.strip() if d else ""


def api_entries(mod) -> list:
    "(name, kind, header, doc, members) for each public name of `mod` (its `__all__`)."
    rows = []
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name, None)
        if inspect.isclass(obj):
            members = []
            for m, v in vars(obj).items():
                if m.startswith("_"): continue  # __init__'s signature is the class's
                f = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
                if inspect.isfunction(f):
                    members.append((m, f"{m}{signature(f)}".replace("(self, ", "(").replace("(self)", "()"), doc_of(f)))
                elif isinstance(v, property):
                    members.append((m, f"{m} (property)", doc_of(v)))
            rows.append((name, "class", f"class {name}{signature(obj)}", doc_of(obj), members))
        elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
            rows.append((name, "function", f"def {name}{signature(obj)}", doc_of(obj), []))
        else:
            kind = type(obj).__name__
            desc = f"{name}: {kind}" + (f"  # {len(obj)} entries" if isinstance(obj, (dict, list, tuple, set, frozenset)) else "")
            rows.append((name, kind, desc, "", []))
    return rows


def api_page(modname: str, out_dir: Path) -> Path:
    mod = importlib.import_module(modname)
    lines = [f"# `{modname}`", ""]
    doc = doc_of(mod)
    if doc: lines += [f"> {doc.splitlines()[0]}", ""]
    src = re.search(r"File to edit: (?:\.\./)+nbs/(\S+?\.ipynb)", Path(mod.__file__).read_text(encoding="utf-8"))
    if src: lines += [f"Exported from the notebook [{src.group(1)}](../{Path(src.group(1)).stem}.md).", ""]
    for name, kind, header, d, members in api_entries(mod):
        lines += [f"## `{name}`", "", f"```python\n{header}\n```", ""]
        if d: lines += [d, ""]
        for m, mh, md in members:
            lines += [f"- `{mh}`" + (f": {md.splitlines()[0]}" if md else "")]
        if members: lines.append("")
    f = out_dir / "api" / f"{modname}.md"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("\n".join(lines), encoding="utf-8")
    return f


def exported_modules() -> list:
    "Every exported module with public names: those nbdev indexes, and those that gather names from others (vkml.nn)."
    spec = importlib.util.spec_from_file_location("_vkml_modidx", ROOT / "vkml" / "_modidx.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    gathering = set()
    for f in (ROOT / "vkml").rglob("*.py"):
        src = f.read_text(encoding="utf-8")
        if "AUTOGENERATED" in src and re.search(r"^_all_ = \[", src, re.M):   # re-exports named in `_all_`
            parts = f.relative_to(ROOT).with_suffix("").parts
            gathering.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(set(m.d["syms"]) | gathering)


# --- 5. MkDocs ----------------------------------------------------------------------------------------

# The parts of the book: a notebook belongs to the last part whose first number is <= its own; an
# exported module to its notebook's part.
PARTS = [(0, "The core: ops, graph, schedule, the CPU oracle"), (7, "Tensors, autograd and functions"),
         (20, "The Vulkan backend"), (30, "Training: nn, losses, optimisers, data"), (40, "Experiments"),
         (50, "Reference")]


def part(nb_name: str) -> str:
    "The part of the book notebook `nb_name` (e.g. '27_dispatch.ipynb') belongs to."
    m = re.match(r"(\d+)", nb_name)   # 30a_nn_module: part 30
    n = int(m.group(1)) if m else 0
    return [name for first, name in PARTS if first <= n][-1]


def module_notebook(modname: str) -> str:
    "The notebook a module is exported from (its 'File to edit' line), or ''."
    mod = importlib.import_module(modname)
    src = re.search(r"File to edit: (?:\.\./)+nbs/(\S+?\.ipynb)", Path(mod.__file__).read_text(encoding="utf-8"))
    return src.group(1) if src else ""


def grouped(entries: list, key) -> list:
    "MkDocs nav sections: [{part: [entries in it]}] in the order of PARTS."
    out = {name: [] for _, name in PARTS}
    for e in entries: out[key(e)].append(e)
    return [{name: es} for name, es in out.items() if es]


def link_next(md: Path, nxt: Path | None, prev: Path | None):
    "Close a page with where to read on: the next notebook (its title and what it teaches) and the previous one."
    parts = []
    if nxt is not None:
        t, s = readme.title(nxt)
        parts.append(f"**Next:** [{t}]({'index.md' if nxt.name == 'index.ipynb' else page_link(nxt)})" + (f": {s}" if s else ""))
    if prev is not None:
        t, _ = readme.title(prev)
        parts.append(f"Previous: [{t}]({'index.md' if prev.name == 'index.ipynb' else page_link(prev)})")
    if parts:
        with md.open("a", encoding="utf-8") as f:
            f.write('\n\n<div class="vkml-next" markdown>\n\n' + "<br>\n".join(parts) + "\n\n</div>\n")

def write_config(build: Path, site: Path, nav: list) -> Path:
    import yaml
    cfg = yaml.safe_load((ROOT / "docs" / "mkdocs.yml").read_text(encoding="utf-8"))
    cfg.update(docs_dir=str(build / "md"), site_dir=str(site), nav=nav)
    f = build / "mkdocs.yml"
    f.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return f


def build(executed=None, build_dir=ROOT / "_proc" / "docs", site=ROOT / "_site", workers=2, allow_errors=False) -> Path:
    build_dir, site = Path(build_dir).resolve(), Path(site).resolve()
    if build_dir.exists(): shutil.rmtree(build_dir)
    md = build_dir / "md"
    md.mkdir(parents=True)
    nbs = readme.reading_order()
    runs = executed_notebooks(nbs, Path(executed) if executed else None, workers, allow_errors)
    nav, pages = [], []
    for i, p in enumerate(nbs):
        page = to_markdown(runs[p], p.stem, md)
        link_next(page, nbs[i + 1] if i + 1 < len(nbs) else None, nbs[i - 1] if i > 0 else None)
        if p.name == "index.ipynb":
            page.rename(md / "index.md"); nav.insert(0, {"Home": "index.md"})
        else:
            pages.append((p, {readme.title(p)[0].replace("`", ""): page.name}))  # nav titles are plain text
    notebooks = grouped(pages, lambda e: part(e[0].name))
    notebooks = [{k: [entry for _, entry in v]} for d in notebooks for k, v in d.items()]
    mods = [(m, module_notebook(m)) for m in exported_modules()]
    api = grouped([(m, nb, api_page(m, md)) for m, nb in mods], lambda e: part(e[1]))
    api = [{k: [{m: f"api/{f.name}"} for m, _, f in v]} for d in api for k, v in d.items()]
    shutil.copy(ROOT / "docs" / "extra.css", md / "extra.css")
    nav = nav[:1] + [{"Notebooks": notebooks}, {"API reference": api}]
    cfg = write_config(build_dir, site, nav)
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", DISABLE_MKDOCS_2_WARNING="true")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--clean", "-q", "-f", str(cfg)],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0: raise SystemExit(f"docs: mkdocs failed:\n{r.stdout}\n{r.stderr}")
    if r.stderr.strip(): print(r.stderr.strip())
    print(f"docs: {len(nbs)} notebook pages and {len(mods)} API pages in {site}")
    return site


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executed", help="a folder of executed notebooks to reuse (same source only)")
    ap.add_argument("--build", default=str(ROOT / "_proc" / "docs"), help="where the Markdown goes")
    ap.add_argument("--site", default=str(ROOT / "_site"), help="where the HTML site goes")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), help="notebooks run at once")
    ap.add_argument("--allow-errors", action="store_true",
                    help="render a notebook whose cells raise (with the traceback) instead of failing the build")
    a = ap.parse_args(argv)
    build(a.executed, a.build, a.site, a.workers, a.allow_errors)


if __name__ == "__main__": main()
