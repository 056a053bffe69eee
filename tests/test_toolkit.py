"""The training toolkit (issue 23): nn.init, gradient clipping, the schedules, vkml.utils.data, hooks.
References are numpy (and the documented PyTorch formulas re-implemented here: PyTorch is not installed)."""
import math
import numpy as np
import pytest
import vkml
import vkml.frontend.functions as VF
from vkml.nn import Parameter, Linear, init
from vkml.nn.utils import clip_grad_norm_, clip_grad_value_
from vkml.optim import (SGD, Adam, OptimizerError, MultiStepLR, ExponentialLR, OneCycleLR, ReduceLROnPlateau, LambdaLR,
                        SequentialLR, CosineAnnealingWarmRestarts, LinearLR)
from vkml.utils.data import DataLoader, TensorDataset, Subset, random_split, DataError
from vkml.data import DataLoader as ArrayLoader
from vkml.core.dtypes import VkmlError, GradError, RankError

DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]


# ---- nn.init
@pytest.mark.parametrize("device", DEVICES)
def test_init_distributions(device):
    vkml.manual_seed(0)
    z = lambda *s: VF.zeros(*s, device=device)
    u = init.uniform_(z(200, 500), -2.0, 3.0).numpy()
    assert -2 <= u.min() and u.max() < 3 and abs(u.mean() - 0.5) < 0.02 and abs(u.std() - 5 / math.sqrt(12)) < 0.01
    n = init.normal_(z(200, 500), 1.5, 0.5).numpy()
    assert abs(n.mean() - 1.5) < 0.005 and abs(n.std() - 0.5) < 0.005
    x = init.xavier_uniform_(z(400, 600), gain=2.0).numpy()
    a = 2.0 * math.sqrt(6 / 1000)
    assert np.abs(x).max() <= a and abs(x.std() - a / math.sqrt(3)) < 0.002
    k = init.kaiming_normal_(z(64, 32, 3, 3), mode="fan_out", nonlinearity="relu").numpy()
    assert abs(k.std() - math.sqrt(2 / (64 * 9))) < 0.002 and abs(k.mean()) < 0.002
    k = init.kaiming_uniform_(z(300, 400), a=0.2).numpy()      # leaky_relu, fan_in 400
    b = math.sqrt(2 / 1.04) * math.sqrt(3 / 400)
    assert np.abs(k).max() <= b and abs(k.std() - b / math.sqrt(3)) < 0.001
    t = init.trunc_normal_(z(100_000), mean=1.0, std=2.0, a=0.0, b=3.0).numpy()
    from scipy.stats import truncnorm
    ref = truncnorm((0 - 1) / 2, (3 - 1) / 2, loc=1, scale=2)
    assert 0 <= t.min() and t.max() <= 3 and abs(t.mean() - ref.mean()) < 0.01 and abs(t.std() - ref.std()) < 0.01


@pytest.mark.parametrize("device", DEVICES)
def test_init_exact(device):
    q = init.orthogonal_(VF.zeros(5, 3, 2, device=device)).numpy().reshape(5, 6)
    np.testing.assert_allclose(q @ q.T, np.eye(5), atol=1e-5)
    e = init.eye_(VF.zeros(3, 4, device=device)).numpy()
    np.testing.assert_array_equal(e, np.eye(3, 4))
    assert (init.zeros_(VF.ones(3, device=device)).numpy() == 0).all()
    assert (init.constant_(VF.ones(3, device=device), -2.5).numpy() == -2.5).all()


def test_init_in_place_on_a_parameter_and_seeded():
    lin = Linear(4, 3)
    w = lin.weight
    vkml.manual_seed(7); init.xavier_normal_(lin.weight)
    assert lin.weight is w and w.is_leaf and w.requires_grad
    first = w.numpy().copy()
    vkml.manual_seed(7); init.xavier_normal_(lin.weight)
    np.testing.assert_array_equal(w.numpy(), first)
    g = VF.Generator(7); init.xavier_normal_(lin.weight, generator=g)
    np.testing.assert_array_equal(w.numpy(), first)           # the same stream from a generator of that seed


def test_calculate_gain_is_pytorchs_table():
    assert [init.calculate_gain(n) for n in ("linear", "conv1d", "conv_transpose3d", "sigmoid")] == [1, 1, 1, 1]
    assert init.calculate_gain("tanh") == 5.0 / 3 and init.calculate_gain("relu") == math.sqrt(2.0)
    assert init.calculate_gain("selu") == 0.75 and init.calculate_gain("leaky_relu", 0) == math.sqrt(2.0)
    assert init.calculate_gain("leaky_relu") == math.sqrt(2.0 / (1 + 0.01 ** 2))
    with pytest.raises(VkmlError): init.calculate_gain("leaky_relu", "x")
    with pytest.raises(VkmlError): init.calculate_gain("gelu")


def test_init_bad_input():
    with pytest.raises(RankError): init.xavier_uniform_(VF.zeros(5))
    with pytest.raises(RankError): init.orthogonal_(VF.zeros(5))
    with pytest.raises(VkmlError): init.kaiming_uniform_(VF.zeros(3, 3), mode="fan")
    with pytest.raises(VkmlError): init.uniform_(np.zeros(3))
    with pytest.raises(VkmlError): init.normal_(VF.zeros(3, dtype="int32"))


# ---- clipping
def _grads(device, scale=1.0):
    rng = np.random.default_rng(0)
    vals = [rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (3,), (5,)]]
    gs = [(rng.standard_normal(v.shape) * scale).astype(np.float32) for v in vals]
    ps = [Parameter(vkml.tensor(v, device=device)) for v in vals]
    for p, g in zip(ps, gs): p.grad = vkml.tensor(g, device=device)
    return ps, vals, gs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, "inf"])
def test_clip_grad_norm_matches_numpy(device, norm_type):
    ps, vals, gs = _grads(device, scale=3.0)
    flat = np.concatenate([g.ravel() for g in gs]).astype(np.float64)
    p = float(norm_type)
    ref = np.abs(flat).max() if p == math.inf else (np.abs(flat) ** p).sum() ** (1 / p)
    total = clip_grad_norm_(ps, 1.0, norm_type=norm_type)
    assert isinstance(total, vkml.Tensor) and total.shape == () and not total.node.realized   # lazy: no host sync
    coef = min(1.0, 1.0 / (ref + 1e-6))
    np.testing.assert_allclose(total.item(), ref, rtol=1e-5)
    for q, g in zip(ps, gs): np.testing.assert_allclose(q.grad.numpy(), g * coef, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_a_step_after_clipping_equals_numpy(device):
    ps, vals, gs = _grads(device, scale=5.0)
    opt = SGD(ps, lr=0.1, momentum=0.9)
    total = clip_grad_norm_(ps, 0.5)
    opt.step()
    ref = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in gs))
    coef = min(1.0, 0.5 / (ref + 1e-6))
    for q, v, g in zip(ps, vals, gs): np.testing.assert_allclose(q.numpy(), v - 0.1 * g * coef, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total.item(), ref, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_clip_grad_value(device):
    ps, vals, gs = _grads(device)
    clip_grad_value_(ps, 0.3)
    for q, g in zip(ps, gs): np.testing.assert_array_equal(q.grad.numpy(), np.clip(g, -0.3, 0.3))


def test_clip_edge_cases():
    ps, _, gs = _grads("cpu")
    ps[0].grad = vkml.tensor(np.full((4, 3), np.inf, np.float32))
    with pytest.raises(GradError): clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert clip_grad_norm_([Parameter(VF.ones(2))], 1.0).item() == 0.0     # no gradients: 0, as PyTorch
    with pytest.raises(VkmlError): clip_grad_norm_(ps, 1.0, norm_type="l2")
    with pytest.raises(VkmlError): clip_grad_norm_([np.zeros(2)], 1.0)


# ---- schedules: PyTorch's documented formulas, in numpy, against 50 steps
def _lrs(opt, sched, n=50, metric=None):
    out = [opt.param_groups[0]["lr"]]
    for i in range(n - 1):
        sched.step() if metric is None else sched.step(metric(i))
        out.append(opt.param_groups[0]["lr"])
    return np.array(out)


def _opt(lr=0.5, **kw): return SGD([Parameter(VF.ones(1))], lr=lr, **kw)


def test_multistep_exponential_lambda():
    e = np.arange(50)
    opt = _opt(); np.testing.assert_allclose(_lrs(opt, MultiStepLR(opt, [30, 10, 10], gamma=0.3)),
                                             0.5 * 0.3 ** ((e >= 10) * 2 + (e >= 30)), rtol=1e-12)
    opt = _opt(); np.testing.assert_allclose(_lrs(opt, ExponentialLR(opt, 0.93)), 0.5 * 0.93 ** e, rtol=1e-12)
    opt = _opt(); np.testing.assert_allclose(_lrs(opt, LambdaLR(opt, lambda k: 1 / (1 + k))), 0.5 / (1 + e), rtol=1e-12)
    with pytest.raises(OptimizerError): LambdaLR(_opt(), [lambda k: 1, lambda k: 2])


def test_cosine_warm_restarts():
    opt = _opt()
    got = _lrs(opt, CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.01))
    ref, T_cur, T_i = [], 0, 3                       # PyTorch's recursion: T_cur += 1; restart when it reaches T_i
    for _ in range(50):
        ref.append(0.01 + (0.5 - 0.01) * (1 + math.cos(math.pi * T_cur / T_i)) / 2)
        T_cur += 1
        if T_cur >= T_i: T_cur, T_i = T_cur - T_i, T_i * 2
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert got[3] == 0.5 and got[9] == 0.5 and got[21] == 0.5      # restarts at 3, 3+6, 3+6+12
    s = CosineAnnealingWarmRestarts(_opt(), T_0=3, T_mult=2)
    s.step(10.5)                                      # a fractional epoch: 10.5 − 9 into the third period (12)
    assert math.isclose(s.get_last_lr()[0], 0.5 * (1 + math.cos(math.pi * 1.5 / 12)) / 2)


@pytest.mark.parametrize("three_phase,strategy", [(False, "cos"), (True, "linear"), (False, "linear")])
def test_one_cycle(three_phase, strategy):
    opt = _opt(momentum=0.9)
    s = OneCycleLR(opt, max_lr=2.0, total_steps=50, pct_start=0.25, anneal_strategy=strategy, three_phase=three_phase)
    got, moms = [], []
    for i in range(50):
        got.append(opt.param_groups[0]["lr"]); moms.append(opt.param_groups[0]["momentum"])
        if i < 49: s.step()
    ann = (lambda a, b, p: b + (a - b) / 2 * (math.cos(math.pi * p) + 1)) if strategy == "cos" else (lambda a, b, p: (b - a) * p + a)
    lo, mn, p = 2.0 / 25, 2.0 / 25 / 1e4, 0.25 * 50
    phases = ([(p - 1, lo, 2.0, .95, .85), (2 * p - 2, 2.0, lo, .85, .95), (49, lo, mn, .95, .95)] if three_phase else
              [(p - 1, lo, 2.0, .95, .85), (49, 2.0, mn, .85, .95)])
    ref, rm = [], []
    for k in range(50):
        start = 0
        for j, (end, a, b, ma, mb) in enumerate(phases):
            if k <= end or j == len(phases) - 1:
                ref.append(ann(a, b, (k - start) / (end - start))); rm.append(ann(ma, mb, (k - start) / (end - start))); break
            start = end
    np.testing.assert_allclose(got, ref, rtol=1e-12); np.testing.assert_allclose(moms, rm, rtol=1e-12)
    assert math.isclose(got[0], 0.08) and math.isclose(got[-1], mn)


def test_one_cycle_sets_adams_beta1_and_checks():
    opt = Adam([Parameter(VF.ones(1))], lr=1.0)
    OneCycleLR(opt, max_lr=1.0, epochs=2, steps_per_epoch=5)
    assert opt.param_groups[0]["betas"] == (0.95, 0.999)
    with pytest.raises(OptimizerError): OneCycleLR(_opt(), max_lr=1.0)
    with pytest.raises(OptimizerError): OneCycleLR(_opt(), max_lr=1.0, total_steps=10, anneal_strategy="exp")


@pytest.mark.parametrize("mode,threshold_mode", [("min", "rel"), ("max", "abs")])
def test_reduce_on_plateau(mode, threshold_mode):
    rng = np.random.default_rng(1)
    metric = np.cumsum(rng.standard_normal(50)) * (1 if mode == "min" else -1)
    opt = _opt()
    s = ReduceLROnPlateau(opt, mode=mode, factor=0.5, patience=2, threshold=0.1, threshold_mode=threshold_mode,
                          cooldown=1, min_lr=0.01)
    got = _lrs(opt, s, metric=lambda i: vkml.tensor(np.float32(metric[i])))    # a tensor metric is read on the host
    ref, lr, best, bad, cool = [0.5], 0.5, (math.inf if mode == "min" else -math.inf), 0, 0
    for i in range(49):
        a = float(np.float32(metric[i]))
        better = (a < best * 0.9) if mode == "min" else (a > best + 0.1)
        if better: best, bad = a, 0
        else: bad += 1
        if cool > 0: cool -= 1; bad = 0
        if bad > 2:
            new = max(lr * 0.5, 0.01)
            if lr - new > 1e-8: lr = new
            cool, bad = 1, 0
        ref.append(lr)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert min(got) < 0.5
    with pytest.raises(OptimizerError): ReduceLROnPlateau(_opt(), factor=1.0)


def test_sequential():
    opt = _opt()
    s = SequentialLR(opt, [LinearLR(opt, start_factor=0.1, total_iters=5), ExponentialLR(opt, 0.9),
                           MultiStepLR(opt, [5], gamma=0.1)], milestones=[5, 30])
    e = np.arange(50)
    ref = np.where(e < 5, 0.5 * (0.1 + 0.9 * e / 5), np.where(e < 30, 0.5 * 0.9 ** (e - 5), 0.5 * 0.1 ** (e - 30 >= 5)))
    np.testing.assert_allclose(_lrs(opt, s), ref, rtol=1e-12)
    with pytest.raises(OptimizerError): SequentialLR(opt, [ExponentialLR(opt, 0.9)], milestones=[3])


# ---- vkml.utils.data
class Squares:
    def __len__(self): return 10
    def __getitem__(self, i):
        if not 0 <= i < 10: raise IndexError(i)
        return {"x": np.float32([i, i]), "y": i * i, "w": float(i)}


def test_array_loader_takes_a_dataset():
    "vkml.data.DataLoader given a map-style dataset (not arrays) failed inside numpy (fancy indexing a dataset)."
    batches = list(ArrayLoader(Squares(), batch_size=4))
    assert [len(b["y"]) for b in batches] == [4, 4, 2]
    np.testing.assert_array_equal(batches[1]["x"].numpy(), [[4, 4], [5, 5], [6, 6], [7, 7]])
    assert batches[0]["y"].dtype is vkml.int64 and batches[0]["w"].dtype is vkml.float64
    x, y = np.arange(6, dtype=np.float32), np.arange(6)
    assert [b[1].numpy().tolist() for b in ArrayLoader(x, y, batch_size=4)] == [[0, 1, 2, 3], [4, 5]]   # arrays: as before


@pytest.mark.parametrize("device", DEVICES)
def test_loader_shuffle_drop_last_device(device):
    ds = TensorDataset(np.arange(10, dtype=np.float32), np.arange(10) * 2)
    vkml.manual_seed(5)
    a = [b[1].numpy().tolist() for b in DataLoader(ds, batch_size=3, shuffle=True, drop_last=True, device=device)]
    vkml.manual_seed(5)
    dl = DataLoader(ds, batch_size=3, shuffle=True, drop_last=True, device=device)
    b = [t[1].numpy().tolist() for t in dl]
    assert a == b and len(a) == len(dl) == 3 and all(len(x) == 3 for x in a)
    assert len(set(sum(a, []))) == 9 and sum(a, []) != sorted(sum(a, []))
    assert next(iter(dl))[0].device.startswith(device)
    epochs = [[t[1].numpy().tolist() for t in dl] for _ in range(2)]
    assert epochs[0] != epochs[1]                      # a new order each epoch


def test_tensor_dataset_of_tensors_and_collate_of_tensors():
    ds = TensorDataset(vkml.tensor(np.arange(12, dtype=np.float32).reshape(6, 2)), vkml.tensor(np.arange(6)))
    x, y = next(iter(DataLoader(ds, batch_size=4)))
    np.testing.assert_array_equal(x.numpy(), np.arange(8).reshape(4, 2)); np.testing.assert_array_equal(y.numpy(), range(4))


def test_random_split_and_subset():
    ds = TensorDataset(np.arange(11))
    vkml.manual_seed(0); parts = random_split(ds, [0.5, 0.3, 0.2])
    assert [len(p) for p in parts] == [6, 3, 2]        # floor(5.5, 3.3, 2.2) = 5, 3, 2; the remainder round-robin
    assert sorted(sum((p.indices for p in parts), [])) == list(range(11))
    g = VF.Generator(0)
    assert [p.indices for p in random_split(ds, [6, 3, 2], generator=g)] == [p.indices for p in parts]
    assert Subset(ds, [4, 2])[1] == (2,)
    with pytest.raises(DataError): random_split(ds, [6, 6])
    with pytest.raises(DataError): random_split(ds, [0.5, 0.6])


def test_loader_bad_input():
    with pytest.raises(DataError): DataLoader(Squares(), batch_size=0)
    with pytest.raises(DataError): DataLoader(Squares(), batch_size=2.0)
    with pytest.raises(DataError): DataLoader(5)
    with pytest.raises(DataError): DataLoader(Squares(), sampler=range(3), shuffle=True)
    with pytest.raises(DataError): list(DataLoader([object(), object()], batch_size=2))
    with pytest.raises(VkmlError): TensorDataset(np.arange(3), np.arange(4))


# ---- hooks
def test_tensor_hooks_and_retain_grad():
    x = vkml.tensor([1.0, -2.0]).requires_grad_()
    y = x * x
    y.retain_grad()
    h = x.register_hook(lambda g: g * 0 + 1)           # a leaf's hook replaces what is accumulated
    (y * 3).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [3, 3]); np.testing.assert_array_equal(x.grad.numpy(), [1, 1])
    h.remove(); x.grad = None
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6, -12])
    np.testing.assert_array_equal(y.grad.numpy(), [6, 6])
    seen = []
    z = x * 2; z.register_hook(lambda g: seen.append(g.shape))
    vkml.frontend.autograd.grad(z.sum(), x)
    assert seen == [(2,)]                               # autograd.grad runs the hooks too
    with pytest.raises(GradError): z.register_hook(lambda g: vkml.tensor([1.0])); (z * 1).sum().backward()


def test_module_hooks():
    lin = Linear(3, 2)
    acts = []
    h = lin.register_forward_hook(lambda m, args, out: acts.append((m is lin, args[0].shape, out.shape)))
    p = lin.register_forward_pre_hook(lambda m, args: args[0] * 0)
    out = lin(VF.ones(4, 3))
    np.testing.assert_allclose(out.numpy(), np.broadcast_to(lin.bias.numpy(), (4, 2)))
    assert acts == [(True, (4, 3), (4, 2))]
    h.remove(); p.remove(); h.remove()
    lin(VF.ones(1, 3)); assert len(acts) == 1
