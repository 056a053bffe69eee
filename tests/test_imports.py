"""Imports point one way. Every import in the package is read, function bodies included (an import
deferred into a function is still a dependency, only a hidden one): the modules form no cycle, and
each layer imports only from the layers beneath it. A package counts as its `__init__`; a module's
own parent packages are left out (Python imports them first whatever the module says)."""
import ast
from pathlib import Path
from conftest import ROOT

PKG = ROOT / "vkml"

# The layers, bottom first (the table of notebook 03a): a module imports only from its own layer or lower.
LAYERS = [
    ("core", ["vkml.core"]),
    ("capture notes and schedule", ["vkml.engine.capture", "vkml.engine.schedule"]),
    ("backends", ["vkml.backends"]),
    ("frontend", ["vkml.frontend", "vkml.engine"]),       # the tensor, then the jit that records functions of it
    ("libraries", ["vkml.nn", "vkml.optim", "vkml.amp", "vkml.utils", "vkml.io", "vkml.data", "vkml.linalg", "vkml.special",
                   "vkml.masked", "vkml.signal", "vkml.distributed"]),
    ("user API", ["vkml"]),
    ("entry points", ["vkml.demo", "vkml.demo_gpt", "vkml.__main__"]),
    ("lab", ["vkml.lab"]),
]


def module_name(f: Path, root: Path = ROOT) -> str:
    parts = list(f.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__": parts = parts[:-1]
    return ".".join(parts)


def imports(f: Path, mods=(), root: Path = ROOT) -> set:
    "Every module `f` imports, wherever the statement is (module level or inside a function)."
    name, out = module_name(f, root), set()
    pkg = name if f.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
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
        ancestors = {m.rsplit(".", i)[0] for i in range(1, m.count(".") + 1)} - {"vkml"}   # imported first anyway
        g[m] = {t for t in imports(f, mods) if t in mods and t != m and t not in ancestors}
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


def layer(m: str) -> int:
    "The layer of module `m`: that of the longest prefix named in LAYERS."
    best = max((p for _, ps in LAYERS for p in ps if m == p or m.startswith(p + ".")), key=len)
    return next(i for i, (_, ps) in enumerate(LAYERS) if best in ps)


def upward(g: dict) -> list:
    return [(m, t) for m, ts in g.items() for t in ts if layer(t) > layer(m)]


def test_no_import_cycles():
    assert not cycles(graph()), "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles(graph()))


def test_layers_import_downward():
    bad = upward(graph())
    assert not bad, "imports from a higher layer:\n" + "\n".join(f"{m} ({LAYERS[layer(m)][0]}) -> {t} ({LAYERS[layer(t)][0]})" for m, t in bad)


def test_the_runtime_never_imports_the_lab():
    g = graph()
    assert not [(m, t) for m, ts in g.items() for t in ts if t.startswith("vkml.lab") and not m.startswith("vkml.lab")]


def test_the_checks_can_fail(tmp_path):
    "A cycle hidden in a function body is found, and so is an import from a higher layer."
    assert cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]
    f = tmp_path / "vkml" / "m.py"; f.parent.mkdir()
    f.write_text("def later():\n    from vkml.core import graph\n")
    assert "vkml.core.graph" in imports(f, {"vkml.core.graph"}, root=tmp_path)
    assert upward({"vkml.core.graph": {"vkml.frontend.tensor"}}) == [("vkml.core.graph", "vkml.frontend.tensor")]


def test_every_module_has_a_layer():
    assert all(isinstance(layer(m), int) for m in graph())


def test_nn_is_its_parts():
    "vkml.nn re-exports its parts, which import one way: module, then layers, then loss."
    g = graph()
    assert {"vkml.nn.module", "vkml.nn.layers", "vkml.nn.loss"} <= g["vkml.nn"]
    assert "vkml.nn.layers" not in g["vkml.nn.module"] and "vkml.nn.loss" not in g["vkml.nn.layers"]
