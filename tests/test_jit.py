"""vkml.jit: replayed training steps equal eager ones (Adam, a learning-rate schedule, dropout, batch
norm), replays record nothing, a changed shape or dtype captures again, host reads inside a capture are
typed errors, and replaying does not grow memory."""
import weakref
import numpy as np
import pytest

import vkml
import vkml.frontend.functions as VF
import vkml.nn as nn
import vkml.optim as optim
from vkml.engine.capture import JitError
from vkml.frontend.tensor import tensor

pytestmark = pytest.mark.vulkan


def setup(seed=0, bn=False):
    VF.manual_seed(seed)
    layers = [nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 32)]
    if bn: layers.append(nn.BatchNorm1d(32))
    layers += [nn.ReLU(), nn.Linear(32, 4)]
    model = nn.Sequential(*layers).to("vulkan")
    opt = optim.Adam(model.parameters(), lr=0.01, weight_decay=0.01)
    sched = optim.CosineAnnealingLR(opt, T_max=7)
    return model, opt, sched


def make_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def batches(n, batch=16):
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((batch, 10)).astype(np.float32), rng.integers(0, 4, batch)) for _ in range(n)]


def train(use_jit, steps=20, bn=False):
    model, opt, sched = setup(bn=bn)
    step = make_step(model, opt)
    if use_jit: step = vkml.jit(step)
    losses = []
    for xb, yb in batches(steps):
        loss = step(tensor(xb, device="vulkan"), tensor(yb, device="vulkan"))
        losses.append(loss.item())
        sched.step()
    state = [p.numpy() for p in model.parameters()] + [b.numpy() for _, b in model.named_buffers()]
    return np.array(losses), state, step


@pytest.mark.parametrize("bn", [False, True], ids=["mlp", "batchnorm"])
def test_twenty_replayed_adam_steps_equal_eager_ones(bn):
    eager_losses, eager_state, _ = train(False, bn=bn)
    jit_losses, jit_state, step = train(True, bn=bn)
    assert step.captured == 1 and step.calls == 20             # one warm-up, one capture, 18 replays
    # The replayed step is not the eager step's graph: inside a capture the class targets are data it
    # cannot check on the host, so cross entropy picks with a gather instead of a one-hot comparison;
    # both add the same numbers, but the kernels that reduce them are cut differently. Hence the
    # parity bound, not equality.
    np.testing.assert_allclose(jit_losses, eager_losses, rtol=1e-5, atol=1e-6)
    for a, b in zip(jit_state, eager_state):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # and they did train: the schedule and the dropout masks moved the loss
    assert len(set(np.round(jit_losses, 6))) > 15


def test_a_replay_records_nothing_and_submits_once():
    from vkml.backends.vulkan.device import reset_stats, stats
    model, opt, _ = setup()
    step = vkml.jit(make_step(model, opt))
    (xb, yb), = batches(1)
    x, y = tensor(xb, device="vulkan"), tensor(yb, device="vulkan")
    step(x, y); step(x, y)
    reset_stats()
    for _ in range(3): step(x, y)
    s = stats()
    assert s["submissions"] == 3 and s["dispatches"] == 0, s


def test_new_shapes_or_dtypes_capture_again():
    model, opt, _ = setup()
    step = vkml.jit(make_step(model, opt))
    (xb, yb), = batches(1)
    for _ in range(3): step(tensor(xb, device="vulkan"), tensor(yb, device="vulkan"))
    assert step.captured == 1
    step(tensor(xb[:5], device="vulkan"), tensor(yb[:5], device="vulkan"))      # a smaller last batch
    assert step.captured == 2
    step(tensor(xb, device="vulkan"), tensor(yb, device="vulkan"))              # back: replayed, not captured
    assert step.captured == 2

    @vkml.jit
    def double(x): return x * 2
    for dt in ("float32", "float32", "float16", "int32"):
        out = double(tensor(np.arange(4), dtype=dt, device="vulkan"))
        assert out.dtype.name == dt and out.tolist() == [0, 2, 4, 6]
    assert double.captured == 3


def test_outputs_follow_the_inputs():
    @vkml.jit
    def f(a, b): return (a * b).sum(), a - b
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
        s, d = f(tensor(a, device="vulkan"), tensor(b, device="vulkan"))
        np.testing.assert_allclose(s.item(), (a * b).sum(), rtol=1e-5)
        np.testing.assert_allclose(d.numpy(), a - b, rtol=1e-6)


def test_host_reads_inside_a_capture_are_typed_errors():
    @vkml.jit
    def f(x): return x * x.sum().item()
    x = tensor(np.ones(3, np.float32), device="vulkan")
    f(x)
    with pytest.raises(JitError, match=r"\.item\(\)"):
        f(x)

    @vkml.jit
    def g(x): return 3
    g(x)
    with pytest.raises(JitError, match="returns tensors"):
        g(x)
    j = vkml.jit(lambda x: x * 2)
    w = tensor(np.ones(3, np.float32), device="vulkan").requires_grad_()
    j(w)
    with pytest.raises(JitError, match="no requires_grad"):
        j(w)


def test_cpu_runs_the_function_every_call():
    calls = []
    @vkml.jit
    def f(x):
        calls.append(1)
        return x + 1
    for _ in range(3): assert f(tensor([1.0])).tolist() == [2.0]
    assert len(calls) == 3 and f.captured == 0


def test_replays_keep_memory_flat():
    from vkml.backends.vulkan.memory import memory_stats
    model, opt, _ = setup()
    step = vkml.jit(make_step(model, opt))
    (xb, yb), = batches(1)
    seen = []
    for i in range(30):
        step(tensor(xb, device="vulkan"), tensor(yb, device="vulkan")).item()
        if i >= 3:
            s = memory_stats()
            seen.append((s["bytes_in_use"], s["buffers"]))
    assert len(set(seen)) == 1, seen[:3]


def test_released_captures_give_their_memory_back():
    from vkml.backends.vulkan.memory import memory
    mem = memory()
    @vkml.jit
    def f(x): return x.exp() + 1
    x = tensor(np.ones(64, np.float32), device="vulkan")
    f(x); f(x); out = f(x)
    (st,), = f.captures.values()
    captured = st.captured
    mine = lambda: any(p is captured.pools for p in mem.private)
    assert mine() and captured.pools["device"].live > 0
    del st
    f.reset()
    mem.stats()
    # what a call hands back is a copy in shared memory: the capture's pools close with it
    assert not mine() and not captured.pools
    np.testing.assert_allclose(out.numpy(), np.e + 1, rtol=1e-6)


# --- the contract (nbs/29_jit.ipynb, "The contract"; ADR 0028): each test fails on the jit before it ---

def vk(a, dtype=np.float32):
    return tensor(np.asarray(a, dtype), device="vulkan")


def digits_mlp(optimizer):
    from vkml.data import digits_split
    VF.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).to("vulkan")
    opt = optimizer(model.parameters())
    xtr, ytr, _, _ = digits_split()
    return model, opt, [(xtr[i:i + 32], ytr[i:i + 32]) for i in range(0, 320, 32)]


@pytest.mark.parametrize("optimizer", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                       lambda ps: optim.Adam(ps, lr=0.01)], ids=["sgd", "adam"])
def test_losses_collected_over_ten_steps_equal_the_eager_loop(optimizer):
    runs = []
    for use_jit in (False, True):
        model, opt, data = digits_mlp(optimizer)
        step = make_step(model, opt)
        if use_jit: step = vkml.jit(step)
        losses = [step(vk(x), tensor(y, device="vulkan")) for x, y in data]      # kept, read at the end
        runs.append([l.item() for l in losses])
    assert len(set(runs[1])) == 10                   # one value per step, not the last replay's ten times
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-5, atol=1e-5)


def test_outputs_kept_across_calls_keep_their_values():
    f = vkml.jit(lambda x: x * 2)
    outs = [f(vk([i])) for i in range(6)]
    assert [o.item() for o in outs] == [0, 2, 4, 6, 8, 10]


def test_in_place_updates_inside_the_step_go_on_after_the_capture():
    count, w = vk([0.0]), vk([1.0, 2.0])
    ema = w.clone().realize()
    @vkml.jit
    def f(x):
        count.add_(1)
        w.add_(x)
        ema.mul_(0.5).add_(w * 0.5)
        return w.sum()
    ref_w, ref_ema = np.array([1.0, 2.0]), np.array([1.0, 2.0])
    for i in range(5):
        f(vk([1.0, 1.0]))
        ref_w = ref_w + 1; ref_ema = ref_ema * 0.5 + ref_w * 0.5
    assert count.item() == 5
    np.testing.assert_allclose(w.numpy(), ref_w)
    np.testing.assert_allclose(ema.numpy(), ref_ema, rtol=1e-6)


def test_caller_writes_to_what_the_step_reads_are_seen_by_the_next_replay():
    w = vk([1.0, 1.0])
    f = vkml.jit(lambda x: x * w)
    for _ in range(3): f(vk([1.0, 2.0]))
    w.add_(10)                                        # a functional write: w moves to new memory
    np.testing.assert_allclose(f(vk([1.0, 2.0])).numpy(), [11, 22])
    w.copy_(vk([3.0, 4.0]))
    np.testing.assert_allclose(f(vk([1.0, 2.0])).numpy(), [3, 8])
    assert f.captured == 1                            # replayed, not captured again


def test_an_in_place_op_on_an_argument_updates_the_callers_tensor_every_call():
    @vkml.jit
    def f(x):
        x.add_(1)
        return x * 2
    xs = [vk([float(i)]) for i in range(5)]
    outs = [f(x) for x in xs]
    assert [x.item() for x in xs] == [1, 2, 3, 4, 5]
    assert [o.item() for o in outs] == [2, 4, 6, 8, 10]


def sgd_model():
    VF.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2)).to("vulkan")
    return model, optim.SGD(model.parameters(), lr=0.1)


def run_both(script):
    "Run `script(step, model, opt)` eagerly and jitted from the same start: the two results."
    out = []
    for use_jit in (False, True):
        model, opt = sgd_model()
        step = make_step(model, opt)
        out.append(script(vkml.jit(step) if use_jit else step, model, opt))
    return out


def close(a, b, tol=1e-5):
    for x, y in zip(a, b): np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


def test_load_state_dict_between_replays_is_trained_from():
    (xb, yb), = batches(1)
    def script(step, model, opt):
        x, y = vk(xb[:, :4]), tensor(yb % 2, device="vulkan")
        sd = {k: v.numpy() for k, v in model.state_dict().items()}
        for _ in range(4): step(x, y)
        model.load_state_dict(sd)                     # back to the start
        with vkml.no_grad(): model[0].bias.add_(1.0)  # and an in-place write to a parameter
        losses = [step(x, y).item() for _ in range(3)]
        return losses, [p.numpy() for p in model.parameters()], [v.numpy() for v in model.state_dict().values()]
    (le, pe, se), (lj, pj, sj) = run_both(script)
    # (The first loss after the load is left out: the eager step after a load builds a new flat store, whose first
    # update is not an in-place one, and an eager step whose update is in place returns a loss that already reads
    # part of the updated parameters -- a schedule bug outside the jit, reported with this branch.)
    close(le[1:], lj[1:]); close(pe, pj); close(se, sj)   # a checkpoint saved after holds the weights trained


def test_eval_after_a_train_capture_stops_dropout_and_train_resumes_it():
    model, _ = sgd_model()
    f = vkml.jit(lambda x: model(x))
    x = vk(np.ones((3, 4)))
    for _ in range(3): f(x)
    model.eval()
    np.testing.assert_allclose(f(x).numpy(), model(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(f(x).numpy(), model(x).numpy(), rtol=1e-6)
    model.train()
    a, b = f(x).numpy(), f(x).numpy()
    assert not np.allclose(a, b)                      # dropout draws again
    assert f.captured == 2                            # train, eval (after a warm-up), then the kept train capture


@pytest.mark.parametrize("change", ["weight_decay", "betas", "eps", "lr"])
def test_adam_settings_changed_between_replays_are_honoured(change):
    def script(step, model, _):
        opt = optim.Adam(model.parameters(), lr=0.01)
        step = vkml.jit(make_step(model, opt)) if hasattr(step, "captures") else make_step(model, opt)
        (xb, yb), = batches(1)
        x, y = vk(xb[:, :4]), tensor(yb % 2, device="vulkan")
        for _ in range(3): step(x, y)
        g = opt.param_groups[0]
        g[change] = dict(weight_decay=0.5, betas=(0.5, 0.9), eps=0.1, lr=0.1)[change]
        return [step(x, y).item() for _ in range(3)], [p.numpy() for p in model.parameters()]
    (le, pe), (lj, pj) = run_both(script)
    close(le, lj); close(pe, pj)


def test_requires_grad_false_between_replays_freezes_the_parameter():
    def script(step, model, opt):
        (xb, yb), = batches(1)
        x, y = vk(xb[:, :4]), tensor(yb % 2, device="vulkan")
        for _ in range(3): step(x, y)
        model[0].weight.requires_grad_(False)
        before = model[0].weight.numpy()
        for _ in range(3): step(x, y)
        return [before, model[0].weight.numpy()] + [p.numpy() for p in model.parameters()]
    e, j = run_both(script)
    close(e, j)
    np.testing.assert_array_equal(j[0], j[1])


def test_two_threads_calling_one_jitted_function_get_their_own_results():
    import threading
    f = vkml.jit(lambda x: x * x + 1)
    f(vk([1.0])); f(vk([1.0]))
    wrong = []
    def worker(v):
        outs = [(f(vk([v])), v) for _ in range(30)]
        wrong.extend((o.item(), v * v + 1) for o, v in outs if o.item() != v * v + 1)
    ts = [threading.Thread(target=worker, args=(float(v),)) for v in (2, 3, 5)]
    for t in ts: t.start()
    for t in ts: t.join()
    assert not wrong, wrong[:3]


def test_failed_captures_give_their_memory_back():
    import gc
    from vkml.backends.vulkan.memory import memory_stats
    @vkml.jit
    def boom(x):
        y = (x * 2).sum()                             # (built, never run: the capture submits nothing)
        raise ValueError("boom")
    x = vk(np.ones(1000))
    def fail():
        try: boom(x)
        except ValueError: pass
    for _ in range(3): fail()
    gc.collect()
    s0 = memory_stats()
    for _ in range(50): fail()
    gc.collect()
    s1 = memory_stats()
    assert (s1["bytes_in_use"], s1["bytes_reserved"], s1["blocks"]) == (s0["bytes_in_use"], s0["bytes_reserved"], s0["blocks"])
    from vkml.core.dtypes import OutOfMemoryError
    from vkml.backends.vulkan.memory import memory
    with pytest.raises(OutOfMemoryError, match="all of the device's pools"):   # what the heap holds, not one pool
        memory().tensors._oom(1)


def test_a_kept_gradient_keeps_its_value():
    model, opt = sgd_model()
    model.eval()                                      # (no dropout: every call's gradient is the same function)
    step = vkml.jit(make_step(model, opt))
    (xb, yb), = batches(1)
    kept = []
    for i in range(5):
        step(vk(xb[:, :4] * (i + 1)), tensor(yb % 2, device="vulkan"))
        kept.append((model[0].weight.grad, model[0].weight.grad.numpy()))
    for g, value in kept: np.testing.assert_array_equal(g.numpy(), value)
    assert len({v.tobytes() for _, v in kept}) == 5


def test_a_closure_tensor_of_a_new_shape_captures_again():
    w = vk([1.0, 2.0])
    f = vkml.jit(lambda x: (x * w).sum())
    for _ in range(3): f(vk([1.0, 1.0]))
    w = vk([5.0])                                     # (a new object: the closure cell now names it)
    assert f(vk([1.0, 1.0])).item() == 10.0
    assert f(vk([1.0, 1.0])).item() == 10.0


def test_state_replaced_by_a_new_object_is_a_typed_error():
    class Acc:
        total = vk([0.0])
    @vkml.jit
    def f(x):
        Acc.total = Acc.total + x                     # a new tensor each call: a replay could not follow it
        return Acc.total * 1
    f(vk([1.0]))
    with pytest.raises(JitError, match="replaced"):
        f(vk([1.0]))


def test_a_per_parameter_optimiser_replays_as_it_steps_eagerly():
    """Adam without the flat store keeps its moments in place (they were new tensors each step, which a replay
    cannot follow: the capture refused it), so a jitted step with it trains exactly as the eager one does."""
    (xb, yb), = batches(1)
    def script(step, model, opt):
        opt = optim.Adam(model.parameters(), lr=0.01, fused=False)
        step = vkml.jit(make_step(model, opt)) if hasattr(step, "captured") else make_step(model, opt)
        x, y = vk(xb[:, :4]), tensor(yb % 2, device="vulkan")
        losses = [step(x, y).item() for _ in range(4)]
        assert getattr(step, "captured", 1) == 1      # (jitted: captured once, replayed three times)
        return losses, [p.numpy() for p in model.parameters()], [s["exp_avg_sq"].numpy() for s in opt.state.values()]
    (le, pe, se), (lj, pj, sj) = run_both(script)
    close(le, lj); close(pe, pj); close(se, sj)


def test_a_lazy_value_built_between_replays_keeps_what_it_read():
    model, opt = sgd_model()
    step = vkml.jit(make_step(model, opt))
    (xb, yb), = batches(1)
    x, y = vk(xb[:, :4]), tensor(yb % 2, device="vulkan")
    for _ in range(3): step(x, y)
    before = model[0].weight.numpy()
    w0 = model[0].weight * 1                          # lazy, reads the memory the next replay writes
    step(x, y)
    np.testing.assert_array_equal(w0.numpy(), before)
    assert not np.array_equal(model[0].weight.numpy(), before)


def test_a_lazy_value_built_before_the_capture_is_not_recomputed_by_replays(vulkan):
    "A reader of the weights built between the warm-up and the capture was computed inside the capture, so every replay rewrote it."
    import vkml.nn as nn, vkml.nn.functional as F
    m = nn.Linear(3, 2).to("vulkan")
    opt = vkml.optim.SGD(m.parameters(), lr=0.1)
    x, y = vkml.ones((4, 3), device="vulkan"), vkml.zeros((4, 2), device="vulkan")
    @vkml.jit
    def step(x, y):
        opt.zero_grad(); loss = F.mse_loss(m(x), y); loss.backward(); opt.step()
        return loss
    step(x, y)
    want = m.bias.numpy().copy()
    kept = (m.bias + 1).exp()               # lazy, built before the capture
    step(x, y); step(x, y); step(x, y)      # the capture, then replays
    np.testing.assert_allclose(kept.numpy(), np.exp(want + 1), rtol=1e-6)


def _mlp_step(device="vulkan", momentum=0.0):
    import vkml.nn.functional as F
    vkml.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).to(device)
    opt = optim.SGD(m.parameters(), lr=0.1, momentum=momentum)
    x, y = vkml.ones((4, 3), device=device), vkml.zeros((4, 2), device=device)
    def step(x, y):
        opt.zero_grad(); loss = F.mse_loss(m(x), y); loss.backward(); opt.step()
        return loss
    return m, opt, x, y, step


def test_a_parameter_rebound_before_the_capture_is_repaired_not_refused(vulkan):
    "A functional write into a parameter between the warm-up and the capture rebuilt the flat store inside the capture (JitError)."
    m, opt, x, y, step = _mlp_step()
    eager = [step(x, y).item()]
    with vkml.no_grad(): m[0].weight.copy_(m[0].weight * 0.25)
    eager += [step(x, y).item() for _ in range(3)]
    m2, opt2, x, y, step2 = _mlp_step()
    js = vkml.jit(step2)
    got = [js(x, y).item()]
    with vkml.no_grad(): m2[0].weight.copy_(m2[0].weight * 0.25)
    got += [js(x, y).item() for _ in range(3)]
    np.testing.assert_allclose(got, eager, rtol=1e-5)


def test_an_optimiser_step_without_gradients_keeps_the_flat_store(vulkan):
    "opt.zero_grad(); opt.step() between calls dropped the flat store, so the capture rebuilt it (JitError)."
    m, opt, x, y, step = _mlp_step(momentum=0.9)
    js = vkml.jit(step)
    js(x, y); opt.zero_grad(); opt.step()
    js(x, y); js(x, y)


def test_a_graph_retained_across_a_replay_is_stale(vulkan):
    "A loss built before a replay and differentiated after it would read the replay's weights: an error, as in PyTorch."
    from vkml.core.dtypes import InplaceError
    import vkml.nn.functional as F
    m, opt, x, y, step = _mlp_step()
    js = vkml.jit(step)
    js(x, y); js(x, y)                       # the warm-up and the capture
    loss = F.mse_loss(m(x), y); loss.numpy()
    js(x, y)                                 # a replay writes the weights
    with pytest.raises(InplaceError):
        loss.backward()
        for p in m.parameters(): p.grad.numpy()


def test_a_capture_does_not_raise_the_error_of_an_unrelated_lazy_value():
    """Regression: a capture computes the live lazy values on its device first (so that they keep what they read);
    one that cannot be computed there (PROD has no Vulkan kernel) made the capture raise its BackendError. Now it
    is left lazy and raises when it is read, as it would have without the jit."""
    model, opt = sgd_model()
    step = vkml.jit(make_step(model, opt))
    (xb, yb), = batches(1)
    x, y = vk(xb[:, :4]), tensor(yb % 2, device="vulkan")
    orphan = vkml.prod(model[0].weight)              # lazy, and no Vulkan kernel computes it
    losses = [step(x, y).item() for _ in range(3)]
    assert step.captured == 1 and all(np.isfinite(losses))
    with pytest.raises(vkml.BackendError): orphan.numpy()


def test_a_replay_renews_only_state_something_else_holds():
    """A replay marks the old node of each tensor it writes stale (so a value built from it raises) only when something
    besides the tensor holds that node: with nothing holding it, the replay keeps the node (no work per parameter)."""
    model, opt = sgd_model()
    step = vkml.jit(make_step(model, opt))
    (xb, yb), = batches(1)
    x, y = vk(xb[:, :4]), tensor(yb % 2, device="vulkan")
    for _ in range(3): step(x, y)
    w = model[0].weight
    n0 = weakref.ref(w.node)                          # (a weak reference: holding the node would count)
    step(x, y); step(x, y)
    assert w.node is n0()                             # nothing read it: kept
    held = w * 1                                      # a lazy value reads it now...
    step(x, y)
    assert w.node is not n0()                         # ...so the replay renewed it, after computing `held`
    assert held.node.realized


def test_the_capture_calls_output_keeps_its_value_after_a_replay():
    """Regression (discrete GPUs, run by tests/test_discrete_paths.py): the copy of the capture call's output made
    ahead of the next replay took that replay's recorded readback, and read the replay's value (12, not 8)."""
    x = vk(np.ones(4))
    w = vk(np.zeros(4)).realize()
    @vkml.jit
    def f(x):
        with vkml.no_grad(): w.add_(x)
        return w.sum()
    o1, o2, o3 = f(x), f(x), f(x)                    # eager, captured (kept unread), replayed
    assert (o1.item(), o2.item(), o3.item()) == (4.0, 8.0, 12.0)
