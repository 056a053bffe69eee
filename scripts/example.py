"""A small end-to-end example: build a lazy graph, print its schedule, realize it, check the value.

Runs on Vulkan when a device is available, else says why and runs on the CPU (the numpy oracle).
`make demo` runs this until the full demo (`vkml.demo`) exists.
"""
import numpy as np
import vkml
from vkml.core.ops import Op
from vkml.frontend.tensor import apply


def pick_device() -> str:
    "'vulkan' when a Vulkan device answers, else 'cpu' (with the reason printed)."
    try:
        vkml.tensor([0.0], device="vulkan").numpy()
        return "vulkan"
    except Exception as e:  # VulkanUnavailableError when no driver; anything else while the backend is young
        print(f"No Vulkan device here ({type(e).__name__}: {e}).\nRunning on the CPU backend, the numpy oracle.\n")
        return "cpu"


def add(a, b): return a + b if hasattr(vkml.Tensor, "__add__") else apply(Op.ADD, a, b)
def mul(a, b): return a * b if hasattr(vkml.Tensor, "__mul__") else apply(Op.MUL, a, b)


def main():
    device = pick_device()
    x_np = np.arange(6, dtype=np.float32).reshape(2, 3)
    w_np = np.full((2, 3), 0.5, dtype=np.float32)
    x, w = vkml.tensor(x_np, device=device), vkml.tensor(w_np, device=device)
    y = add(mul(x, w), x)                     # nothing runs yet: y is a node of a lazy graph
    print(f"y = x * w + x on {device}: the schedule realizing y will run")
    print(vkml.schedule(y), "\n")
    got = y.numpy()                           # realize: one schedule, one backend
    print("y =\n", got)
    np.testing.assert_allclose(got, x_np * w_np + x_np, rtol=1e-6)
    print("\nmatches numpy: ok")


if __name__ == "__main__": main()
