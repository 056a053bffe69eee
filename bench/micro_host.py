"""Per-primitive host costs (ns per call) of the operations graph building is made of, to compare two hosts:
    python bench/micro_host.py"""
import sys, time, weakref
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.dirname(__import__("os").path.abspath(__file__))))
import numpy as np
import vkml
from vkml.core.graph import Node, make_node
from vkml.core.ops import Op
from vkml.core.dtypes import float32

def bench(label, fn, n=20000):
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n): fn()
        best = min(best, (time.perf_counter() - t0) / n)
    print(f"{label:<34} {best * 1e9:9.1f} ns")

x = vkml.tensor(np.ones((16, 16), np.float32), device="cpu")
b = vkml.tensor(np.ones((16, 16), np.float32), device="cpu")
n0 = x.node
class S:
    __slots__ = ("a", "__weakref__")
s = S()
bench("empty call", lambda: None)
bench("isinstance", lambda: isinstance(x, int))
bench("weakref.ref", lambda: weakref.ref(s))
bench("tuple(shape)", lambda: tuple((16, 16)))
bench("Node(...)", lambda: Node(Op.ADD, (n0, n0), None, (16, 16), float32, "cpu"))
bench("make_node ADD", lambda: make_node(Op.ADD, (n0, n0)))
bench("x._apply ADD", lambda: x._apply(Op.ADD, x, b))
bench("x + b", lambda: x + b)
bench("dict get", lambda: {}.get(1))
bench("set add/contains", lambda: 1 in {1, 2})
bench("np.empty(4)", lambda: np.empty(4))
