"""vkml.optim: the first three updates of each optimiser (and its options) against numpy written from
PyTorch's documented algorithms, the schedules' values, state-dict round trips (also through vkml.io),
and the step's shape: one realize, no PROD node."""
import math
import numpy as np
import pytest

import vkml
import vkml.frontend.autograd  # noqa: F401
import vkml.frontend.functions as VF
import vkml.nn as nn
import vkml.optim as optim
import vkml.io
from vkml.core.ops import Op
from vkml.frontend.tensor import tensor, toposort

P0 = np.array([0.5, -1.5, 2.0, 0.25], np.float32)
C = np.array([1.0, 0.5, 2.0, 3.0], np.float32)
D = np.array([0.1, -0.2, 0.3, 0.0], np.float32)


def grad_ref(p): return 2 * C * p + D          # d/dp of Σ c p² + d p


def run(make, steps=3, device="cpu", fused=None):
    "Three steps of `make([param])` on Σ c p² + d p; the parameter after each step."
    p = nn.Parameter(tensor(P0, device=device))
    opt = make([p])
    opt.fused = fused
    c, d = tensor(C, device=device), tensor(D, device=device)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        ((p * p * c).sum() + (p * d).sum()).backward()
        opt.step()
        out.append(p.numpy().astype(np.float64))
    return out, opt


def sgd_ref(lr, momentum=0, dampening=0, wd=0, nesterov=False, maximize=False, steps=3):
    p, buf, out = P0.astype(np.float64), None, []
    for _ in range(steps):
        g = grad_ref(p)
        if maximize: g = -g
        g = g + wd * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
        out.append(p)
    return out


def adam_ref(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0, decoupled=False, amsgrad=False, steps=3):
    p, m, v, vmax, out = P0.astype(np.float64), 0, 0, 0, []
    for t in range(1, steps + 1):
        g = grad_ref(p)
        if decoupled: p = p * (1 - lr * wd)
        else: g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vhat = np.maximum(vmax, v) if amsgrad else v
        vmax = vhat
        p = p - lr / (1 - b1 ** t) * m / (np.sqrt(vhat) / math.sqrt(1 - b2 ** t) + eps)
        out.append(p)
    return out


def rmsprop_ref(lr, alpha=0.99, eps=1e-8, wd=0, momentum=0, centered=False, steps=3):
    p, sq, ga, buf, out = P0.astype(np.float64), 0, 0, 0, []
    for _ in range(steps):
        g = grad_ref(p) + wd * p
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            ga = alpha * ga + (1 - alpha) * g
            avg = np.sqrt(sq - ga * ga) + eps
        else: avg = np.sqrt(sq) + eps
        if momentum:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else: p = p - lr * g / avg
        out.append(p)
    return out


CASES = [
    ("sgd", lambda ps: optim.SGD(ps, lr=0.1), sgd_ref(0.1)),
    ("sgd_momentum", lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), sgd_ref(0.1, 0.9)),
    ("sgd_dampening_wd", lambda ps: optim.SGD(ps, lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.1),
     sgd_ref(0.05, 0.8, 0.3, 0.1)),
    ("sgd_nesterov", lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True), sgd_ref(0.1, 0.9, nesterov=True)),
    ("sgd_maximize", lambda ps: optim.SGD(ps, lr=0.01, maximize=True), sgd_ref(0.01, maximize=True)),
    ("adam", lambda ps: optim.Adam(ps, lr=0.1), adam_ref(0.1)),
    ("adam_wd_betas", lambda ps: optim.Adam(ps, lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
     adam_ref(0.05, 0.8, 0.99, 1e-6, 0.1)),
    ("adam_amsgrad", lambda ps: optim.Adam(ps, lr=0.1, amsgrad=True), adam_ref(0.1, amsgrad=True)),
    ("adamw", lambda ps: optim.AdamW(ps, lr=0.1), adam_ref(0.1, wd=0.01, decoupled=True)),
    ("adamw_wd", lambda ps: optim.AdamW(ps, lr=0.1, weight_decay=0.5), adam_ref(0.1, wd=0.5, decoupled=True)),
    ("rmsprop", lambda ps: optim.RMSprop(ps, lr=0.01), rmsprop_ref(0.01)),
    ("rmsprop_centered_momentum", lambda ps: optim.RMSprop(ps, lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1),
     rmsprop_ref(0.01, 0.9, wd=0.1, momentum=0.5, centered=True)),
]


@pytest.mark.parametrize("fused", [None, False], ids=["fused", "per_parameter"])
@pytest.mark.parametrize("name,make,ref", CASES, ids=[c[0] for c in CASES])
def test_first_three_updates(name, make, ref, fused):
    got, _ = run(make, fused=fused)
    for i, (g, r) in enumerate(zip(got, ref)):
        np.testing.assert_allclose(g, r, rtol=2e-6, atol=2e-6, err_msg=f"{name} step {i + 1}")


def test_sgd_by_hand():
    "Plain numbers: p=1, loss p², lr 0.1, momentum 0.9: p goes 0.8, 0.46, 0.062."
    p = nn.Parameter(tensor([1.0]))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    seen = []
    for _ in range(3):
        opt.zero_grad(); (p * p).sum().backward(); opt.step(); seen.append(p.item())
    # g=2, b=2, p=0.8; g=1.6, b=3.4, p=0.46; g=0.92, b=3.98, p=0.062
    np.testing.assert_allclose(seen, [0.8, 0.46, 0.062], rtol=1e-6)


def test_defaults_are_pytorchs():
    p = [nn.Parameter(VF.zeros(1))]
    assert optim.SGD(p).defaults["lr"] == 1e-3
    a = optim.Adam(p).defaults
    assert (a["lr"], a["betas"], a["eps"], a["weight_decay"]) == (1e-3, (0.9, 0.999), 1e-8, 0.0)
    assert optim.AdamW(p).defaults["weight_decay"] == 1e-2
    r = optim.RMSprop(p).defaults
    assert (r["lr"], r["alpha"], r["eps"]) == (1e-2, 0.99, 1e-8)


def test_param_groups_and_skipping_params_without_grad():
    a, b = nn.Parameter(tensor([1.0])), nn.Parameter(tensor([1.0]))
    opt = optim.SGD([{"params": [a], "lr": 0.5}, {"params": [b]}], lr=0.1)
    (a * 2.0).sum().backward()   # only a has a gradient
    opt.step()
    assert a.item() == pytest.approx(0.0) and b.item() == 1.0
    with pytest.raises(optim.OptimizerError):
        opt.add_param_group({"params": [a]})


def test_errors():
    with pytest.raises(optim.OptimizerError): optim.SGD([nn.Parameter(VF.zeros(1))], lr=-1)
    with pytest.raises(optim.OptimizerError): optim.SGD([nn.Parameter(VF.zeros(1))], nesterov=True)
    with pytest.raises(optim.OptimizerError): optim.Adam([])
    with pytest.raises(optim.OptimizerError): optim.Adam([VF.zeros(1)])   # not a leaf requiring grad


def test_zero_grad():
    p = nn.Parameter(tensor([1.0, 2.0]))
    opt = optim.SGD([p], lr=0.1)
    (p * p).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), [0, 0])
    opt.zero_grad()
    assert p.grad is None


# --- the step's graph ------------------------------------------------------------------------------

def test_one_realize_per_step_and_no_prod(monkeypatch):
    VF.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(32, 3))
    x, y = VF.rand(4, 1, 4, 4), tensor(np.array([0, 1, 2, 0]))
    calls = []
    real = optim.realize

    def spy(*ts):
        nodes = toposort([t.node for t in ts])
        calls.append(({n.op for n in nodes}, len(ts)))
        return real(*ts)
    monkeypatch.setattr(optim, "realize", spy)
    for opt_cls in (optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop):
        opt = opt_cls(m.parameters(), lr=0.01) if opt_cls is not optim.SGD else optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        for _ in range(2):                  # the first step makes the flat buffers; the second updates them in place
            calls.clear()
            loss = nn.functional.cross_entropy(m(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
        assert len(calls) == 1, opt_cls
        ops, n = calls[0]
        assert Op.PROD not in ops and Op.MATMUL in ops and Op.CONV2D in ops  # forward + backward + update in one graph
        assert Op.ASSIGN in ops and n == 1 + len(opt.state_names), (opt_cls, n)  # the flat parameters and state, in place


# --- schedules -------------------------------------------------------------------------------------

def lrs(sched_cls, n, **kw):
    opt = optim.SGD([nn.Parameter(VF.zeros(1))], lr=0.1)
    s = sched_cls(opt, **kw)
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"]); assert s.get_last_lr() == [out[-1]]; s.step()
    return out


def test_step_lr():
    np.testing.assert_allclose(lrs(optim.StepLR, 7, step_size=3, gamma=0.5),
                               [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025])


def test_cosine_annealing_lr():
    got = lrs(optim.CosineAnnealingLR, 6, T_max=5, eta_min=0.01)
    want = [0.01 + 0.09 * (1 + math.cos(math.pi * e / 5)) / 2 for e in range(6)]
    np.testing.assert_allclose(got, want)
    assert got[-1] == pytest.approx(0.01)


def test_linear_lr():
    np.testing.assert_allclose(lrs(optim.LinearLR, 6, start_factor=0.25, total_iters=3),
                               [0.025, 0.05, 0.075, 0.1, 0.1, 0.1])


def test_scheduler_state_dict():
    opt = optim.SGD([nn.Parameter(VF.zeros(1))], lr=0.1)
    s = optim.StepLR(opt, step_size=2)
    for _ in range(3): s.step()
    s2 = optim.StepLR(optim.SGD([nn.Parameter(VF.zeros(1))], lr=0.1), step_size=2)
    s2.load_state_dict(s.state_dict())
    assert s2.last_epoch == 3 and s2.get_last_lr() == s.get_last_lr()


# --- state dicts -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,make,ref", [c for c in CASES if c[0] in ("sgd_momentum", "adam_amsgrad", "rmsprop_centered_momentum")],
                         ids=["sgd", "adam", "rmsprop"])
def test_state_dict_round_trip_through_io(tmp_path, name, make, ref):
    "Two steps, save, restore into a fresh optimiser, one more step: the same as three uninterrupted steps."
    p = nn.Parameter(tensor(P0))
    opt = make([p])
    c, d = tensor(C), tensor(D)

    def step(p, opt):
        opt.zero_grad(); ((p * p * c).sum() + (p * d).sum()).backward(); opt.step()
    step(p, opt); step(p, opt)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"} and sd["param_groups"][0]["params"] == [0]
    assert sd["state"][0]["step"] == 2
    vkml.io.save({"p": p, "opt": sd}, tmp_path / "o.safetensors")
    back = vkml.io.load(tmp_path / "o.safetensors")
    q = nn.Parameter(back["p"])
    opt2 = make([q])
    opt2.load_state_dict(back["opt"])
    step(q, opt2)
    np.testing.assert_allclose(q.numpy(), ref[2], rtol=2e-6, atol=2e-6)
    for k, v in opt2.state[q].items():
        if isinstance(v, vkml.Tensor): assert v.shape == q.shape
    with pytest.raises(optim.OptimizerError):
        opt2.load_state_dict({"state": {}, "param_groups": []})


def test_optimiser_parameters_are_float_tensors():
    t = tensor(np.ones(2, np.float16)).requires_grad_()
    optim.SGD([t])                                   # float16: float32 master weights (tests/test_amp.py)
    d = tensor(np.ones(2, np.float64)).requires_grad_()
    (d * d).sum().backward()
    with pytest.raises(optim.OptimizerError, match="float32 or float16"):
        optim.SGD([d], fused=True).step()            # float64 parameters take the per-parameter path
    optim.SGD([d], lr=0.5).step()
    np.testing.assert_array_equal(d.numpy(), [0.0, 0.0])
    assert d.dtype is vkml.float64


@pytest.mark.vulkan
@pytest.mark.parametrize("fused", [None, False], ids=["fused", "per_parameter"])
@pytest.mark.parametrize("name,make,ref", CASES, ids=[c[0] for c in CASES])
def test_updates_on_vulkan(name, make, ref, fused):
    got, _ = run(make, device="vulkan", fused=fused)
    for i, (g, r) in enumerate(zip(got, ref)):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5, err_msg=f"{name} step {i + 1}")


def test_step_with_closure_realizes_the_loss_too():
    p = nn.Parameter(tensor([1.0, 2.0]))
    opt = optim.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert loss.node.realized and loss.item() == 5.0
    np.testing.assert_allclose(p.numpy(), [0.8, 1.6], rtol=1e-6)


# --- the fused step --------------------------------------------------------------------------------

def mlp(device, seed=0):
    VF.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 5)).to(device)


def train(device, make, fused, steps=5):
    m = mlp(device)
    opt = make(m, fused)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        x = tensor(rng.standard_normal((8, 12)).astype(np.float32), device=device)
        y = tensor(rng.integers(0, 5, 8), device=device)
        opt.zero_grad(); nn.functional.cross_entropy(m(x), y).backward(); opt.step()
    return [p.numpy() for p in m.parameters()], opt


GROUPED = [
    ("sgd_nesterov", lambda m, f: optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, fused=f)),
    ("adam_two_groups", lambda m, f: optim.Adam([{"params": m[0].parameters(), "lr": 0.01},
                                                 {"params": list(m[2].parameters()) + list(m[4].parameters())}], lr=0.003, fused=f)),
    ("adamw_amsgrad", lambda m, f: optim.AdamW(m.parameters(), lr=0.01, amsgrad=True, fused=f)),
    ("rmsprop_centered", lambda m, f: optim.RMSprop(m.parameters(), lr=0.01, momentum=0.5, centered=True, fused=f)),
]


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
@pytest.mark.parametrize("name,make", GROUPED, ids=[g[0] for g in GROUPED])
def test_fused_step_matches_the_per_parameter_step(name, make, device):
    fused, opt = train(device, make, None)
    assert opt._flat is not None                               # it did take the flat path
    each, opt = train(device, make, False)
    assert opt._flat is None
    for a, b in zip(fused, each):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)


def test_fused_state_is_pytorch_shaped_and_survives_rebinding():
    m = mlp("cpu")
    opt = optim.Adam(m.parameters(), lr=0.01)
    train_one = lambda: (opt.zero_grad(), m(VF.ones(2, 12)).sum().backward(), opt.step())
    train_one()
    p0 = next(iter(m.parameters()))
    assert opt.state[p0]["exp_avg"].shape == p0.shape and opt.state[p0]["step"] == 1
    before = {k: v.numpy().copy() for k, v in opt.state[p0].items() if k != "step"}
    m.load_state_dict(m.state_dict())                           # rebinds every parameter: the store is rebuilt
    train_one()
    assert opt.state[p0]["step"] == 2
    assert not np.array_equal(opt.state[p0]["exp_avg"].numpy(), before["exp_avg"])   # the moments carried on
    with pytest.raises(optim.OptimizerError, match="fused=False"):
        q = nn.Parameter(VF.ones(3))
        o = optim.SGD([q, nn.Parameter(VF.ones(2))], lr=0.1, fused=True)
        (q * q).sum().backward(); o.step()                     # one parameter has no gradient


@pytest.mark.vulkan
def test_mlp_adam_step_dispatches():
    "A 3-layer MLP's Adam step: at most 30 dispatches in one submission, the update itself one kernel."
    from vkml.backends.vulkan import device as D
    m = mlp("vulkan")
    opt = optim.Adam(m.parameters(), lr=0.01)
    x, y = tensor(np.ones((8, 12), np.float32), device="vulkan"), tensor(np.arange(8) % 5, device="vulkan")
    schedules = []
    real = optim.realize
    for i in range(3):
        D.reset_stats()
        opt.zero_grad(); loss = nn.functional.cross_entropy(m(x), y); loss.backward()
        if i == 2: optim.realize = lambda *ts: (schedules.append(vkml.schedule(*ts)), real(*ts))
        try: opt.step(closure=None)
        finally: optim.realize = real
        loss.item()
    s = D.stats()
    assert s["submissions"] == 1 and s["dispatches"] <= 30, s
    updates = [k for k in schedules[0] if any(n.op is Op.ASSIGN for n in k.nodes)]
    assert len(updates) == 1 and len(updates[0].stores) == 3      # parameters, exp_avg, exp_avg_sq: one kernel
    assert schedules[0].placed                                    # the gradients were written into the flat gradient


# --- hyper-parameters changed between steps (issue 21) ------------------------------------------------
# PyTorch's algorithms again, one step at a time with the group's values of that step. A state tensor a
# change starts later begins where PyTorch's starts it: SGD's momentum buffer as the gradient itself
# (dampening not applied), every other one at zero. One a change stops is kept, unused, and resumes.

def sgd_step(p, st, h):
    g = grad_ref(p)
    if h["maximize"]: g = -g
    g = g + h["weight_decay"] * p
    if h["momentum"]:
        buf = st.get("buf")
        buf = st["buf"] = g.copy() if buf is None else h["momentum"] * buf + (1 - h["dampening"]) * g
        g = g + h["momentum"] * buf if h["nesterov"] else buf
    return p - h["lr"] * g


def adam_step(p, st, h, decoupled):
    t = st["t"] = st.get("t", 0) + 1
    (b1, b2), lr = h["betas"], h["lr"]
    g = grad_ref(p)
    if h["maximize"]: g = -g
    if decoupled: p = p * (1 - lr * h["weight_decay"])
    else: g = g + h["weight_decay"] * p
    m = st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    v = st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
    if h["amsgrad"]: v = st["vmax"] = np.maximum(st.get("vmax", 0), v)
    return p - lr / (1 - b1 ** t) * m / (np.sqrt(v) / math.sqrt(1 - b2 ** t) + h["eps"])


def rmsprop_step(p, st, h):
    a = h["alpha"]
    g = grad_ref(p)
    if h["maximize"]: g = -g
    g = g + h["weight_decay"] * p
    sq = st["sq"] = a * st.get("sq", 0) + (1 - a) * g * g
    if h["centered"]:
        ga = st["ga"] = a * st.get("ga", 0) + (1 - a) * g
        avg = np.sqrt(sq - ga * ga) + h["eps"]
    else: avg = np.sqrt(sq) + h["eps"]
    if h["momentum"]:
        buf = st["buf"] = h["momentum"] * st.get("buf", 0) + g / avg
        return p - h["lr"] * buf
    return p - h["lr"] * g / avg


# (optimiser, its numpy step, the changes made to param_groups[0] before each step after the first)
SCHEDULES = [
    ("SGD", lambda ps: optim.SGD(ps, lr=0.05), sgd_step,
     [dict(momentum=0.9, dampening=0.3), dict(weight_decay=0.1), dict(dampening=0.0, nesterov=True),
      dict(lr=0.02, momentum=0.5), dict(nesterov=False, maximize=True), dict(momentum=0.0, maximize=False),
      dict(momentum=0.8, dampening=0.2)]),
    ("Adam", lambda ps: optim.Adam(ps, lr=0.05), lambda p, st, h: adam_step(p, st, h, False),
     [dict(betas=(0.8, 0.99)), dict(eps=1e-3), dict(weight_decay=0.1, lr=0.02), dict(amsgrad=True),
      dict(betas=[0.5, 0.9]), dict(amsgrad=False, maximize=True), dict(amsgrad=True, maximize=False)]),
    ("AdamW", lambda ps: optim.AdamW(ps, lr=0.05), lambda p, st, h: adam_step(p, st, h, True),
     [dict(weight_decay=0.5), dict(betas=(0.7, 0.95), eps=1e-4), dict(amsgrad=True, lr=0.1), dict(weight_decay=0.0)]),
    ("RMSprop", lambda ps: optim.RMSprop(ps, lr=0.01), rmsprop_step,
     [dict(alpha=0.9), dict(momentum=0.5), dict(centered=True, eps=1e-3), dict(weight_decay=0.1, lr=0.02),
      dict(momentum=0.0, centered=False), dict(momentum=0.3, centered=True, maximize=True)]),
]


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
@pytest.mark.parametrize("fused", [None, False], ids=["fused", "per_parameter"])
@pytest.mark.parametrize("name,make,ref_step,changes", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_hyperparameters_changed_between_steps(name, make, ref_step, changes, fused, device):
    "Regression: turning momentum on after steps without it raised KeyError: 'momentum_buffer' (fused path) and, per "
    "parameter, started the buffer with dampening applied. Every change takes effect at the next step, as PyTorch's."
    p = nn.Parameter(tensor(P0, device=device))
    opt = make([p]); opt.fused = fused
    c, d = tensor(C, device=device), tensor(D, device=device)
    ref, st = P0.astype(np.float64), {}
    for i, change in enumerate([{}] + changes):
        opt.param_groups[0].update(change)
        h = dict(opt.param_groups[0])
        opt.zero_grad()
        ((p * p * c).sum() + (p * d).sum()).backward()
        opt.step()
        ref = ref_step(ref, st, h)
        np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-6, err_msg=f"{name} step {i + 1} after {change}")


@pytest.mark.parametrize("fused", [None, False], ids=["fused", "per_parameter"])
def test_momentum_turned_on_after_steps(fused):
    "The report's case: SGD steps without momentum, then momentum 0.9: the next step starts the buffer."
    got, opt = run(lambda ps: optim.SGD(ps, lr=0.1), steps=2, fused=fused)
    opt.param_groups[0]["momentum"] = 0.9
    p = opt.param_groups[0]["params"][0]
    for _ in range(2):
        opt.zero_grad(); ((p * p * tensor(C)).sum() + (p * tensor(D)).sum()).backward(); opt.step()
    ref, st = P0.astype(np.float64), {}
    for m in (0.0, 0.0, 0.9, 0.9):
        ref = sgd_step(ref, st, dict(lr=0.1, momentum=m, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False))
    np.testing.assert_allclose(p.numpy(), ref, rtol=1e-6, atol=1e-6)
    assert isinstance(opt.state[p]["momentum_buffer"], vkml.Tensor)


BAD_VALUES = [
    ("SGD", "lr", -0.1), ("SGD", "lr", float("nan")), ("SGD", "lr", "0.1"), ("SGD", "lr", None),
    ("SGD", "momentum", -0.5), ("SGD", "weight_decay", float("inf")), ("SGD", "nesterov", "yes"),
    ("SGD", "nesterov", True),        # without momentum: PyTorch refuses it too
    ("Adam", "lr", -1.0), ("Adam", "betas", (0.9, 1.0)), ("Adam", "betas", 0.9), ("Adam", "eps", "tiny"),
    ("Adam", "amsgrad", "no"), ("AdamW", "weight_decay", -0.01), ("RMSprop", "alpha", float("nan")),
    ("RMSprop", "centered", 1), ("RMSprop", "momentum", [0.9]),
]

@pytest.mark.parametrize("fused", [None, False], ids=["fused", "per_parameter"])
@pytest.mark.parametrize("opt_name,key,value", BAD_VALUES, ids=[f"{o}-{k}-{v!r}" for o, k, v in BAD_VALUES])
def test_a_bad_hyperparameter_set_between_steps_is_refused_at_step(opt_name, key, value, fused):
    "Regression: lr=-1 (or NaN, or a string) set through param_groups raised a raw error at step(), or stepped with it."
    got, opt = run(lambda ps: getattr(optim, opt_name)(ps, lr=0.01), steps=1, fused=fused)
    p = opt.param_groups[0]["params"][0]
    opt.zero_grad(); ((p * p * tensor(C)).sum()).backward()
    opt.param_groups[0][key] = value
    with pytest.raises(optim.OptimizerError, match=key if key != "nesterov" or value == "yes" else "Nesterov"):
        opt.step()
    np.testing.assert_array_equal(p.numpy(), got[-1])               # nothing moved
    assert opt.state[p]["step"] == 1


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_a_parameter_listed_twice_is_refused(device):
    "Regression: SGD([w, w]) was never updated on Vulkan (the fused step wrote it twice); PyTorch warns it will be an error."
    w = nn.Parameter(tensor(P0, device=device))
    for make in (lambda: optim.SGD([w, w], lr=0.1), lambda: optim.Adam([{"params": [w, w]}]),
                 lambda: optim.SGD([w], lr=0.1).add_param_group({"params": [nn.Parameter(tensor(P0, device=device))] * 2})):
        with pytest.raises(optim.OptimizerError, match="twice"): make()


@pytest.mark.vulkan
def test_a_replayed_step_checks_its_hyperparameters():
    "Regression: under vkml.jit a negative lr was used and a changed weight_decay silently ignored (baked in the capture)."
    def setup():
        p = nn.Parameter(tensor(P0, device="vulkan"))
        opt = optim.SGD([p], lr=0.05)
        c = tensor(C, device="vulkan")
        @vkml.jit
        def step(x):
            opt.zero_grad(); ((p * p * c).sum() + (p * x).sum()).backward(); opt.step()
            return p * 1.0
        return p, opt, step
    x = tensor(D, device="vulkan")
    for change, exc, match in ((dict(lr=-1.0), optim.OptimizerError, "lr"),):
        p, opt, step = setup()
        for _ in range(3): step(x).numpy()                 # warm-up, capture, replay
        before = p.numpy()
        opt.param_groups[0].update(change)
        with pytest.raises(exc, match=match): step(x)
        np.testing.assert_array_equal(p.numpy(), before)
        assert opt.state[p]["step"] == 3                   # the refused replay counted no step
        step.reset()
    # a weight decay that was 0 changes the step's graph: that call runs the step as written (ADR 0028), and it is applied
    p, opt, step = setup()
    for _ in range(3): step(x).numpy()
    opt.param_groups[0]["weight_decay"] = 0.5
    got = step(x).numpy()
    ref, st = P0.astype(np.float64), {}
    for wd in (0.0, 0.0, 0.0, 0.5):
        ref = sgd_step(ref, st, dict(lr=0.05, momentum=0.0, dampening=0.0, weight_decay=wd, nesterov=False, maximize=False))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    step.reset()
    p, opt, step = setup()                                 # lr is read at every replay
    for _ in range(3): step(x).numpy()
    opt.param_groups[0]["lr"] = 0.01
    got = step(x).numpy()
    ref, st = P0.astype(np.float64), {}
    for lr in (0.05, 0.05, 0.05, 0.01):
        ref = sgd_step(ref, st, dict(lr=lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    step.reset()
