"""A reshape of a strided view (a slice, a permutation, an expansion) is a view when the axes it merges or splits are
one chain of steps in memory (PyTorch's computeStride), and a copy otherwise: every case against numpy, on the
Vulkan backend, and no copy kernel where a view suffices."""
import itertools
import numpy as np
import pytest

import vkml
from vkml.core.dtypes import View
from vkml.core.ops import Op

pytestmark = pytest.mark.vulkan
rng = np.random.default_rng(0)


def factorings(shape):
    "Shapes with the same element count: merges of neighbours, splits of an axis in two, and the flat shape."
    out = {(int(np.prod(shape)),)}
    for i in range(len(shape) - 1):
        out.add(shape[:i] + (shape[i] * shape[i + 1],) + shape[i + 2:])
    for i, d in enumerate(shape):
        for f in (2, 3):
            if d % f == 0 and d > f and len(shape) < 4: out.add(shape[:i] + (d // f, f) + shape[i + 1:])
    return sorted(out)


def views():
    "(name, numpy array, vkml tensor) of strided views: slices, permutations, expansions, negative steps."
    a = rng.standard_normal((4, 6, 12)).astype(np.float32)
    t = vkml.tensor(a, device="vulkan")
    yield "last-axis slice", a[:, :, 4:8], t[:, :, 4:8]
    yield "middle slice", a[:, 1:5, :], t[:, 1:5, :]
    yield "stepped slice", a[:, :, ::2], t[:, :, ::2]
    yield "reversed", a[:, ::-1, :], t.flip(1)
    for p in itertools.permutations(range(3)):
        yield f"permute {p}", a.transpose(p), t.permute(p)
    b = rng.standard_normal((4, 1, 6)).astype(np.float32)
    yield "expand", np.broadcast_to(b, (4, 3, 6)), vkml.tensor(b, device="vulkan").expand(4, 3, 6)


def test_every_reshape_of_a_strided_view_has_numpys_values():
    n = 0
    for name, a, t in views():
        for shape in factorings(a.shape):
            got = (t.reshape(shape) * 2.0).numpy()
            np.testing.assert_array_equal(got, a.reshape(shape) * 2.0, err_msg=f"{name} -> {shape}")
            n += 1
    assert n > 50


def test_the_heads_of_a_fused_projection_are_views():
    """q, k, v sliced from one (B, T, 3C) tensor and split into heads, as a GPT block does: the fused attention reads
    them in place, one dispatch in all (each head was copied contiguous first: three more, and memory for each)."""
    from vkml.backends.vulkan.device import STATS
    import vkml.nn.functional as F
    x = vkml.tensor(rng.standard_normal((2, 5, 24)).astype(np.float32), device="vulkan")
    q, k, v = (u.reshape(2, 5, 2, 4).transpose(1, 2) for u in x.split(8, dim=2))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    before = STATS["dispatches"]
    vkml.realize(o)
    assert STATS["dispatches"] - before == 1
    qa, ka, va = x.numpy().reshape(2, 5, 3, 2, 4).transpose(2, 0, 3, 1, 4)
    w = qa @ ka.transpose(0, 1, 3, 2) / 2.0 + np.triu(np.full((5, 5), -np.inf), 1)
    w = np.exp(w - w.max(-1, keepdims=True)); w /= w.sum(-1, keepdims=True)
    np.testing.assert_allclose(o.numpy(), w @ va, rtol=1e-5, atol=1e-6)


def test_the_rule_copies_what_it_must():
    v = View.contiguous((3, 4)).permute((1, 0))
    assert v.reshape((12,)) is None and v.reshape((4, 3)) == v      # (the same shape is itself)
    assert View((2, 3), (0, 1)).reshape((6,)) is None                # an expanded axis cannot merge
    assert View((2, 3), (0, 1)).reshape((2, 3, 1)) == View((2, 3, 1), (0, 1, 1))


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_is_contiguous_answers_as_pytorch_does(device):
    m = vkml.tensor(np.arange(24, dtype=np.float32).reshape(4, 6), device=device)
    t = m.T
    vkml.realize(t)                                     # (a realized view keeps its strides)
    cases = {"itself": (m, True), "rows": (m[1:], True), "a computed value": (m * 2, True),
             "a transpose": (m.T, False), "a realized transpose": (t, False), "its copy": (m.T.contiguous(), True),
             "a stepped slice": (m[:, ::2], False), "an expansion": (m[:1].expand(3, 6), False),
             "columns split": (m[:, 2:4].reshape(4, 2, 1), False), "a split row": (m[1].reshape(2, 3), True)}
    got = {k: t.is_contiguous() for k, (t, _) in cases.items()}
    assert got == {k: want for k, (_, want) in cases.items()}


def test_contiguous_returns_the_tensor_itself_when_it_already_is():
    "PyTorch's `contiguous()`: no copy of a row-major tensor (nanoGPT's `y.transpose(1, 2).contiguous().view(...)`)."
    from vkml.backends.vulkan import profile
    x = vkml.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4), device="vulkan") + 1
    x.numpy()
    assert x.contiguous() is x
    back = x.transpose(0, 1).transpose(0, 1).contiguous()   # a view whose strides are row-major again
    with profile() as prof: v = back.numpy()
    assert list(prof) == [] and np.array_equal(v, x.numpy())
    t = x.transpose(1, 2).contiguous()                        # strided: a copy, as before
    assert t is not x and t.node.op is Op.CONTIGUOUS and np.array_equal(t.numpy(), x.numpy().transpose(0, 2, 1))
    c = x.clone()                                             # clone still copies
    assert c.node.op is Op.CONTIGUOUS
