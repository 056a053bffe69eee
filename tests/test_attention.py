"""Fused attention (Op.ATTENTION, its stats and backward ops): the numpy oracle against the composed softmax path
in float64, the Vulkan kernels against the oracle (forward and the three gradients, causal or not, L above and below S,
head dims of each register variant, strided heads, float16), NaN, which calls take the fused path, and that no
L x S matrix is ever part of the graph."""
import math

import numpy as np
import pytest

import vkml
import vkml.nn.functional as F
from oracle import assert_close
from vkml.core.dtypes import DTypeError, ShapeError, float16, float32
from vkml.core.graph import toposort
from vkml.core.ops import Op, ATTENTION_MAX_HEAD
from vkml.frontend.autograd import grad
from vkml.frontend.tensor import apply


def arrays(qs, ks, ev, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal(qs), rng.standard_normal(ks)
    v = rng.standard_normal(ks[:-1] + (ev,))
    g = rng.standard_normal(qs[:-1] + (ev,))
    return [a.astype(dtype) for a in (q, k, v, g)]


def fwd_bwd(q0, k0, v0, g0, device, causal, mask=None, scale=None):
    "o and the gradients of q, k, v for the upstream gradient g0, as numpy (`mask`: a numpy attn_mask)."
    q, k, v = (vkml.tensor(a, device=device, requires_grad=True) for a in (q0, k0, v0))
    if mask is not None: mask = vkml.tensor(mask, device=device)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
    (o * vkml.tensor(g0, device=device)).sum().backward()
    return [t.numpy() for t in (o, q.grad, k.grad, v.grad)]


def bounds(q, k, v, g, causal, scale, mask=None):
    "Σ|terms| of each result (o, dq, dk, dv) in float64: what each output sums, for the parity bound."
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None: s = s + mask
    if causal: s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(m == -np.inf, 0, m)); p /= np.maximum(p.sum(-1, keepdims=True), 1e-300)
    o = p @ v
    D = np.abs((g * o).sum(-1, keepdims=True))
    ds = p * (np.abs(g) @ np.swapaxes(np.abs(v), -1, -2) + D)
    return [p @ np.abs(v), scale * ds @ np.abs(k), scale * np.swapaxes(ds, -1, -2) @ np.abs(q), np.swapaxes(p, -1, -2) @ np.abs(g)]


# (q shape, k shape, Ev, causal): rank 2 to 4, L below and above S, each register variant (E <= 32, 64, 128)
CASES = [((9, 8), (9, 8), 8, True), ((2, 70, 16), (2, 45, 16), 8, False), ((2, 3, 70, 16), (2, 3, 90, 16), 24, True),
         ((1, 2, 130, 64), (1, 2, 130, 64), 64, True), ((1, 2, 33, 100), (1, 2, 47, 100), 72, False),
         ((2, 65, 4), (2, 3, 4), 4, True)]


@pytest.mark.parametrize("qs,ks,ev,causal", CASES)
def test_the_oracle_is_the_composed_softmax(qs, ks, ev, causal):
    q, k, v, g = arrays(qs, ks, ev)
    fused = fwd_bwd(q, k, v, g, "cpu", causal)
    # float64 takes the composed path (matmul, masked softmax, matmul) and its autograd rules
    want = fwd_bwd(*(a.astype(np.float64) for a in (q, k, v, g)), "cpu", causal)
    for what, a, w, t in zip(("o", "dq", "dk", "dv"), fused, want, bounds(q, k, v, g, causal, 1 / math.sqrt(qs[-1]))):
        assert_close(a, w, terms=t, k=max(ks[-2], qs[-2]), what=what, same_dtype=False)


@pytest.mark.vulkan
@pytest.mark.parametrize("qs,ks,ev,causal", CASES)
def test_vulkan_agrees_with_the_oracle(qs, ks, ev, causal):
    q, k, v, g = arrays(qs, ks, ev, seed=1)
    cpu, vk = fwd_bwd(q, k, v, g, "cpu", causal, scale=0.3), fwd_bwd(q, k, v, g, "vulkan", causal, scale=0.3)
    for what, a, w, t in zip(("o", "dq", "dk", "dv"), vk, cpu, bounds(q, k, v, g, causal, 0.3)):
        assert_close(a, w, terms=t, k=ks[-2] + qs[-1], what=what)


@pytest.mark.vulkan
def test_float16_storage_sums_in_float32():
    q, k, v, g = arrays((2, 2, 80, 32), (2, 2, 80, 32), 32, seed=2, dtype=np.float16)
    cpu, vk = fwd_bwd(q, k, v, g, "cpu", True), fwd_bwd(q, k, v, g, "vulkan", True)
    for what, a, w, t in zip(("o", "dq", "dk", "dv"), vk, cpu, bounds(q, k, v, g, True, 1 / math.sqrt(32))):
        assert a.dtype == np.float16
        assert_close(a, w, terms=t, k=80, what=what)


@pytest.mark.vulkan
def test_heads_read_through_strides():
    "GPT's layout: q, k, v are head views of one (B, T, 3C) projection, transposed; nothing is copied first."
    B, T, H, hd = 2, 40, 3, 16
    qkv0 = np.random.default_rng(3).standard_normal((B, T, 3 * H * hd)).astype(np.float32)
    g0 = np.random.default_rng(4).standard_normal((B, H, T, hd)).astype(np.float32)
    res = {}
    for d in ("cpu", "vulkan"):
        qkv = vkml.tensor(qkv0, device=d, requires_grad=True)
        q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in qkv.split(H * hd, dim=2))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        att = o.node.srcs[0]   # o is a (B, H, T, hd) view of a (B, T, H, hd) result, as PyTorch's flash attention's
        assert o.node.op is Op.PERMUTE and att.op is Op.ATTENTION and att.shape == (B, T, H, hd)
        assert att.srcs[0].op is Op.PERMUTE   # q: a view of qkv
        y = o.transpose(1, 2).reshape(B, T, H * hd)   # the heads joined again: a view, no copy
        n = y.node
        while n.op in (Op.RESHAPE, Op.PERMUTE): n = n.srcs[0]
        assert n is att and y.is_contiguous()
        from vkml.backends.vulkan import profile
        with profile() as prof: y0 = y.numpy()
        if d == "vulkan": assert list(prof) == ["attention_fwd32_f32"], sorted(prof)   # one dispatch: no copy of q, k, v or y
        (o * vkml.tensor(g0, device=d)).sum().backward()
        with profile() as bwd: dqkv = qkv.grad.numpy()
        if d == "vulkan":   # dq, and dk | dv, written into their parts of each row of qkv's gradient: nothing copied
            assert sorted(n for n in bwd if n.startswith("attention")) == ["attention_dk32_f32", "attention_dq32_f32",
                                                                           "attention_dv32_f32", "attention_stats32_f32"]
            assert not any(n.startswith("copy") for n in bwd), sorted(bwd)
        res[d] = (o.numpy(), dqkv)
        assert np.array_equal(y0, res[d][0].transpose(0, 2, 1, 3).reshape(B, T, H * hd))
    assert_close(res["vulkan"][0], res["cpu"][0], k=T, rtol=1e-5 * 4, what="o")
    assert_close(res["vulkan"][1], res["cpu"][1], k=T + hd, atol=1e-5, what="dqkv")



# how q, k, v come from the projections, and the copies their gradient's concatenations then make: the attention
# kernels write a gradient into each row of a concatenation only where its views show all of it, in order, and nothing
# else reads it (else a kernel's rows would land on another input's part, or outside the result)
LAYOUTS = {"q|k|v": ("qkv", 0), "q, k|v": ("q kv", 0), "q|k, v": ("qk v", 1), "q, v|k": ("q vk", 2)}


@pytest.mark.vulkan
@pytest.mark.parametrize("layout", LAYOUTS)
def test_attention_gradients_are_written_into_the_rows_of_the_projections_gradient(layout):
    from vkml.backends.vulkan import profile
    parts, copies = LAYOUTS[layout]
    B, T, H, hd = 2, 12, 2, 8
    C = H * hd
    rng = np.random.default_rng(21)
    arrays0 = {p: rng.standard_normal((B, T, len(p) * C)).astype(np.float32) for p in parts.split()}
    g0 = rng.standard_normal((B, H, T, hd)).astype(np.float32)
    res = {}
    for d in ("cpu", "vulkan"):
        ts = {p: vkml.tensor(a, device=d, requires_grad=True) for p, a in arrays0.items()}
        heads = {name: t[:, :, i * C:(i + 1) * C].reshape(B, T, H, hd).transpose(1, 2)
                 for p, t in ts.items() for i, name in enumerate(p)}
        o = F.scaled_dot_product_attention(heads["q"], heads["k"], heads["v"], is_causal=True)
        (o * vkml.tensor(g0, device=d)).sum().backward()
        with profile() as prof: res[d] = [ts[p].grad.numpy() for p in ts]
        if d == "vulkan": assert sum(v["count"] for n, v in prof.items() if n.startswith("copy")) == copies, prof
    for a, w in zip(res["vulkan"], res["cpu"]): assert_close(a, w, k=T + hd, atol=1e-5, what=layout)

@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_nan_reaches_only_the_queries_that_see_it(device):
    q, k, v, _ = arrays((6, 8), (6, 8), 4, seed=5)
    k[3, 2] = np.nan   # key 3: a causal query i sees it when i >= 3
    o = F.scaled_dot_product_attention(vkml.tensor(q, device=device), vkml.tensor(k, device=device),
                                       vkml.tensor(v, device=device), is_causal=True).numpy()
    assert np.isfinite(o[:3]).all() and np.isnan(o[3:]).all()


def graph_shapes(*ts):
    return {n.shape for n in toposort([t.node for t in ts])}


def test_no_scores_matrix_in_the_graph():
    "Forward and backward hold nothing of shape (..., L, S): the fused ops never form the scores."
    L, S = 48, 56
    q, k, v = (vkml.tensor(a, requires_grad=True) for a in arrays((2, L, 8), (2, S, 8), 8)[:3])
    o = F.scaled_dot_product_attention(q, k, v)
    dq, dk, dv = grad(o.sum(), (q, k, v))
    shapes = graph_shapes(o, dq, dk, dv)
    assert not any(s[-2:] == (L, S) or s[-2:] == (S, L) for s in shapes), shapes
    ops = {n.op for n in toposort([t.node for t in (dq, dk, dv)])}
    assert {Op.ATTENTION, Op.ATTENTION_STATS, Op.ATTENTION_BACKWARD} <= ops and Op.MATMUL not in ops


@pytest.mark.vulkan
def test_gradients_of_heads_are_laid_out_as_pytorch_writes_them():
    "With (B, H, L, E) heads the gradients come (B, L, H, E), heads side by side: merging the heads is a view, no copy."
    from vkml.backends.vulkan import profile
    B, H, T, hd = 2, 3, 10, 8
    q0, k0, v0, g0 = arrays((B, H, T, hd), (B, H, T, hd), hd, seed=3)   # (g0: a gradient whose rows are read as they lie)
    q, k, v = (vkml.tensor(a, device="vulkan", requires_grad=True) for a in (q0, k0, v0))
    grads = grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), vkml.tensor(g0, device="vulkan"))
    back = sorted((n.arg, n.shape) for n in toposort([g.node for g in grads]) if n.op is Op.ATTENTION_BACKWARD)
    assert [(a[2:], s) for a, s in back] == [((0, True), (B, T, H, hd)), ((1, True), (B, T, H * 2 * hd))]
    merged = [g.transpose(1, 2).reshape(B, T, H * hd) for g in grads]
    with profile() as prof: got = [merged[0].numpy()]   # dq's merged heads: contiguous, read back as they lie
    assert not any(n.startswith("copy") for n in prof), sorted(prof)
    got += [m.numpy() for m in merged[1:]]   # (dk and dv: rows 2 H hd apart, copied to be read back)
    cpu = [vkml.tensor(a, requires_grad=True) for a in (q0, k0, v0)]
    want = [g.transpose(1, 2).reshape(B, T, H * hd).numpy() for g in grad(F.scaled_dot_product_attention(*cpu, is_causal=True), cpu, vkml.tensor(g0))]
    for a, w in zip(got, want): assert_close(a, w, k=T, rtol=1e-5, atol=1e-5)


def test_one_backward_node_gives_dk_and_dv():
    "k's and v's gradients are views of one ATTENTION_BACKWARD (dk then dv in each row): one pass over the queries."
    q, k, v = (vkml.tensor(a, requires_grad=True) for a in arrays((2, 5, 8), (2, 7, 8), 4)[:3])
    dq, dk, dv = grad(F.scaled_dot_product_attention(q, k, v).sum(), (q, k, v))
    back = [n for n in toposort([t.node for t in (dq, dk, dv)]) if n.op is Op.ATTENTION_BACKWARD]
    assert sorted((n.arg[2], n.shape) for n in back) == [(0, (2, 5, 8)), (1, (2, 7, 12))]
    assert dk.node.op is Op.SLICE and dv.node.op is Op.SLICE and dk.node.srcs[0] is dv.node.srcs[0]
    assert dk.shape == (2, 7, 8) and dv.shape == (2, 7, 4)


@pytest.mark.parametrize("kw,fused", [({}, True), ({"is_causal": True}, True), ({"dropout_p": 0.1}, False),
                                      ({"attn_mask": "bool"}, True), ({"attn_mask": "float"}, True),
                                      ({"attn_mask": "float, with a gradient"}, False), ({"attn_mask": "float64"}, DTypeError),
                                      ({"attn_mask": "too many rows"}, ShapeError), ({"dtype": np.float64}, False),
                                      ({"head": ATTENTION_MAX_HEAD + 1}, False), ({"S": 0}, False)])
def test_which_calls_take_the_fused_kernel(kw, fused):
    dt, hd, S = kw.pop("dtype", np.float32), kw.pop("head", 8), kw.pop("S", 5)
    q, k, v = (vkml.tensor(a) for a in arrays((2, 4, hd), (2, S, hd), hd, dtype=dt)[:3])
    masks = {"bool": lambda: vkml.tensor(np.tril(np.ones((4, S), bool))),
             "float": lambda: vkml.tensor(np.zeros((2, 1, S), np.float32)),
             "float, with a gradient": lambda: vkml.tensor(np.zeros((4, S), np.float32), requires_grad=True),
             "float64": lambda: vkml.tensor(np.zeros((4, S))), "too many rows": lambda: vkml.tensor(np.zeros((5, S), np.float32))}
    if "attn_mask" in kw: kw["attn_mask"] = masks[kw["attn_mask"]]()
    if fused in (DTypeError, ShapeError):   # neither path takes it: the composed one's typed error, as PyTorch errs
        with pytest.raises(fused): F.scaled_dot_product_attention(q, k, v, **kw)
        return
    o = F.scaled_dot_product_attention(q, k, v, **kw)
    assert (o.node.op is Op.ATTENTION) == fused
    assert o.shape == (2, 4, hd)


def test_typed_errors():
    q, k, v = (vkml.tensor(a) for a in arrays((2, 4, 8), (2, 5, 8), 8)[:3])
    with pytest.raises(ShapeError, match="one batch shape"): apply(Op.ATTENTION, q, k[:1], v[:1], arg=(False, 1.0))
    with pytest.raises(ShapeError, match="do not fit"): apply(Op.ATTENTION, q, k, v[:, :4], arg=(False, 1.0))
    with pytest.raises(DTypeError, match="share a dtype"): apply(Op.ATTENTION, q, k.half(), v, arg=(False, 1.0))
    with pytest.raises(ShapeError, match="attention backward"):
        apply(Op.ATTENTION_BACKWARD, q, k, v, q, q, arg=(False, 1.0, 0))


@pytest.mark.vulkan
def test_a_jitted_step_replays_the_eager_numbers():
    "Under vkml.jit the fused kernels are captured and replayed: every replay gives the eager step's bits."
    q0, k0, v0, g0 = arrays((2, 3, 40, 16), (2, 3, 40, 16), 16, seed=6)
    q, k, v = (vkml.tensor(a, device="vulkan", requires_grad=True) for a in (q0, k0, v0))
    g = vkml.tensor(g0, device="vulkan")
    def step(g):   # q, k, v: state the step reaches (as a model's parameters)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return (o, *grad((o * g).sum(), (q, k, v)))
    eager = [t.numpy() for t in step(g)]
    f = vkml.jit(step)
    for _ in range(3):
        got = [t.numpy() for t in f(g)]
        assert all(np.array_equal(a, b) for a, b in zip(got, eager))
    assert f.captures, "the step was captured"


def mask_for(kind, qs, S, seed=7):
    "An attn_mask of `kind` for queries qs and S keys: boolean with a query that sees nothing, or float, broadcast."
    rng = np.random.default_rng(seed)
    L, batch = qs[-2], qs[:-2]
    if kind == "bool":
        m = rng.random(batch + (L, S)) < 0.7
        m[..., 1, :] = False                       # query 1 sees no key: 0 out, no gradient (PyTorch's safe softmax)
        return m, np.where(m, 0.0, -np.inf)
    if kind == "float, over the batch":            # (L, S), broadcast over batch and heads
        m = rng.standard_normal((L, S)); m[0, ::2] = -np.inf
        return m.astype(np.float32), m
    m = np.where(rng.random(batch[:1] + (1,) * (len(batch) - 1) + (1, S)) < 0.2, -np.inf, 0.0)   # key padding (B, 1, 1, S)
    m[..., 0] = 0.0
    return m.astype(np.float32), m


MASKED = [((2, 3, 20, 16), (2, 3, 33, 16), 8, "bool"), ((2, 40, 8), (2, 70, 8), 16, "float, over the batch"),
          ((2, 2, 70, 64), (2, 2, 70, 64), 64, "key padding"), ((30, 8), (25, 8), 8, "bool")]


@pytest.mark.parametrize("qs,ks,ev,kind", MASKED)
@pytest.mark.parametrize("causal", [False])   # (PyTorch refuses a mask with is_causal; the op takes both: below)
def test_masks_the_oracle_is_the_composed_softmax(qs, ks, ev, kind, causal):
    q, k, v, g = arrays(qs, ks, ev, seed=8)
    m, additive = mask_for(kind, qs, ks[-2])
    fused = fwd_bwd(q, k, v, g, "cpu", causal, mask=m)
    want = fwd_bwd(*(a.astype(np.float64) for a in (q, k, v, g)), "cpu", causal, mask=m if m.dtype == bool else m.astype(np.float64))
    for what, a, w, t in zip(("o", "dq", "dk", "dv"), fused, want, bounds(q, k, v, g, causal, 1 / math.sqrt(qs[-1]), additive)):
        assert np.isfinite(a).all(), what
        assert_close(a, w, terms=t, k=max(ks[-2], qs[-2]), what=what, same_dtype=False)


@pytest.mark.vulkan
@pytest.mark.parametrize("qs,ks,ev,kind", MASKED)
@pytest.mark.parametrize("causal", [False])
def test_masks_vulkan_agrees_with_the_oracle(qs, ks, ev, kind, causal):
    q, k, v, g = arrays(qs, ks, ev, seed=9)
    m, additive = mask_for(kind, qs, ks[-2])
    cpu, vk = fwd_bwd(q, k, v, g, "cpu", causal, mask=m), fwd_bwd(q, k, v, g, "vulkan", causal, mask=m)
    for what, a, w, t in zip(("o", "dq", "dk", "dv"), vk, cpu, bounds(q, k, v, g, causal, 1 / math.sqrt(qs[-1]), additive)):
        assert_close(a, w, terms=t, k=ks[-2] + qs[-1], what=what)


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_a_query_that_sees_no_key_gets_zero_as_in_pytorch(device):
    "PyTorch's safe softmax (torch 2.14, CPU): every key masked -> o = 0 and no gradient; fused and composed alike."
    for dt in (np.float32, np.float64):   # float64: the composed path
        q = vkml.tensor(np.ones((2, 4), dt), device=device, requires_grad=True)
        o = F.scaled_dot_product_attention(q, q, q, attn_mask=vkml.tensor(np.array([[False, False], [True, False]]), device=device))
        o.sum().backward()
        assert (o.node.op is Op.ATTENTION) == (dt == np.float32)
        assert o.numpy().tolist() == [[0.0] * 4, [1.0] * 4] and q.grad.numpy().tolist() == [[1.0] * 4, [0.0] * 4]


def test_a_mask_that_requires_grad_is_refused_by_the_fused_op():
    from vkml.core.dtypes import GradError
    q, k, v = (vkml.tensor(a, requires_grad=True) for a in arrays((4, 8), (5, 8), 8)[:3])
    m = vkml.tensor(np.zeros((4, 5), np.float32), requires_grad=True)
    with pytest.raises(GradError, match="no gradient for its mask"):
        apply(Op.ATTENTION, q, k, v, m, arg=(False, 1.0)).sum().backward()


@pytest.mark.vulkan
def test_the_op_takes_a_mask_and_causal_together():
    "The kernels apply both (the frontend never passes both, as PyTorch): Vulkan agrees with the oracle."
    q0, k0, v0, g0 = arrays((2, 50, 16), (2, 50, 16), 8, seed=10)
    m0 = mask_for("float, over the batch", (2, 50, 16), 50)[0]
    res = {}
    for d in ("cpu", "vulkan"):
        q, k, v = (vkml.tensor(a, device=d, requires_grad=True) for a in (q0, k0, v0))
        m = vkml.tensor(np.broadcast_to(m0, (2, 50, 50)).copy(), device=d)
        o = apply(Op.ATTENTION, q, k, v, m, arg=(True, 0.25))
        res[d] = [o.numpy(), *(t.numpy() for t in grad((o * vkml.tensor(g0, device=d)).sum(), (q, k, v)))]
    for what, a, w in zip(("o", "dq", "dk", "dv"), res["vulkan"], res["cpu"]):
        assert np.isfinite(w).all()
        assert_close(a, w, k=66, atol=1e-5, what=what)


@pytest.mark.vulkan
def test_operands_whose_elements_are_strided_are_copied_first():
    "k given as the transpose of a (B, E, S) tensor: its elements are S apart; the kernel reads a contiguous copy."
    from vkml.backends.vulkan import profile
    rng = np.random.default_rng(11)
    q0, kt0, v0 = (rng.standard_normal(s).astype(np.float32) for s in ((2, 12, 8), (2, 8, 10), (2, 10, 8)))   # kt0: (B, E, S)
    res = {}
    for d in ("cpu", "vulkan"):
        q, kt, v = (vkml.tensor(a, device=d) for a in (q0, kt0, v0))
        o = F.scaled_dot_product_attention(q, kt.transpose(1, 2), v)
        assert o.node.op is Op.ATTENTION
        with profile() as prof: res[d] = o.numpy()
        if d == "vulkan": assert any(n.startswith("copy") for n in prof), sorted(prof)
    assert_close(res["vulkan"], res["cpu"], k=18, what="o")


def test_the_switch_keeps_every_call_composed(monkeypatch):
    "VKML_FUSED_ATTENTION=0 (FUSED_ATTENTION) sends every call down the composed path, to compare the two."
    q, k, v = (vkml.tensor(a) for a in arrays((2, 4, 8), (2, 5, 8), 8)[:3])
    monkeypatch.setattr(F, "FUSED_ATTENTION", False)
    assert F.scaled_dot_product_attention(q, k, v, is_causal=True).node.op is not Op.ATTENTION


# ---- float16 on tensor cores (attention_cm.comp): the real kernels where the device has cooperative matrices, else
# their emulated twins (the same indexing, fragments in plain GLSL) ----
def _tensor_cores(monkeypatch):
    "The kernel-name prefix the f16 calls below must take: the real tensor-core kernels, or (lavapipe) their twins."
    import vkml.backends.vulkan as vkv
    import vkml.backends.vulkan.kernels_nn as kn
    if vkv.devices()[vkv.default_index()].features.get("coopmat_f16"):   # (VKML_ATTENTION_CM: a trial shape's kernels)
        import os
        return f"attention_cm{os.environ.get('VKML_ATTENTION_CM', '')}_"
    monkeypatch.setattr(kn, "COOPMAT", "emulate")
    return "attention_cm_emu_"


# (q shape, k shape, Ev, causal, mask kind or None): blocks cut short, L above and below S, head dims 8 to 64, masks
CM_CASES = [((2, 2, 80, 32), (2, 2, 80, 32), 32, True, None), ((1, 2, 70, 64), (1, 2, 45, 64), 64, False, None),
            ((2, 40, 16), (2, 90, 16), 24, True, None), ((33, 8), (33, 8), 8, False, None),
            ((2, 3, 20, 16), (2, 3, 33, 16), 8, False, "bool"), ((2, 40, 8), (2, 70, 8), 16, False, "float, over the batch"),
            ((2, 2, 70, 64), (2, 2, 70, 64), 64, False, "key padding")]


@pytest.mark.vulkan
@pytest.mark.parametrize("qs,ks,ev,causal,kind", CM_CASES)
def test_float16_on_tensor_cores_agrees_with_the_oracle(qs, ks, ev, causal, kind, monkeypatch):
    from vkml.backends.vulkan import profile
    prefix = _tensor_cores(monkeypatch)
    q, k, v, g = arrays(qs, ks, ev, seed=12, dtype=np.float16)
    m, additive = mask_for(kind, qs, ks[-2]) if kind else (None, None)
    if m is not None and m.dtype != bool: m = m.astype(np.float16)
    cpu = fwd_bwd(q, k, v, g, "cpu", causal, mask=m)
    with profile() as prof: vk = fwd_bwd(q, k, v, g, "vulkan", causal, mask=m)
    assert sorted(n for n in prof if n.startswith("attention")) == [f"{prefix}{x}_f16" for x in ("dkv", "dq", "fwd", "stats")], sorted(prof)
    for what, a, w, t in zip(("o", "dq", "dk", "dv"), vk, cpu, bounds(q, k, v, g, causal, 1 / math.sqrt(qs[-1]), additive)):
        assert a.dtype == np.float16
        assert_close(a, w, terms=t, k=ks[-2] + qs[-1], what=what)


@pytest.mark.vulkan
def test_float16_heads_of_one_projection_on_tensor_cores(monkeypatch):
    "GPT's layout in f16: q, k, v are strided head views of one (B, T, 3C) projection, read in 16-byte vectors, no copy."
    from vkml.backends.vulkan import profile
    prefix = _tensor_cores(monkeypatch)
    B, T, H, hd = 2, 72, 2, 64
    qkv0 = np.random.default_rng(13).standard_normal((B, T, 3 * H * hd)).astype(np.float16)
    g0 = np.random.default_rng(14).standard_normal((B, H, T, hd)).astype(np.float16)
    res = {}
    for d in ("cpu", "vulkan"):
        qkv = vkml.tensor(qkv0, device=d, requires_grad=True)
        q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in qkv.split(H * hd, dim=2))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with profile() as fwd: o0 = o.numpy()
        (o * vkml.tensor(g0, device=d)).sum().backward()
        with profile() as bwd: res[d] = (o0, qkv.grad.numpy())
        if d == "vulkan":   # the forward reads q, k, v where they lie (no copy); the backward's three gradients too
            assert sorted(fwd) == [f"{prefix}fwd_f16"], sorted(fwd)
            att = sorted(n for n in bwd if n.startswith("attention"))
            assert att == [f"{prefix}{x}_f16" for x in ("dkv", "dq", "stats")], sorted(bwd)
            # ... written into their parts of each row of qkv's gradient (dq | dk | dv): no concatenation copies them
            assert not any(n.startswith("copy") for n in bwd), sorted(bwd)
    assert_close(res["vulkan"][0], res["cpu"][0], k=T, rtol=2e-3, atol=2e-3, what="o")
    assert_close(res["vulkan"][1], res["cpu"][1], k=T + hd, rtol=2e-3, atol=2e-3, what="dqkv")


@pytest.mark.vulkan
def test_float16_that_tensor_cores_cannot_read_takes_the_plain_kernel(monkeypatch):
    "Head dims not a multiple of 8, or above 64, or a row stride that breaks the 16-byte vectors: the plain f16 kernel."
    from vkml.backends.vulkan import profile
    _tensor_cores(monkeypatch)
    for qs, ks, ev in [((2, 20, 12), (2, 20, 12), 12), ((1, 20, 72), (1, 20, 72), 72)]:
        q, k, v, g = arrays(qs, ks, ev, seed=15, dtype=np.float16)
        with profile() as prof: vk = fwd_bwd(q, k, v, g, "vulkan", True)
        assert not any("_cm" in n for n in prof) and any(n.startswith("attention_fwd") for n in prof), sorted(prof)
        cpu = fwd_bwd(q, k, v, g, "cpu", True)
        for what, a, w, t in zip(("o", "dq", "dk", "dv"), vk, cpu, bounds(q, k, v, g, True, 1 / math.sqrt(qs[-1]))):
            assert_close(a, w, terms=t, k=ks[-2] + qs[-1], what=what)
    # q, k, v slices of a (B, T, 3*8 + 4) tensor: row stride 28 halves, not a multiple of 8
    x0 = np.random.default_rng(16).standard_normal((2, 30, 28)).astype(np.float16)
    x = vkml.tensor(x0, device="vulkan")
    with profile() as prof: F.scaled_dot_product_attention(x[..., :8], x[..., 8:16], x[..., 16:24]).numpy()
    assert not any("_cm" in n for n in prof), sorted(prof)
