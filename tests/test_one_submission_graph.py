"""The Vulkan issue's done-criterion: a graph of 20+ operators of different kinds, uploads and
readback included, realizes in exactly one submission, and agrees with the CPU oracle."""
import numpy as np
import pytest
import vkml
import vkml.nn.functional as F
from vkml.frontend.tensor import toposort

pytestmark = pytest.mark.vulkan


def graph(device, data):
    x, w, idx, img, k = (vkml.tensor(a, device=device) for a in data)    # five uploads
    h = F.relu(x @ w + 1.0)                                 # matmul, elementwise
    h = vkml.where(h > 0.5, h.exp(), -h)                    # compare, where, exp, neg
    s = h.sum(dim=1, keepdim=True) / h.amax()               # reductions, div
    g = vkml.gather(h, 1, idx)                              # gather
    m = h.permute(1, 0).reshape(-1)[::3]                    # views: permute, reshape (copy), slice
    c = vkml.cat([m, vkml.pad(m, (1, 2)).flip(0)])          # cat, pad, flip
    y = F.conv2d(img, k, padding=1)                         # conv2d (im2col + matmul)
    p = F.max_pool2d(y, 2).mean(dim=(2, 3))                 # pool, mean
    z = F.softmax(p, dim=1).cumsum(dim=1)                   # softmax, cumsum
    return s, g, c, z


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 7)).astype(np.float32),
            rng.integers(0, 7, (6, 3)), rng.standard_normal((2, 3, 8, 8)).astype(np.float32),
            rng.standard_normal((4, 3, 3, 3)).astype(np.float32))


def test_twenty_operators_realize_in_one_submission(vulkan, data):
    outs = graph("vulkan", data)
    ops = {n.op for n in toposort([o.node for o in outs])}
    assert len(ops) >= 20, sorted(op.name for op in ops)
    sched = vkml.schedule(*outs)
    from vkml.core.ops import VIEW_OPS
    computed = sum(1 for n in sched.nodes if n.op not in VIEW_OPS)   # the nodes that are not free views
    vkml.reset_stats()
    vkml.realize(*outs)
    vals = [o.numpy() for o in outs]                        # readback was recorded in the same submission
    st = vkml.stats()
    assert st["submissions"] == 1, st
    assert 0 < st["dispatches"] < computed, (st, computed)  # fusion: fewer dispatches than computed nodes
    for v, c in zip(vals, (o.numpy() for o in graph("cpu", data))):
        np.testing.assert_allclose(v, c, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", ["cpu", "vulkan"])
def test_constants_read_through_views_by_hand_written_kernels(device):
    "Regression: a constant seen through views was always inlined as a value, so a kernel that binds "
    "memory (concatenation, matmul, a lone reduction) or a view asked for got no buffer."
    d = dict(device=device)
    x = vkml.tensor(np.ones(2, np.float32), **d)
    np.testing.assert_array_equal(vkml.cat([vkml.zeros(3, **d).reshape(3, 1).reshape(3), x]).numpy(), [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(vkml.cat([vkml.zeros(3, **d).detach(), x]).numpy(), [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(vkml.full((3, 4), 2.0, **d).T.sum(1).numpy(), [6, 6, 6, 6])
    np.testing.assert_array_equal((vkml.zeros(3, 4, **d).T @ vkml.ones(3, 2, **d)).numpy(), np.zeros((4, 2)))
    assert vkml.zeros(3, **d).reshape(3, 1).numpy().shape == (3, 1)
    np.testing.assert_array_equal(vkml.full((3,), 2.0, **d).expand(2, 3).numpy(), np.full((2, 3), 2.0))


def test_matmul_gradient_of_a_sum():
    "Regression: the gradient of sum() is a constant seen through an EXPAND; matmul's backward bound it as memory."
    w = vkml.tensor(np.ones((3, 8), np.float32), device="vulkan", requires_grad=True)
    x = vkml.tensor(np.ones((4, 8), np.float32), device="vulkan")
    (x @ w.T).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 8), 4.0))
