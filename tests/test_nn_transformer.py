"""The transformer modules of vkml.nn (MultiheadAttention, TransformerEncoderLayer, TransformerDecoderLayer,
TransformerEncoder, TransformerDecoder, Transformer): against a float64 numpy reference written here from
PyTorch's formulas, on the CPU and on Vulkan; every kind of mask; the head-averaged and per-head weights;
layouts and options; gradients by gradcheck (float64, CPU) and Vulkan's against the CPU's; PyTorch's
state-dict names and initialisation; typed errors; a vkml.jit training step equal to the eager one; and
PyTorch's own outputs and gradients (tests/fixtures/torch_transformer.npz, written by
tests/fixtures/make_torch_transformer.py), its state dicts loaded by name."""
import json, math
from pathlib import Path
import numpy as np
import pytest

import vkml
import vkml.nn as nn
import vkml.nn.functional as F
from vkml import tensor
import oracle

DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]
FIXTURE = Path(__file__).parent / "fixtures" / "torch_transformer.npz"
RNG = np.random.default_rng(7)


def rnd(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def T(a, device="cpu", **kw):
    return tensor(a, device=device, **kw)


# --- the float64 reference, from PyTorch's formulas ------------------------------------------------------------

def additive(mask):
    "A mask as what PyTorch adds to the scores: bool True -> -inf, False -> 0; a float mask as it is."
    if mask is None: return 0.0
    mask = np.asarray(mask)
    return np.where(mask, -np.inf, 0.0) if mask.dtype == bool else mask.astype(np.float64)


def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def mha_ref(q, k, v, p, H, attn_mask=None, key_padding_mask=None, need_weights=True):
    """PyTorch's multi_head_attention_forward in float64, batch first: q (B, L, E), k (B, S, kdim), v (B, S, vdim);
    `p` the module's state dict as arrays. Returns (output (B, L, E), per-head weights (B, H, L, S)). A query with
    every key masked: NaN with `need_weights`, else zero weights (scaled_dot_product_attention's safe softmax)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    B, L, E = q.shape
    S, D = k.shape[1], E // H
    if "in_proj_weight" in p: wq, wk, wv = np.split(p["in_proj_weight"].astype(np.float64), 3)
    else: wq, wk, wv = (p[f"{n}_proj_weight"].astype(np.float64) for n in "qkv")
    bq, bk, bv = np.split(p["in_proj_bias"].astype(np.float64), 3) if "in_proj_bias" in p else (0.0, 0.0, 0.0)
    heads = lambda x, n: x.reshape(B, n, H, D).transpose(0, 2, 1, 3)
    Q, K, V = heads(q @ wq.T + bq, L) / math.sqrt(D), heads(k @ wk.T + bk, S), heads(v @ wv.T + bv, S)
    s = Q @ K.transpose(0, 1, 3, 2)
    m = additive(attn_mask)
    if np.ndim(m) == 3: m = m.reshape(B, H, L, S)
    s = s + m + (additive(key_padding_mask)[:, None, None, :] if key_padding_mask is not None else 0.0)
    with np.errstate(invalid="ignore"): w = softmax(s)
    if not need_weights: w = np.where(np.isneginf(s).all(-1, keepdims=True), 0.0, w)
    out = (w @ V).transpose(0, 2, 1, 3).reshape(B, L, E) @ p["out_proj.weight"].astype(np.float64).T
    return out + (p["out_proj.bias"] if "out_proj.bias" in p else 0.0), w


def layer_norm(x, p, name, eps):
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return y * p[f"{name}.weight"] + (p[f"{name}.bias"] if f"{name}.bias" in p else 0.0)


ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0.0),
               "gelu": lambda x: 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))}


def sub(p, prefix):
    "The entries of state dict `p` under `prefix.`, without it."
    return {k[len(prefix) + 1:]: v for k, v in p.items() if k.startswith(prefix + ".")}


def feed_forward(x, p, act):
    lin = lambda h, n: h @ p[f"{n}.weight"].T + (p[f"{n}.bias"] if f"{n}.bias" in p else 0.0)
    return lin(ACTIVATIONS[act](lin(x, "linear1")), "linear2")


def encoder_layer_ref(x, p, H, act="relu", norm_first=False, eps=1e-5, mask=None, kpm=None):
    "TransformerEncoderLayer on batch-first float64 `x`."
    sa = lambda h: mha_ref(h, h, h, sub(p, "self_attn"), H, mask, kpm)[0]
    if norm_first:
        x = x + sa(layer_norm(x, p, "norm1", eps))
        return x + feed_forward(layer_norm(x, p, "norm2", eps), p, act)
    x = layer_norm(x + sa(x), p, "norm1", eps)
    return layer_norm(x + feed_forward(x, p, act), p, "norm2", eps)


def decoder_layer_ref(x, mem, p, H, act="relu", norm_first=False, eps=1e-5, tgt_mask=None, memory_kpm=None):
    "TransformerDecoderLayer on batch-first float64 `x` and `mem`."
    sa = lambda h: mha_ref(h, h, h, sub(p, "self_attn"), H, tgt_mask)[0]
    ca = lambda h: mha_ref(h, mem, mem, sub(p, "multihead_attn"), H, None, memory_kpm)[0]
    if norm_first:
        x = x + sa(layer_norm(x, p, "norm1", eps))
        x = x + ca(layer_norm(x, p, "norm2", eps))
        return x + feed_forward(layer_norm(x, p, "norm3", eps), p, act)
    x = layer_norm(x + sa(x), p, "norm1", eps)
    x = layer_norm(x + ca(x), p, "norm2", eps)
    return layer_norm(x + feed_forward(x, p, act), p, "norm3", eps)


def state(m):
    "A module's state dict as float64 numpy arrays."
    return {k: v.numpy().astype(np.float64) for k, v in m.state_dict().items()}


def perturbed(m, seed=3):
    "`m` with every parameter moved off its initial value (zero biases and unit norm weights hide mistakes)."
    rng = np.random.default_rng(seed)
    m.load_state_dict({k: v.numpy() + rng.standard_normal(v.shape).astype(np.float32) * 0.1 for k, v in m.state_dict().items()})
    return m


def close(got, want, k=1, what=""):
    """Within 1e-5 relative of the array's scale (√k-scaled): float32 rounding against a float64 reference or
    PyTorch's float32; an element near zero (a cancellation in a gradient) is held to the largest element's scale."""
    want = np.asarray(want, np.float64)
    got = got.numpy() if hasattr(got, "numpy") else got
    scale = np.abs(want) + np.abs(want[np.isfinite(want)]).max(initial=0.0)
    oracle.assert_close(got, want, rtol=1e-5, atol=1e-6, k=k, terms=scale, same_dtype=False, what=what)


# --- MultiheadAttention against the reference ---------------------------------------------------------------------

def causal(n):
    return np.triu(np.ones((n, n), bool), 1)


MHA_CASES = {   # name -> (module kwargs, L, S, batch, masks(B, H, L, S) -> dict, forward flags)
    "plain": (dict(), 4, 5, 2, lambda B, H, L, S: {}, {}),
    "key_padding_bool": (dict(), 4, 5, 2, lambda B, H, L, S: dict(key_padding_mask=np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 1]], bool)), {}),
    "key_padding_float": (dict(), 3, 5, 2, lambda B, H, L, S: dict(key_padding_mask=rnd(B, S)), {}),
    "attn_float_2d": (dict(), 4, 5, 2, lambda B, H, L, S: dict(attn_mask=rnd(L, S)), {}),
    "attn_bool_3d": (dict(), 4, 4, 2, lambda B, H, L, S: dict(attn_mask=np.stack([causal(L), causal(L).T] * B)), {}),
    "both_masks": (dict(), 4, 5, 3, lambda B, H, L, S: dict(attn_mask=rnd(L, S), key_padding_mask=np.array([[0, 0, 0, 0, 1]] * B, bool)), {}),
    "causal_hint": (dict(), 5, 5, 2, lambda B, H, L, S: dict(attn_mask=causal(L)), dict(is_causal=True)),
    "batch_first": (dict(batch_first=True), 3, 4, 2, lambda B, H, L, S: dict(key_padding_mask=np.array([[0, 1, 0, 0]] * B, bool)), {}),
    "kdim_vdim": (dict(kdim=6, vdim=3), 4, 5, 2, lambda B, H, L, S: {}, {}),
    "no_bias_4_heads": (dict(num_heads=4, bias=False), 3, 5, 2, lambda B, H, L, S: dict(attn_mask=rnd(B * H, L, S)), {}),
    "one_head_per_head_weights": (dict(num_heads=1), 3, 3, 2, lambda B, H, L, S: {}, dict(average_attn_weights=False)),
    "every_key_hidden_no_weights": (dict(), 3, 4, 2, lambda B, H, L, S: dict(
        attn_mask=np.array([[1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1]], bool), key_padding_mask=np.array([[0] * 4, [1] * 4], bool)),
        dict(need_weights=False)),
}


def mha_inputs(kw, L, S, B):
    E = 8
    q, k, v = rnd(B, L, E), rnd(B, S, kw.get("kdim", E)), rnd(B, S, kw.get("vdim", E))
    lay = (lambda a: a) if kw.get("batch_first") else (lambda a: a.transpose(1, 0, 2))
    return (q, k, v), lay


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(MHA_CASES))
def test_mha_matches_the_reference(name, device):
    kw, L, S, B, masks, flags = MHA_CASES[name]
    kw = dict(kw)
    H = kw.pop("num_heads", 2)
    vkml.manual_seed(1)
    m = perturbed(nn.MultiheadAttention(8, H, **kw)).to(device)
    (q, k, v), lay = mha_inputs(kw, L, S, B)
    mk = masks(B, H, L, S)
    out, w = m(*(T(lay(a), device) for a in (q, k, v)), **{n: T(a, device) for n, a in mk.items()}, **flags)
    rout, rw = mha_ref(q, k, v, state(m), H, mk.get("attn_mask"), mk.get("key_padding_mask"), flags.get("need_weights", True))
    close(out, lay(rout), what="output")
    if not flags.get("need_weights", True): assert w is None; return
    close(w, rw.mean(1) if flags.get("average_attn_weights", True) else rw, what="weights")


@pytest.mark.parametrize("device", DEVICES)
def test_unbatched_is_one_sequence_of_the_batch(device):
    vkml.manual_seed(2)
    m = perturbed(nn.MultiheadAttention(8, 2)).to(device)
    q, k = rnd(4, 1, 8), rnd(5, 1, 8)
    kpm, am = np.array([[0, 0, 1, 0, 0]], bool), rnd(2, 4, 5)            # a 3-D mask is (num_heads, L, S) unbatched
    out, w = m(T(q[:, 0], device), T(k[:, 0], device), T(k[:, 0], device), key_padding_mask=T(kpm[0], device),
               attn_mask=T(am, device), average_attn_weights=False)
    bout, bw = m(T(q, device), T(k, device), T(k, device), key_padding_mask=T(kpm, device), attn_mask=T(am, device),
                 average_attn_weights=False)
    assert out.shape == (4, 8) and w.shape == (2, 4, 5)
    oracle.assert_close(out.numpy(), bout.numpy()[:, 0]); oracle.assert_close(w.numpy(), bw.numpy()[0])


# --- masks --------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mha():
    vkml.manual_seed(4)
    return perturbed(nn.MultiheadAttention(8, 2))


def test_bool_and_float_masks_of_one_pattern_agree(mha):
    x, hide = T(rnd(4, 2, 8)), causal(4)
    a = mha(x, x, x, attn_mask=T(hide))
    b = mha(x, x, x, attn_mask=T(np.where(hide, -np.inf, 0).astype(np.float32)))
    for u, v in zip(a, b): oracle.assert_close(u.numpy(), v.numpy())
    pad = np.array([[0, 0, 1, 0], [1, 0, 0, 0]], bool)
    a = mha(x, x, x, key_padding_mask=T(pad))
    b = mha(x, x, x, key_padding_mask=T(np.where(pad, -np.inf, 0).astype(np.float32)))
    for u, v in zip(a, b): oracle.assert_close(u.numpy(), v.numpy())


def test_padded_keys_get_no_weight_and_do_not_matter(mha):
    q, kv = rnd(3, 2, 8), rnd(5, 2, 8)
    pad = np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 1]], bool)
    out, w = mha(T(q), T(kv), T(kv), key_padding_mask=T(pad))
    weights = w.numpy()                                      # (B, L, S)
    assert (weights[0, :, 3:] == 0).all() and (weights[1, :, 4] == 0).all()
    changed = kv.copy(); changed[3:, 0] += 10; changed[4, 1] -= 10         # new values only at the padded keys
    oracle.assert_close(mha(T(q), T(changed), T(changed), key_padding_mask=T(pad))[0].numpy(), out.numpy())


def test_causal_mask_hides_later_positions(mha):
    x = rnd(5, 2, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    np.testing.assert_array_equal(mask.numpy(), np.where(causal(5), -np.inf, 0).astype(np.float32))
    out, w = mha(T(x), T(x), T(x), attn_mask=mask)
    assert (np.triu(w.numpy()[0], 1) == 0).all()
    later = x.copy(); later[3:] += 5.0
    oracle.assert_close(mha(T(later), T(later), T(later), attn_mask=mask)[0].numpy()[:3], out.numpy()[:3])
    hinted = mha(T(x), T(x), T(x), attn_mask=mask, is_causal=True, need_weights=False)[0]   # the hint changes nothing
    oracle.assert_close(hinted.numpy(), out.numpy())


def test_a_float_mask_biases_the_scores(mha):
    x = T(rnd(3, 1, 8))
    weights = lambda **kw: mha(x, x, x, average_attn_weights=False, **kw)[1].numpy()    # per head: (1, H, L, S)
    base = weights()
    shifted = weights(attn_mask=T(np.full((3, 3), 7.0, np.float32)))    # the same shift for every key
    oracle.assert_close(shifted, base, atol=1e-6)
    bias = np.zeros((3, 3), np.float32); bias[:, 0] = 2.0
    favoured = weights(attn_mask=T(bias))
    assert (favoured[..., 0] > base[..., 0]).all()
    s = np.log(base)                                               # softmax(s + b) = softmax(s) · e^b / Σ
    want = np.exp(s + bias) / np.exp(s + bias).sum(-1, keepdims=True)
    oracle.assert_close(favoured, want.astype(np.float32), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_query_with_every_key_masked_attends_to_nothing_or_is_nan_as_in_pytorch(mha, device):
    "PyTorch's two paths: need_weights=False (scaled_dot_product_attention's safe softmax) gives zero weights, so the"
    " output is out_proj's bias and the gradients are finite; need_weights=True (softmax over nothing) gives NaN."
    m = nn.MultiheadAttention(8, 2).to(device); m.load_state_dict(mha.state_dict())
    x = T(rnd(2, 2, 8), device, requires_grad=True)
    hide = T(np.array([[True, True], [False, True]]), device)           # query 0 sees no key
    out, w = m(x, x, x, attn_mask=hide, need_weights=False)
    assert w is None
    oracle.assert_close(out.numpy()[0], np.broadcast_to(m.out_proj.bias.numpy(), (2, 8)))
    out.sum().backward()
    assert np.isfinite(x.grad.numpy()).all() and all(np.isfinite(p.grad.numpy()).all() for p in m.parameters())
    out, w = m(x, x, x, attn_mask=hide)
    assert np.isnan(out.numpy()[0]).all() and np.isfinite(out.numpy()[1]).all() and np.isnan(w.numpy()[:, 0]).all()


def test_gradcheck_through_a_query_with_every_key_masked():
    vkml.manual_seed(22)
    m = perturbed(nn.MultiheadAttention(4, 2))
    kpm = np.array([[0, 0, 0], [1, 1, 1]], bool)                          # sequence 1: every key padding
    call = lambda m, q, k: m(q, k, k, key_padding_mask=tensor(kpm), attn_mask=tensor(causal(3)), need_weights=False)[0]
    assert gradcheck_module(m, call, [rnd(3, 2, 4), rnd(3, 2, 4)])


def test_need_weights_averaged_per_head_and_none(mha):
    x = T(rnd(4, 3, 8))
    out, avg = mha(x, x, x)
    _, per_head = mha(x, x, x, average_attn_weights=False)
    assert avg.shape == (3, 4, 4) and per_head.shape == (3, 2, 4, 4)
    oracle.assert_close(per_head.numpy().sum(-1), np.ones((3, 2, 4), np.float32), atol=1e-6)
    oracle.assert_close(per_head.numpy().mean(1), avg.numpy(), atol=1e-7)
    none_out, none_w = mha(x, x, x, need_weights=False)
    assert none_w is None
    oracle.assert_close(none_out.numpy(), out.numpy())


# --- layers, stacks and the Transformer against the reference ----------------------------------------------------

LAYER_CASES = [  # (activation, norm_first, batch_first, bias, eps)
    ("relu", False, False, True, 1e-5), ("gelu", True, True, True, 1e-5), ("relu", True, False, False, 1e-6),
    ("gelu", False, True, True, 1e-3),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act,norm_first,batch_first,bias,eps", LAYER_CASES)
def test_encoder_layer_matches_the_reference(act, norm_first, batch_first, bias, eps, device):
    vkml.manual_seed(5)
    m = perturbed(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=act, layer_norm_eps=eps,
                                             batch_first=batch_first, norm_first=norm_first, bias=bias)).to(device)
    x = rnd(2, 5, 8)
    lay = (lambda a: a) if batch_first else (lambda a: a.transpose(1, 0, 2))
    mask, kpm = causal(5), np.array([[0, 0, 0, 0, 1], [0, 0, 0, 0, 0]], bool)
    got = m(T(lay(x), device), src_mask=T(mask, device), src_key_padding_mask=T(kpm, device))
    close(got, lay(encoder_layer_ref(x, state(m), 2, act, norm_first, eps, mask, kpm)), k=2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act,norm_first,batch_first,bias,eps", LAYER_CASES[:2])
def test_decoder_layer_matches_the_reference(act, norm_first, batch_first, bias, eps, device):
    vkml.manual_seed(6)
    m = perturbed(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation=act, layer_norm_eps=eps,
                                             batch_first=batch_first, norm_first=norm_first, bias=bias)).to(device)
    x, mem = rnd(2, 4, 8), rnd(2, 5, 8)
    lay = (lambda a: a) if batch_first else (lambda a: a.transpose(1, 0, 2))
    tgt_mask, mkpm = nn.Transformer.generate_square_subsequent_mask(4, device=device), np.array([[0, 0, 0, 1, 1], [0] * 5], bool)
    got = m(T(lay(x), device), T(lay(mem), device), tgt_mask=tgt_mask, memory_key_padding_mask=T(mkpm, device),
            tgt_is_causal=True)
    close(got, lay(decoder_layer_ref(x, mem, state(m), 2, act, norm_first, eps, causal(4), mkpm)), k=2)


def test_stacks_and_transformer_match_the_reference():
    vkml.manual_seed(8)
    model = perturbed(nn.Transformer(8, 2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
                                     batch_first=True))
    src, tgt = rnd(2, 5, 8), rnd(2, 3, 8)
    kpm = np.array([[0, 0, 0, 1, 1], [0] * 5], bool)
    p = state(model)
    mem = src.astype(np.float64)
    for i in range(2): mem = encoder_layer_ref(mem, sub(p, f"encoder.layers.{i}"), 2, kpm=kpm)
    mem = layer_norm(mem, p, "encoder.norm", 1e-5)
    y = tgt.astype(np.float64)
    for i in range(2): y = decoder_layer_ref(y, mem, sub(p, f"decoder.layers.{i}"), 2, tgt_mask=causal(3), memory_kpm=kpm)
    y = layer_norm(y, p, "decoder.norm", 1e-5)
    got = model(T(src), T(tgt), tgt_mask=nn.Transformer.generate_square_subsequent_mask(3), src_key_padding_mask=T(kpm),
                memory_key_padding_mask=T(kpm))
    close(got, y, k=4)


@pytest.mark.vulkan
def test_a_transformer_step_on_vulkan_equals_the_cpus():
    "Forward and every gradient of a small Transformer (with masks) on Vulkan and on the CPU, within the parity bound."
    src, tgt, g, mem_mask = rnd(5, 2, 8), rnd(4, 2, 8), rnd(4, 2, 8), rnd(4, 5)
    kpm = np.array([[0, 0, 0, 0, 1], [0, 0, 1, 1, 1]], bool)
    def run(device):
        vkml.manual_seed(9)
        model = perturbed(nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, activation="gelu", norm_first=True)).to(device)
        s, t = T(src, device, requires_grad=True), T(tgt, device, requires_grad=True)
        y = model(s, t, tgt_mask=nn.Transformer.generate_square_subsequent_mask(4, device=device),
                  src_key_padding_mask=T(kpm, device), memory_mask=T(mem_mask, device))
        y.backward(gradient=T(g, device))
        return [y.numpy(), s.grad.numpy(), t.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]
    for v, c in zip(run("vulkan"), run("cpu")):
        oracle.assert_close(v, c, k=64, atol=1e-5)


# --- gradients ------------------------------------------------------------------------------------------------------

def owner(module, dotted):
    "(the submodule holding parameter `dotted`, its name there)."
    *path, leaf = dotted.split(".")
    for part in path: module = module._modules[part]
    return module, leaf


def gradcheck_module(module, call, inputs, names=None):
    "gradcheck of `call(module, *inputs)` with respect to the inputs and the parameters `names` (all by default)."
    params = dict(module.named_parameters())
    names = list(params) if names is None else names
    holders = [owner(module, n) for n in names]
    def fn(*ts):
        for (m, leaf), p in zip(holders, ts[len(inputs):]): m._parameters[leaf] = p     # gradcheck's float64 leaves
        return call(module, *ts[:len(inputs)])
    try: return vkml.gradcheck(fn, [*inputs, *(params[n].numpy() for n in names)])
    finally:
        for (m, leaf), n in zip(holders, names): m._parameters[leaf] = params[n]


def test_gradcheck_mha_masks_and_averaged_weights():
    vkml.manual_seed(10)
    m = perturbed(nn.MultiheadAttention(4, 2))
    am, kpm = rnd(3, 3), np.array([[0, 0, 1], [0, 0, 0]], bool)
    call = lambda m, q, k, v: m(q, k, v, attn_mask=tensor(am), key_padding_mask=tensor(kpm))
    assert gradcheck_module(m, call, [rnd(3, 2, 4), rnd(3, 2, 4), rnd(3, 2, 4)])


def test_gradcheck_mha_separate_weights_batch_first_per_head():
    vkml.manual_seed(11)
    m = perturbed(nn.MultiheadAttention(4, 2, kdim=3, vdim=2, bias=False, batch_first=True))
    call = lambda m, q, k, v: m(q, k, v, attn_mask=tensor(causal(3)), average_attn_weights=False)
    assert gradcheck_module(m, call, [rnd(2, 3, 4), rnd(2, 3, 3), rnd(2, 3, 2)])


def test_gradcheck_self_attention_accumulates_into_one_input():
    vkml.manual_seed(12)
    m = perturbed(nn.MultiheadAttention(4, 1))
    assert gradcheck_module(m, lambda m, x: m(x, x, x, need_weights=False)[0], [rnd(3, 4)])   # unbatched too


@pytest.mark.parametrize("norm_first,act", [(False, "relu"), (True, "gelu")])
def test_gradcheck_encoder_layer(norm_first, act):
    vkml.manual_seed(13)
    m = perturbed(nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, activation=act, norm_first=norm_first))
    kpm = np.array([[0, 0, 1], [0, 0, 0]], bool)
    assert gradcheck_module(m, lambda m, x: m(x, src_key_padding_mask=tensor(kpm)), [rnd(3, 2, 4)])


def test_gradcheck_decoder_layer_through_the_memory():
    vkml.manual_seed(14)
    m = perturbed(nn.TransformerDecoderLayer(4, 2, 4, dropout=0.0, batch_first=True))
    names = ["multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias", "norm2.weight", "linear1.weight"]
    call = lambda m, x, mem: m(x, mem, tgt_mask=tensor(causal(2)))
    assert gradcheck_module(m, call, [rnd(1, 2, 4), rnd(1, 3, 4)], names)


# --- layouts and options ------------------------------------------------------------------------------------------

def test_layouts_of_the_layers_and_the_transformer_agree():
    vkml.manual_seed(15)
    seq = perturbed(nn.Transformer(8, 2, 1, 1, 16, dropout=0.0))
    bf = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True)
    bf.load_state_dict(seq.state_dict())
    src, tgt = rnd(2, 5, 8), rnd(2, 3, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    want = bf(T(src), T(tgt), tgt_mask=mask).numpy()
    oracle.assert_close(seq(T(src.transpose(1, 0, 2)), T(tgt.transpose(1, 0, 2)), tgt_mask=mask).numpy().transpose(1, 0, 2), want)
    oracle.assert_close(bf(T(src[1]), T(tgt[1]), tgt_mask=mask).numpy(), want[1])              # unbatched (L, E)
    enc = bf.encoder.layers[0]
    oracle.assert_close(enc(T(src[0])).numpy(), enc(T(src)).numpy()[0])


def test_dropout_drops_attention_weights_in_training_only():
    vkml.manual_seed(16)
    m = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = T(rnd(6, 2, 8))
    vkml.manual_seed(0); w1 = m(x, x, x, average_attn_weights=False)[1].numpy()
    vkml.manual_seed(0); w2 = m(x, x, x, average_attn_weights=False)[1].numpy()
    np.testing.assert_array_equal(w1, w2)                                 # one seed, one mask
    assert (w1 == 0).mean() > 0.3 and not np.allclose(w1.sum(-1), 1)     # dropped, the rest scaled by 2
    m.eval()
    oracle.assert_close(m(x, x, x)[1].numpy().sum(-1), np.ones((2, 6), np.float32), atol=1e-6)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    a, b = layer(x).numpy(), layer(x).numpy()
    assert not np.allclose(a, b)
    layer.eval(); np.testing.assert_array_equal(layer(x).numpy(), layer(x).numpy())


def test_activation_by_name_function_or_module():
    vkml.manual_seed(17)
    base = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu")
    as_module = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=nn.GELU())
    as_function = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=lambda h: F.gelu(h))
    for m in (as_module, as_function): m.load_state_dict(base.state_dict())
    assert base.activation is F.gelu and nn.TransformerEncoderLayer(8, 2).activation is F.relu
    assert "activation" in dict(as_module.named_modules()) and list(as_module.state_dict()) == list(base.state_dict())
    x = T(rnd(3, 2, 8))
    for m in (as_module, as_function): oracle.assert_close(m(x).numpy(), base(x).numpy())


def test_stacks_copy_the_layer_and_the_transformer_takes_custom_parts():
    vkml.manual_seed(18)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    enc = nn.TransformerEncoder(layer, 3)
    ws = [l.self_attn.in_proj_weight for l in enc.layers]
    assert len({id(w) for w in ws}) == 3 and all(isinstance(w, nn.Parameter) for w in ws)
    assert all(np.array_equal(w.numpy(), layer.self_attn.in_proj_weight.numpy()) for w in ws)
    assert enc.norm is None and not any(k.startswith("norm") for k in enc.state_dict())
    with vkml.no_grad(): ws[0].mul_(2.0)
    assert not np.array_equal(ws[0].numpy(), ws[1].numpy())              # independent copies
    custom = nn.TransformerEncoder(layer, 1)
    model = nn.Transformer(8, 2, num_decoder_layers=1, dim_feedforward=16, custom_encoder=custom)
    assert model.encoder is custom and list(model.state_dict())[0] == "encoder.layers.0.self_attn.in_proj_weight"
    bound = math.sqrt(6 / (8 + 16))                                      # Transformer re-draws every matrix (Xavier)
    assert np.abs(custom.layers[0].linear1.weight.numpy()).max() <= bound
    assert nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16), 0)(T(rnd(2, 1, 8)), T(rnd(3, 1, 8))).shape == (2, 1, 8)


@pytest.mark.vulkan
def test_modules_built_on_vulkan_hold_the_cpus_weights():
    vkml.manual_seed(19); cpu = nn.Transformer(8, 2, 1, 1, 16)
    vkml.manual_seed(19); vk = nn.Transformer(8, 2, 1, 1, 16, device="vulkan")
    for (n, a), (_, b) in zip(cpu.state_dict().items(), vk.state_dict().items()):
        assert b.device.startswith("vulkan"), n
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert nn.MultiheadAttention(8, 2, device="vulkan").in_proj_weight.device.startswith("vulkan")


# --- names, shapes and initialisation: PyTorch's ------------------------------------------------------------------

MHA_KEYS = ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
MHA_SEPARATE_KEYS = ["q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
MHA_NO_BIAS_KEYS = ["in_proj_weight", "out_proj.weight"]
ENCODER_LAYER_KEYS = [
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
    "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight",
    "norm2.bias"]
ENCODER_LAYER_NO_BIAS_KEYS = ["self_attn.in_proj_weight", "self_attn.out_proj.weight", "linear1.weight", "linear2.weight",
                              "norm1.weight", "norm2.weight"]
DECODER_LAYER_KEYS = [
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
    "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias", "multihead_attn.out_proj.weight",
    "multihead_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight",
    "norm1.bias", "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias"]
TRANSFORMER_1_1_KEYS = [   # Transformer(num_encoder_layers=1, num_decoder_layers=1)
    "encoder.layers.0.self_attn.in_proj_weight", "encoder.layers.0.self_attn.in_proj_bias",
    "encoder.layers.0.self_attn.out_proj.weight", "encoder.layers.0.self_attn.out_proj.bias",
    "encoder.layers.0.linear1.weight", "encoder.layers.0.linear1.bias", "encoder.layers.0.linear2.weight",
    "encoder.layers.0.linear2.bias", "encoder.layers.0.norm1.weight", "encoder.layers.0.norm1.bias",
    "encoder.layers.0.norm2.weight", "encoder.layers.0.norm2.bias", "encoder.norm.weight", "encoder.norm.bias",
    "decoder.layers.0.self_attn.in_proj_weight", "decoder.layers.0.self_attn.in_proj_bias",
    "decoder.layers.0.self_attn.out_proj.weight", "decoder.layers.0.self_attn.out_proj.bias",
    "decoder.layers.0.multihead_attn.in_proj_weight", "decoder.layers.0.multihead_attn.in_proj_bias",
    "decoder.layers.0.multihead_attn.out_proj.weight", "decoder.layers.0.multihead_attn.out_proj.bias",
    "decoder.layers.0.linear1.weight", "decoder.layers.0.linear1.bias", "decoder.layers.0.linear2.weight",
    "decoder.layers.0.linear2.bias", "decoder.layers.0.norm1.weight", "decoder.layers.0.norm1.bias",
    "decoder.layers.0.norm2.weight", "decoder.layers.0.norm2.bias", "decoder.layers.0.norm3.weight",
    "decoder.layers.0.norm3.bias", "decoder.norm.weight", "decoder.norm.bias"]


def test_state_dict_names_and_shapes_are_pytorchs():
    shapes = lambda m: {k: v.shape for k, v in m.state_dict().items()}
    m = nn.MultiheadAttention(8, 2)
    assert list(m.state_dict()) == MHA_KEYS
    assert shapes(m) == {"in_proj_weight": (24, 8), "in_proj_bias": (24,), "out_proj.weight": (8, 8), "out_proj.bias": (8,)}
    sep = nn.MultiheadAttention(8, 2, kdim=6, vdim=5)
    assert list(sep.state_dict()) == MHA_SEPARATE_KEYS
    assert [shapes(sep)[k] for k in MHA_SEPARATE_KEYS[:4]] == [(8, 8), (8, 6), (8, 5), (24,)]
    assert list(nn.MultiheadAttention(8, 2, bias=False).state_dict()) == MHA_NO_BIAS_KEYS
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    assert list(layer.state_dict()) == ENCODER_LAYER_KEYS
    assert (shapes(layer)["linear1.weight"], shapes(layer)["linear2.weight"]) == ((16, 8), (8, 16))
    assert list(nn.TransformerEncoderLayer(8, 2, 16, bias=False).state_dict()) == ENCODER_LAYER_NO_BIAS_KEYS
    assert list(nn.TransformerDecoderLayer(8, 2, 16).state_dict()) == DECODER_LAYER_KEYS
    assert list(nn.Transformer(8, 2, 1, 1, 16).state_dict()) == TRANSFORMER_1_1_KEYS
    assert [n for n, _ in nn.Transformer(8, 2, 1, 1, 16).named_parameters()] == TRANSFORMER_1_1_KEYS
    assert len(nn.Transformer(8, 2, 2, 3, 16).state_dict()) == 2 * 12 + 2 + 3 * 18 + 2
    for m in (nn.TransformerEncoderLayer(8, 2), nn.TransformerDecoderLayer(8, 2)):
        assert m.linear1.out_features == 2048 and m.dropout.p == 0.1 and m.norm1.eps == 1e-5      # PyTorch's defaults
    t = nn.Transformer(16, 2, 1, 1)
    assert (t.d_model, t.nhead, t.batch_first, t.encoder.layers[0].linear1.out_features) == (16, 2, False, 2048)


def test_initialisation_is_pytorchs():
    vkml.manual_seed(20)
    m = nn.MultiheadAttention(16, 4)
    w = m.in_proj_weight.numpy()
    bound = math.sqrt(6 / (16 + 48))                                      # Xavier-uniform of (3E, E)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not m.in_proj_bias.numpy().any() and not m.out_proj.bias.numpy().any()
    assert np.abs(m.out_proj.weight.numpy()).max() <= 1 / 4               # Linear's own draw, U(±1/√fan_in)
    sep = nn.MultiheadAttention(16, 4, kdim=8)
    assert np.abs(sep.k_proj_weight.numpy()).max() <= math.sqrt(6 / (16 + 8))
    t = nn.Transformer(8, 2, 1, 1, 32)
    for n, p in t.named_parameters():
        a = p.numpy()
        if a.ndim == 2: assert np.abs(a).max() <= math.sqrt(6 / sum(a.shape)), n
        elif "norm" in n: assert np.all(a == (1.0 if n.endswith("weight") else 0.0)), n
    vkml.manual_seed(20)
    np.testing.assert_array_equal(nn.MultiheadAttention(16, 4).in_proj_weight.numpy(), w)      # one seed, one model


# --- typed errors -------------------------------------------------------------------------------------------------

MHA8 = nn.MultiheadAttention(8, 2)
X = tensor(rnd(4, 2, 8))


@pytest.mark.parametrize("call,exc,text", [
    (lambda: nn.MultiheadAttention(8, 3), vkml.ArgumentError, "divisible"),
    (lambda: nn.MultiheadAttention(8, 2, add_bias_kv=True), vkml.ArgumentError, "add_bias_kv"),
    (lambda: nn.MultiheadAttention(8, 2, add_zero_attn=True), vkml.ArgumentError, "add_zero_attn"),
    (lambda: nn.MultiheadAttention(0, 2), vkml.ArgumentError, "positive"),
    (lambda: nn.MultiheadAttention(8, 2, kdim=2.5), vkml.ArgumentError, "kdim"),
    (lambda: nn.MultiheadAttention(8, 2, dropout=1.5), vkml.ArgumentError, "dropout"),
    (lambda: nn.MultiheadAttention(8, 2, dtype=vkml.float16), vkml.DTypeError, "float32"),
    (lambda: MHA8(tensor(rnd(1, 4, 2, 8)), X, X), vkml.ShapeError, "batched 3-D or unbatched 2-D"),
    (lambda: MHA8(X, X[:, 0], X[:, 0]), vkml.ShapeError, "3-D key and value"),
    (lambda: MHA8(tensor(rnd(4, 2, 6)), X, X), vkml.ShapeError, "embed_dim"),
    (lambda: MHA8(X, X, X[:3]), vkml.ShapeError, "must agree"),
    (lambda: MHA8(X, X[:, :1], X[:, :1]), vkml.ShapeError, "batch sizes"),
    (lambda: MHA8(X, X, X, key_padding_mask=tensor(np.zeros(4, bool))), vkml.ShapeError, "(batch, S)"),
    (lambda: MHA8(X, X, X, key_padding_mask=tensor(np.zeros((2, 5), bool))), vkml.ShapeError, "(batch, S) = (2, 4)"),
    (lambda: MHA8(X, X, X, attn_mask=tensor(np.zeros((4, 5), bool))), vkml.ShapeError, "(L, S) = (4, 4)"),
    (lambda: MHA8(X, X, X, attn_mask=tensor(np.zeros((2, 4, 4), bool))), vkml.ShapeError, "(batch·num_heads, L, S)"),
    (lambda: MHA8(X, X, X, attn_mask=tensor(np.zeros(4, bool))), vkml.ShapeError, "attn_mask"),
    (lambda: MHA8(X, X, X, attn_mask=tensor(np.zeros((4, 4), np.int64))), vkml.DTypeError, "`.bool()`"),
    (lambda: MHA8(X, X, X, attn_mask=np.zeros((4, 4), bool)), vkml.DTypeError, "vkml Tensor"),
    (lambda: MHA8(X[:, 0], X[:, 0], X[:, 0], key_padding_mask=np.zeros(4, bool)), vkml.DTypeError, "vkml Tensor"),
    (lambda: MHA8(X, X, X, key_padding_mask=tensor(np.zeros((2, 4), np.float16))), vkml.DTypeError, "float32"),
    (lambda: MHA8(X.half(), X, X), vkml.DTypeError, "`.float()`"),
    (lambda: MHA8(rnd(4, 2, 8), X, X), vkml.DTypeError, "vkml.tensor"),
    (lambda: MHA8(X, X, X, is_causal=True), vkml.ArgumentError, "generate_square_subsequent_mask"),
    (lambda: nn.TransformerEncoderLayer(8, 2, activation="tanh"), vkml.ArgumentError, "relu/gelu"),
    (lambda: nn.TransformerEncoderLayer(8, 2, activation=3), vkml.ArgumentError, "callable"),
    (lambda: nn.TransformerDecoderLayer(8, 3), vkml.ArgumentError, "divisible"),
    (lambda: nn.TransformerEncoder(nn.Linear(2, 2), -1), vkml.ArgumentError, "num_layers"),
    (lambda: nn.TransformerEncoder("layer", 2), vkml.ArgumentError, "Module"),
    (lambda: nn.TransformerEncoderLayer(8, 2)(X.half()), vkml.DTypeError, "`.float()`"),
    (lambda: nn.TransformerDecoderLayer(8, 2)(X, tensor(rnd(4, 3, 8))), vkml.ShapeError, "batch sizes"),
    (lambda: nn.Transformer(8, 2, 1, 1, 16)(X, tensor(rnd(3, 1, 8))), vkml.ShapeError, "batch number"),
    (lambda: nn.Transformer(8, 2, 1, 1, 16)(X, tensor(rnd(3, 2, 6))), vkml.ShapeError, "d_model=8"),
    (lambda: nn.Transformer(8, 2, 1, 1, 16)(rnd(4, 2, 8), X), vkml.DTypeError, "vkml Tensor"),
    (lambda: nn.Transformer.generate_square_subsequent_mask(3, dtype=vkml.float16), vkml.DTypeError, "float32"),
    (lambda: nn.Transformer.generate_square_subsequent_mask(-1), vkml.ArgumentError, "positive"),
    (lambda: MHA8.load_state_dict({k: np.zeros((8, 8), np.float32) for k in MHA_KEYS}), vkml.VkmlError, "size mismatch"),
])
def test_typed_errors(call, exc, text):
    with pytest.raises(exc) as e: call()
    assert isinstance(e.value, vkml.VkmlError) and text in str(e.value), str(e.value)


# --- a jitted training step ---------------------------------------------------------------------------------------

class Classifier(nn.Module):
    "Features in, an encoder of two pre-norm layers (dropout on), the mean over positions, a class out."
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 16)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True,
                                                                        norm_first=True), 2, norm=nn.LayerNorm(16))
        self.head = nn.Linear(16, 3)

    def forward(self, x, pad):
        return self.head(self.encoder(self.embed(x), src_key_padding_mask=pad).mean(1))


@pytest.mark.vulkan
def test_a_jitted_training_step_equals_the_eager_one():
    rng = np.random.default_rng(21)
    data = [(rng.standard_normal((4, 5, 4)).astype(np.float32), rng.integers(0, 3, 4)) for _ in range(6)]
    pad = np.zeros((4, 5), bool); pad[1, 3:] = pad[3, 4] = True
    def train(use_jit):
        vkml.manual_seed(0)
        model = Classifier().to("vulkan")
        opt = vkml.optim.Adam(model.parameters(), lr=0.01)
        def step(x, p, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x, p), y)
            loss.backward()
            opt.step()
            return loss
        if use_jit: step = vkml.jit(step)
        losses = [step(T(x, "vulkan"), T(pad, "vulkan"), T(y, "vulkan")).item() for x, y in data]
        return np.array(losses), [p.numpy() for p in model.parameters()], step
    eager_losses, eager_state, _ = train(False)
    jit_losses, jit_state, step = train(True)
    assert step.captured == 1 and step.calls == 6                    # a warm-up, a capture, four replays
    np.testing.assert_allclose(jit_losses, eager_losses, rtol=1e-5, atol=1e-6)
    for a, b in zip(jit_state, eager_state): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert len(set(np.round(jit_losses, 6))) == 6


# --- PyTorch's own numbers ----------------------------------------------------------------------------------------

FIXTURE_CASES = {   # case -> k of the bound: both sides round in float32, more so through more layers
    "mha_seq_first": 2, "mha_batch_first_self": 2, "mha_kdim_vdim": 2, "mha_unbatched_no_bias": 2,
    "mha_unbatched_causal": 2, "enc_post_relu": 4, "enc_pre_gelu_causal": 4, "enc_no_bias_unbatched": 4,
    "dec_post": 4, "dec_pre_gelu": 4, "encoder_stack_pre_norm": 4, "transformer": 4, "mha_every_key_hidden": 2,
    "enc_padded_sequence": 4}
KEYS_OF = {"mha_seq_first": MHA_KEYS, "mha_batch_first_self": MHA_KEYS, "mha_kdim_vdim": MHA_SEPARATE_KEYS,
           "mha_unbatched_no_bias": MHA_NO_BIAS_KEYS, "mha_unbatched_causal": MHA_KEYS, "enc_post_relu": ENCODER_LAYER_KEYS,
           "enc_pre_gelu_causal": ENCODER_LAYER_KEYS, "enc_no_bias_unbatched": ENCODER_LAYER_NO_BIAS_KEYS,
           "dec_post": DECODER_LAYER_KEYS, "dec_pre_gelu": DECODER_LAYER_KEYS, "mha_every_key_hidden": MHA_KEYS,
           "enc_padded_sequence": ENCODER_LAYER_KEYS}
_loaded = {}


def torch_fixture() -> dict:
    "The arrays of tests/fixtures/torch_transformer.npz; a missing file fails the test (it is never skipped)."
    if not _loaded:
        if not FIXTURE.exists():
            pytest.fail(f"{FIXTURE.relative_to(FIXTURE.parents[2])} is missing: run `python "
                        "tests/fixtures/make_torch_transformer.py` where PyTorch is installed, and commit what it writes")
        with np.load(FIXTURE, allow_pickle=False) as z: _loaded.update({k: z[k] for k in z.files})
    return _loaded


def case_of(name):
    "(config, {kind: {name: array}}) of one case: kind '' is the state dict, else input, mask, output, grad_output ..."
    z = torch_fixture()
    cfg = json.loads(str(z[f"{name}/config"]))
    parts = {}
    for key, a in z.items():
        case, _, rest = key.partition("/")
        if case != name or rest == "config": continue
        kind, _, leaf = rest.rpartition("/")
        parts.setdefault(kind, {})[leaf] = a
    return cfg, parts


def build(spec):
    "The vkML module a fixture's config names (PyTorch's class and keyword names); a config argument is built first."
    kwargs = {k: build(v) if isinstance(v, dict) and "cls" in v else v for k, v in spec["init"].items()}
    return getattr(nn, spec["cls"])(**kwargs)


def test_the_fixture_holds_every_case_and_pytorchs_key_lists():
    z = torch_fixture()
    assert {k.split("/")[0] for k in z} == set(FIXTURE_CASES)
    for name, keys in KEYS_OF.items():
        assert case_of(name)[0]["state_dict_keys"] == keys, name
    cfg = case_of("transformer")[0]
    assert list(build(cfg["module"]).state_dict()) == cfg["state_dict_keys"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(FIXTURE_CASES))
def test_pytorchs_outputs_and_gradients(name, device):
    cfg, parts = case_of(name)
    m = build(cfg["module"])
    assert list(m.state_dict()) == cfg["state_dict_keys"]
    m.load_state_dict(parts[""])
    m.eval().to(device)
    inputs = {n: T(a, device, requires_grad=True) for n, a in parts["input"].items()}
    result = m(*[inputs[a] for a in cfg["args"]], **{n: T(a, device) for n, a in parts.get("mask", {}).items()}, **cfg["flags"])
    outs = {n: o for n, o in zip(("out", "weights"), result if isinstance(result, tuple) else (result,)) if o is not None}
    assert set(outs) == set(parts["output"])
    loss = None
    for n, o in outs.items():
        term = (o * T(parts["grad_output"][n], device)).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    k = FIXTURE_CASES[name]
    for n, o in outs.items(): close(o, parts["output"][n], k=k, what=f"{name} {n}")
    for n, t in inputs.items(): close(t.grad, parts["grad_input"][n], k=k, what=f"{name} grad of {n}")
    params = dict(m.named_parameters())
    assert set(params) == set(parts["grad"])
    for n, g in parts["grad"].items(): close(params[n].grad, g, k=k, what=f"{name} grad of {n}")
