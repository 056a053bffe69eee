"""Imports point one way: the package's modules, read for their top-level imports (a function's own
imports are deferred on purpose), form no cycle. A package counts as its `__init__`; `import vkml`
itself (the top-level API, which imports everything) is left out, and so is a module's own parent
package (Python imports it first whatever the module says)."""
import ast
from pathlib import Path
from conftest import ROOT

PKG = ROOT / "vkml"


def module_name(f: Path) -> str:
    parts = list(f.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__": parts = parts[:-1]
    return ".".join(parts)


def top_level_imports(f: Path, mods=()) -> set:
    name, out = module_name(f), set()
    pkg = name if f.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.parse(f.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            subs = {f"{base}.{a.name}" for a in node.names} & set(mods)
            out |= subs if len(subs) == len(node.names) else subs | {base}   # `from pkg import sub`: the submodule
    return out


def graph() -> dict:
    mods = {module_name(f): f for f in PKG.rglob("*.py") if "__pycache__" not in f.parts and f.name != "_modidx.py"}
    g = {}
    for m, f in mods.items():
        ancestors = {m.rsplit(".", i)[0] for i in range(1, m.count(".") + 1)}   # imported first anyway
        g[m] = {t for t in top_level_imports(f, mods) if t in mods and t != m and t != "vkml" and t not in ancestors}
    return g


def cycles(g: dict) -> list:
    out, state = [], {}
    def visit(m, path):
        state[m] = 1
        for t in sorted(g[m]):
            if state.get(t) == 1: out.append(path[path.index(t):] + [t])
            elif t not in state: visit(t, path + [t])
        state[m] = 2
    for m in sorted(g):
        if m not in state: visit(m, [m])
    return out


def test_no_import_cycles():
    assert not cycles(graph()), "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles(graph()))


def test_the_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]


def test_nn_is_its_parts():
    "vkml.nn re-exports its parts, which import one way: module, then layers, then loss."
    g = graph()
    assert {"vkml.nn.module", "vkml.nn.layers", "vkml.nn.loss"} <= g["vkml.nn"]
    assert "vkml.nn.layers" not in g["vkml.nn.module"] and "vkml.nn.loss" not in g["vkml.nn.layers"]
