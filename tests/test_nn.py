"""vkml.nn: each layer's forward against an independent numpy reference, its gradients by gradcheck (CPU,
float64), the Module API (parameters, buffers, state dicts, modes, devices, errors), PyTorch's default
initialisation from the seeded generator, and the same layers on Vulkan against the CPU oracle."""
import math
import numpy as np
import pytest

import vkml
import vkml.frontend.autograd  # noqa: F401  (Tensor.backward)
import vkml.frontend.functions as VF
import vkml.nn as nn
from vkml.frontend.gradcheck import gradcheck
from vkml.core.dtypes import DTypeError, CheckpointError, ShapeError, float32, int64
from vkml.core.ops import Op
from vkml.frontend.tensor import tensor, toposort
from vkml.core.graph import no_grad
import oracle

RNG = np.random.default_rng(0)


def rnd(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def close(a, b, rtol=1e-5, atol=1e-5):
    oracle.assert_close(a, b, rtol=rtol, atol=atol, same_dtype=False, same_shape=False)


# --- independent numpy references ---------------------------------------------------------------------

def conv2d_ref(x, w, b, stride, pad, groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, ho, wo), np.float64)
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(ho):
            for j in range(wo):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride:i * stride + kh, j * stride:j * stride + kw]
                y[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return y + (0 if b is None else b.reshape(1, -1, 1, 1))


def conv_t_ref(x, w, b, stride, pad):
    n, ci, h, wd = x.shape
    _, co, kh, kw = w.shape
    full = np.zeros((n, co, (h - 1) * stride + kh, (wd - 1) * stride + kw))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw] += np.einsum("nc,cokl->nokl", x[:, :, i, j], w)
    y = full[:, :, pad:full.shape[2] - pad, pad:full.shape[3] - pad]
    return y + (0 if b is None else b.reshape(1, -1, 1, 1))


def pool_ref(x, k, s, fn):
    n, c, h, w = x.shape
    ho, wo = (h - k) // s + 1, (w - k) // s + 1
    y = np.zeros((n, c, ho, wo))
    for i in range(ho):
        for j in range(wo):
            y[:, :, i, j] = fn(x[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3))
    return y


def norm_ref(x, axes, eps):
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


ERF = np.vectorize(math.erf)
ACTS = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.GELU(), lambda x: x * 0.5 * (1 + ERF(x / math.sqrt(2)))),
    (nn.GELU("tanh"), lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    (nn.ELU(0.7), lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1))),
    (nn.Softplus(2.0), lambda x: np.log1p(np.exp(2 * x)) / 2),
    (nn.Softmax(dim=1), lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    (nn.LogSoftmax(dim=1), lambda x: x - np.log(np.exp(x).sum(1, keepdims=True))),
    (nn.Identity(), lambda x: x),
]


def layers():
    "(name, module, input array, reference fn(x, params dict))."
    VF.manual_seed(3)
    return [
        ("linear", nn.Linear(5, 3), rnd(4, 5), lambda x, p: x @ p["weight"].T + p["bias"]),
        ("linear_nobias", nn.Linear(5, 3, bias=False), rnd(2, 4, 5), lambda x, p: x @ p["weight"].T),
        ("conv2d", nn.Conv2d(2, 3, 3, padding=1), rnd(2, 2, 5, 5), lambda x, p: conv2d_ref(x, p["weight"], p["bias"], 1, 1)),
        ("conv2d_s2_g2", nn.Conv2d(4, 4, 3, stride=2, groups=2), rnd(1, 4, 7, 7),
         lambda x, p: conv2d_ref(x, p["weight"], p["bias"], 2, 0, 2)),
        ("conv_t", nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1), rnd(2, 3, 3, 3),
         lambda x, p: conv_t_ref(x, p["weight"], p["bias"], 2, 1)),
        ("maxpool", nn.MaxPool2d(2), rnd(2, 3, 6, 6), lambda x, p: pool_ref(x, 2, 2, np.max)),
        ("avgpool", nn.AvgPool2d(3, 2), rnd(1, 2, 7, 7), lambda x, p: pool_ref(x, 3, 2, np.mean)),
        ("flatten", nn.Flatten(), rnd(2, 3, 2, 2), lambda x, p: x.reshape(2, -1)),
        ("layernorm", nn.LayerNorm(6), rnd(3, 6), lambda x, p: norm_ref(x, (1,), 1e-5) * p["weight"] + p["bias"]),
        ("layernorm2d", nn.LayerNorm((2, 3)), rnd(4, 2, 3), lambda x, p: norm_ref(x, (1, 2), 1e-5) * p["weight"] + p["bias"]),
        ("rmsnorm", nn.RMSNorm(4, eps=1e-6), rnd(3, 4),
         lambda x, p: x / np.sqrt((x ** 2).mean(1, keepdims=True) + 1e-6) * p["weight"]),
        ("groupnorm", nn.GroupNorm(2, 4), rnd(2, 4, 3, 3),
         lambda x, p: norm_ref(x.reshape(2, 2, -1), (2,), 1e-5).reshape(x.shape) * p["weight"].reshape(1, -1, 1, 1)
         + p["bias"].reshape(1, -1, 1, 1)),
        ("batchnorm1d", nn.BatchNorm1d(3), rnd(5, 3), lambda x, p: norm_ref(x, (0,), 1e-5) * p["weight"] + p["bias"]),
        ("batchnorm2d", nn.BatchNorm2d(2), rnd(3, 2, 2, 2),
         lambda x, p: norm_ref(x, (0, 2, 3), 1e-5) * p["weight"].reshape(1, -1, 1, 1) + p["bias"].reshape(1, -1, 1, 1)),
    ]


def perturb(m):
    "Give the affine parameters non-trivial values (they start at ones and zeros)."
    for name, p in list(m._parameters.items()):
        if p is not None and name in ("weight", "bias") and isinstance(m, (nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, nn.layers._BatchNorm)):
            nn.assign(p, tensor(rnd(*p.shape, lo=0.5, hi=1.5)))
    return m


LAYER_NAMES = [n for n, *_ in layers()]


def get_layer(name):
    return next((m, x, f) for n, m, x, f in layers() if n == name)


@pytest.mark.parametrize("name", LAYER_NAMES)
def test_forward_matches_numpy(name):
    m, x, ref = get_layer(name)
    perturb(m)
    params = {k: p.numpy().astype(np.float64) for k, p in m._parameters.items() if p is not None}
    y = m(tensor(x))
    assert y.dtype is float32
    close(y.numpy(), ref(x.astype(np.float64), params))


@pytest.mark.parametrize("mod,ref", ACTS, ids=[type(m).__name__ + str(i) for i, (m, _) in enumerate(ACTS)])
def test_activations(mod, ref):
    x = rnd(3, 4, lo=-3, hi=3)
    close(mod(tensor(x)).numpy(), ref(x.astype(np.float64)))


def functional_call(m, names):
    "fn(x, *params): the module's forward with its parameters replaced by gradcheck's inputs."
    def fn(x, *ps):
        for n, p in zip(names, ps): m._parameters[n] = p
        return m(x)
    return fn


@pytest.mark.parametrize("name", [n for n in LAYER_NAMES if n not in ("maxpool",)])
def test_gradcheck(name):
    m, x, _ = get_layer(name)
    perturb(m)
    names = [k for k, p in m._parameters.items() if p is not None]
    saved = dict(m._parameters)
    try:
        assert gradcheck(functional_call(m, names), [x.astype(np.float64)] + [m._parameters[k].numpy() for k in names])
    finally:
        m._parameters.update(saved)


def test_maxpool_gradcheck_without_ties():
    x = np.random.default_rng(1).permutation(np.linspace(-1, 1, 2 * 36)).reshape(1, 2, 6, 6)
    assert gradcheck(nn.MaxPool2d(2), [x])


@pytest.mark.parametrize("mod", [nn.Tanh(), nn.GELU(), nn.SiLU(), nn.Softplus(), nn.ELU(), nn.LeakyReLU(0.1),
                                 nn.Softmax(1), nn.LogSoftmax(1), nn.Sigmoid()])
def test_activation_gradcheck(mod):
    assert gradcheck(mod, [np.linspace(-2, 2, 12).reshape(3, 4) + 0.013])


def test_embedding_forward_and_grad():
    VF.manual_seed(0)
    e = nn.Embedding(5, 3)
    idx = np.array([[0, 4], [2, 2]])
    close(e(tensor(idx)).numpy(), e.weight.numpy()[idx])
    assert gradcheck(lambda w: nn.functional.embedding(tensor(idx), w), [e.weight.numpy()])
    with pytest.raises(DTypeError, match=r"Embedding.*\.long\(\)"):
        e(tensor(idx.astype(np.int32)))


# --- batch norm: running statistics --------------------------------------------------------------------

def test_batchnorm_running_stats_and_eval():
    bn = nn.BatchNorm2d(2, momentum=0.1)
    xs = [rnd(4, 2, 3, 3) for _ in range(3)]
    rm, rv = np.zeros(2), np.ones(2)
    for x in xs:
        bn(tensor(x))
        n = x.size // 2
        mu, var = x.mean((0, 2, 3)), x.var((0, 2, 3)) * n / (n - 1)
        rm, rv = 0.9 * rm + 0.1 * mu, 0.9 * rv + 0.1 * var
    close(bn.running_mean.numpy(), rm); close(bn.running_var.numpy(), rv)
    assert bn.num_batches_tracked.item() == 3 and bn.num_batches_tracked.dtype is int64
    assert set(bn.state_dict()) == {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
    bn.eval()
    x = rnd(2, 2, 3, 3)
    close(bn(tensor(x)).numpy(), (x - rm.reshape(1, -1, 1, 1)) / np.sqrt(rv.reshape(1, -1, 1, 1) + 1e-5))
    assert bn.num_batches_tracked.item() == 3   # eval does not update


def test_batchnorm_cumulative_momentum():
    bn = nn.BatchNorm1d(2, momentum=None)
    xs = [rnd(4, 2) for _ in range(3)]
    for x in xs: bn(tensor(x))
    close(bn.running_mean.numpy(), np.mean([x.mean(0) for x in xs], 0))


def test_batchnorm_update_joins_next_realize():
    "The running-stat update is deferred: it is computed by the next realize on the device, not left hanging."
    bn = nn.BatchNorm1d(3)
    y = bn(tensor(rnd(4, 3)))
    assert not bn.running_mean.node.realized
    y.numpy()
    assert bn.running_mean.node.realized and bn.num_batches_tracked.node.realized


# --- dropout: the counter-based mask -------------------------------------------------------------------

def test_dropout_mask_is_the_counter_based_rand():
    d = nn.Dropout(0.3)
    x = np.ones((4, 8), np.float32)
    VF.manual_seed(123)
    y = d(tensor(x)).numpy()
    keep = oracle.uniform(123, 0, x.size).reshape(x.shape) >= 0.3
    close(y, np.where(keep, 1 / 0.7, 0.0))
    assert 0 < keep.sum() < x.size
    d.eval()
    close(d(tensor(x)).numpy(), x)


def test_dropout_gradient_is_the_mask():
    d = nn.Dropout(0.5)
    x = tensor(np.ones((3, 5), np.float32), requires_grad=True)
    VF.manual_seed(7)
    y = d(x)
    y.sum().backward()
    close(x.grad.numpy(), y.numpy())


# --- the Module API -----------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.1)
        self.register_buffer("scratch", VF.zeros(2), persistent=False)

    def forward(self, x): return self.drop(self.bn(self.fc(x)))


def test_module_traversal_and_state_dict():
    m = nn.Sequential(Block(), nn.ReLU(), nn.Linear(4, 2))
    names = [n for n, _ in m.named_parameters()]
    assert names == ["0.fc.weight", "0.fc.bias", "0.bn.weight", "0.bn.bias", "2.weight", "2.bias"]
    assert [n for n, _ in m.named_buffers()] == ["0.scratch", "0.bn.running_mean", "0.bn.running_var", "0.bn.num_batches_tracked"]
    sd = m.state_dict()
    assert "0.scratch" not in sd and "0.bn.running_var" in sd
    assert len(list(m.modules())) == 7 and len(list(m.children())) == 3
    assert all(isinstance(p, nn.Parameter) and p.is_leaf and p.requires_grad for p in m.parameters())
    m.eval(); assert not any(x.training for x in m.modules())
    m.train(); assert all(x.training for x in m.modules())
    assert "(0): Block(" in repr(m) and "Linear(in_features=3, out_features=4, bias=True)" in repr(m)


def test_shared_parameter_counted_once():
    lin = nn.Linear(2, 2)
    m = nn.Sequential(lin, lin)
    assert len(list(m.parameters())) == 2


def test_load_state_dict_round_trip_and_errors():
    VF.manual_seed(0); a = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    VF.manual_seed(1); b = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    a(tensor(rnd(5, 3)))   # moves a's running stats
    b.load_state_dict(a.state_dict())
    for (k, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=k)
    sd = {k: v.numpy() for k, v in a.state_dict().items()}
    with pytest.raises(CheckpointError, match=r'Missing key\(s\) in state_dict: "1.running_var"'):
        b.load_state_dict({k: v for k, v in sd.items() if k != "1.running_var"})
    with pytest.raises(CheckpointError, match=r'Unexpected key\(s\) in state_dict: "2.weight"'):
        b.load_state_dict(sd | {"2.weight": np.ones(3, np.float32)})
    with pytest.raises(CheckpointError, match=r"size mismatch for 0.weight.*\(4, 4\).*\(4, 3\)"):
        b.load_state_dict(sd | {"0.weight": np.ones((4, 4), np.float32)})
    before = b[0].weight.numpy()
    with pytest.raises(nn.StateDictError):
        b.load_state_dict(sd | {"0.weight": sd["0.weight"] + 1, "0.bias": np.ones(7, np.float32)})
    np.testing.assert_array_equal(b[0].weight.numpy(), before)  # checked before anything changed
    r = b.load_state_dict({k: v for k, v in sd.items() if k != "1.running_var"} | {"x": sd["0.bias"]}, strict=False)
    assert r.missing_keys == ["1.running_var"] and r.unexpected_keys == ["x"]
    # PyTorch's _BatchNorm fills a missing num_batches_tracked with 0 (a checkpoint from before the counter
    # existed) instead of reporting it missing
    r = b.load_state_dict({k: v for k, v in sd.items() if k != "1.num_batches_tracked"})
    assert r.missing_keys == [] and b[1].num_batches_tracked.item() == 0


def test_parameters_stay_leaves_through_load_and_assign():
    lin = nn.Linear(2, 2)
    w = lin.weight
    lin.load_state_dict({"weight": np.eye(2, dtype=np.float32), "bias": np.zeros(2, np.float32)})
    assert lin.weight is w and w.is_leaf and w.requires_grad
    lin(tensor(np.ones((1, 2), np.float32))).sum().backward()
    close(w.grad.numpy(), np.ones((2, 2)))
    with no_grad(): nn.assign(w, w - w.grad * 0.5)
    assert w.is_leaf and w.requires_grad and w.node.op is Op.ASSIGN     # written into w's memory when realized
    old = w.node.srcs[0].buf
    w.grad = None
    lin(tensor(np.ones((1, 2), np.float32))).sum().backward()
    close(w.numpy(), np.eye(2) - 0.5)
    assert w.node.buf is old                    # in place: the same memory
    close(w.grad.numpy(), np.ones((2, 2)))


def test_zero_grad():
    lin = nn.Linear(2, 2)
    lin(tensor(np.ones((1, 2), np.float32))).sum().backward()
    lin.zero_grad(set_to_none=False)
    close(lin.weight.grad.numpy(), np.zeros((2, 2)))
    lin.zero_grad()
    assert lin.weight.grad is None


def test_assigning_tensor_to_parameter_is_refused():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="assign"):
        lin.weight = VF.zeros(2, 2)


# --- dtypes --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mod,x", [(nn.Linear(2, 2), np.ones((1, 2), np.float16)),
                                   (nn.Conv2d(1, 1, 1), np.ones((1, 1, 2, 2), np.int32)),
                                   (nn.BatchNorm1d(2), np.ones((3, 2), np.float16)),
                                   (nn.ReLU(), np.ones(2, np.int64))])
def test_other_dtype_into_layer_names_layer_and_cast(mod, x):
    with pytest.raises(DTypeError, match=rf"{type(mod).__name__}.*x\.float\(\)"):
        mod(tensor(x))


def test_parameters_are_float_tensors():
    assert nn.Parameter(tensor(np.ones(2, np.float16))).dtype is vkml.float16    # (Module.half() makes these)
    with pytest.raises(DTypeError, match="float"):
        nn.Parameter(tensor(np.ones(2, np.int64)))


# --- initialisation ------------------------------------------------------------------------------------

def test_default_init_is_pytorchs_bounds_and_seeded():
    VF.manual_seed(5); a = nn.Conv2d(4, 8, 3)
    VF.manual_seed(5); b = nn.Conv2d(4, 8, 3)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    bound = 1 / math.sqrt(4 * 9)
    w = a.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound and abs(w.mean()) < 0.1 * bound
    assert np.abs(a.bias.numpy()).max() <= bound
    VF.manual_seed(5)
    # the generator's first draw, by the reference formula: U(-b, b) = (2u - 1) b
    u = oracle.uniform(5, 0, w.size).reshape(w.shape)
    close(w, (u * 2 - 1) * bound, rtol=1e-6, atol=1e-7)
    t = nn.ConvTranspose2d(4, 6, 3)
    assert t.weight.shape == (4, 6, 3, 3) and np.abs(t.weight.numpy()).max() <= 1 / math.sqrt(6 * 9)
    ln = nn.LayerNorm(3)
    np.testing.assert_array_equal(ln.weight.numpy(), np.ones(3)); np.testing.assert_array_equal(ln.bias.numpy(), np.zeros(3))


def test_no_prod_in_a_training_graph():
    m = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Dropout(0.2), nn.Linear(8, 3), nn.LayerNorm(3))
    loss = nn.CrossEntropyLoss()(m(tensor(rnd(2, 1, 4, 4))), tensor(np.array([0, 2])))
    loss.backward()
    nodes = toposort([loss.node] + [p.grad.node for p in m.parameters()] + [b.node for b in m.buffers()])
    assert nodes and not any(n.op is Op.PROD for n in nodes)


# --- loss modules --------------------------------------------------------------------------------------

def test_loss_modules_against_numpy():
    x, t = rnd(4, 3), rnd(4, 3)
    y = np.array([0, 2, 1, 2])
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    close(nn.CrossEntropyLoss()(tensor(x), tensor(y)).item(), -logp[np.arange(4), y].mean())
    close(nn.CrossEntropyLoss(reduction="sum")(tensor(x), tensor(y)).item(), -logp[np.arange(4), y].sum())
    close(nn.NLLLoss()(tensor(logp.astype(np.float32)), tensor(y)).item(), -logp[np.arange(4), y].mean())
    close(nn.MSELoss()(tensor(x), tensor(t)).item(), ((x - t) ** 2).mean())
    close(nn.L1Loss()(tensor(x), tensor(t)).item(), np.abs(x - t).mean())
    d = np.abs(x - t)
    close(nn.SmoothL1Loss(beta=0.5)(tensor(x), tensor(t)).item(), np.where(d < 0.5, 0.5 * d ** 2 / 0.5, d - 0.25).mean())
    p, z = 1 / (1 + np.exp(-x)), (t > 0).astype(np.float32)
    close(nn.BCELoss()(tensor(p.astype(np.float32)), tensor(z)).item(), -(z * np.log(p) + (1 - z) * np.log(1 - p)).mean())
    close(nn.BCEWithLogitsLoss()(tensor(x), tensor(z)).item(), -(z * np.log(p) + (1 - z) * np.log(1 - p)).mean())
    q = np.exp(t) / np.exp(t).sum(1, keepdims=True)
    close(nn.KLDivLoss(reduction="batchmean")(tensor(logp.astype(np.float32)), tensor(q.astype(np.float32))).item(),
          (q * (np.log(q) - logp)).sum() / 4)


# --- the same layers on Vulkan -------------------------------------------------------------------------

@pytest.mark.vulkan
@pytest.mark.parametrize("name", LAYER_NAMES)
def test_vulkan_forward_and_grads_match_cpu(name):
    m, x, _ = get_layer(name)
    perturb(m)
    outs = {}
    for dev in ("cpu", "vulkan"):
        m.to(dev)
        m.zero_grad()
        if name.startswith("batchnorm"): m.reset_running_stats()
        xt = tensor(x, device=dev, requires_grad=True)
        y = m(xt)
        (y * y).sum().backward()
        outs[dev] = [y.numpy(), xt.grad.numpy()] + [p.grad.numpy() for p in m.parameters()]
        if name.startswith("batchnorm"):  # the running statistics, updated on the device
            outs[dev] += [m.running_mean.numpy(), m.running_var.numpy()]
    assert m.weight.device.startswith("vulkan") if hasattr(m, "weight") and m.weight is not None else True
    for a, b in zip(outs["vulkan"], outs["cpu"]):
        k = max(1, x.size // x.shape[0])
        close(a, b, rtol=1e-4, atol=1e-5 * math.sqrt(k))


@pytest.mark.vulkan
def test_vulkan_dropout_mask_identical_to_cpu():
    d = nn.Dropout(0.4)
    x = rnd(8, 16)
    VF.manual_seed(11); c = d(tensor(x)).numpy()
    VF.manual_seed(11); v = d(tensor(x, device="vulkan")).numpy()
    np.testing.assert_array_equal(c == 0, v == 0)
    close(v, c)


@pytest.mark.vulkan
def test_to_keeps_parameter_objects():
    m = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    ps = list(m.parameters())
    w = ps[0].numpy()
    m.to("vulkan")
    assert list(m.parameters()) == ps or all(a is b for a, b in zip(m.parameters(), ps))
    assert all(p.device.startswith("vulkan") and p.is_leaf and p.requires_grad for p in m.parameters())
    assert all(b.device.startswith("vulkan") for b in m.buffers())
    np.testing.assert_array_equal(ps[0].numpy(), w)
    m.to("cpu")
    np.testing.assert_array_equal(ps[0].numpy(), w)


def test_module_to_gives_a_moved_view_its_own_storage():
    "A buffer made as a view and moved by Module.to is no longer a view of its old base (a jitted DDP step with BatchNorm on a discrete GPU refused num_batches_tracked as a view)."
    import vkml.frontend.functions as VF
    m = nn.Module()
    m.register_buffer("b", VF.zeros(2, 3).reshape(6))
    base = m.b._base
    assert base is not None
    m.to("vulkan")
    assert m.b._base is None and all(r() is not m.b for r in base._views)
    assert nn.BatchNorm1d(3).to("vulkan").num_batches_tracked._base is None
