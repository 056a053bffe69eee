import sys; sys.path.insert(0, '.')
import numpy as np, vkml
import vkml.nn.functional as F
from vkml.frontend.autograd import grad
from vkml.frontend.tensor import schedule
from vkml.engine.schedule import FUSED_REDUCE
rng = np.random.default_rng(0)
for dev in ("cpu", "vulkan"):
    x = vkml.tensor(rng.standard_normal((8, 16, 32)).astype(np.float32), device=dev).requires_grad_()
    w = vkml.tensor(rng.standard_normal(32).astype(np.float32), device=dev).requires_grad_()
    b = vkml.tensor(rng.standard_normal(32).astype(np.float32), device=dev).requires_grad_()
    t = vkml.tensor(rng.standard_normal((8, 16, 32)).astype(np.float32), device=dev)
    y = F.layer_norm(x, 32, w, b)
    gx, gw, gb = grad((y * t).sum(), (x, w, b))
    ks = [k for k in schedule(gx, gw, gb).kernels if k.kind != "view"]
    print(dev, "kernels", len(ks), [k.kind for k in ks], "reductions", sum(1 for k in ks if any(n.op in FUSED_REDUCE for n in k.nodes)))
    print("  fwd kernels", [k.kind for k in schedule(y).kernels if k.kind != "view"])
