"""Fused kernels that once went wrong: each test fails without its fix (found by the fusion experiment, nbs/42)."""
import numpy as np
import pytest
import vkml
import vkml.nn.functional as F
from vkml.frontend.tensor import schedule

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("shape", [(1, 1), (4, 1), (2, 3, 1)])
def test_a_reduction_that_reduces_nothing_takes_no_epilogue(shape):
    """softmax over an axis of extent 1: SUM(keepdim) has its input's shape, so the schedule's shape test could not
    tell the division (after the sum) from the exponential (before it, in the sum's prologue), put both in one
    reduce kernel, and the generated GLSL read the prologue's value after the loop: glslc refused it."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for f, ref in ((lambda t: F.softmax(t, -1), np.ones(shape)), (lambda t: F.log_softmax(t, -1), np.zeros(shape))):
        y = f(vkml.tensor(x, device="vulkan"))
        for k in schedule(y).dispatching:
            if k.kind == "reduce":
                r = k.reduce
                assert not any(n.shape == r.shape and r in n.srcs for n in k.nodes if n is not r), k
        np.testing.assert_allclose(y.numpy(), f(vkml.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-6)


def test_cross_entropy_of_one_class_on_vulkan():
    x = np.random.default_rng(1).standard_normal((5, 1)).astype(np.float32)
    t = np.zeros(5, np.int64)
    got = F.cross_entropy(vkml.tensor(x, device="vulkan"), vkml.tensor(t, device="vulkan")).item()
    assert got == pytest.approx(F.cross_entropy(vkml.tensor(x), vkml.tensor(t)).item(), abs=1e-6) and abs(got) < 1e-6


def _unstored_reads(*ys) -> list:
    "The nodes a kernel of the schedule of `ys` reads that no earlier kernel stored (nor memory, views or constants hold)."
    from vkml.engine.schedule import constant_value
    from vkml.core.ops import VIEW_OPS
    have, bad = set(), []
    for k in schedule(*ys).kernels:
        bad += [s for s in k.inputs() if s.buf is None and id(s) not in have and constant_value(s) is None and s.op not in VIEW_OPS]
        have |= {id(n) for n in (k.nodes if k.kind == "view" else k.stores)}
    return bad


@pytest.mark.parametrize("links", [20, 39])
def test_a_value_recomputed_in_two_kernels_has_its_sources_stored(links):
    """Two interleaved chains (term *= q; total += term) past the fusion limit: a small `term` is recomputed in the
    kernel that ends and in the next one, and the next one read the MUL before it from memory that was never
    written (the store rule looked only at readers outside the kernel, not at a reader computed in two):
    `BackendError: <MUL> was not computed before it was read`."""
    out = {}
    for device in ("cpu", "vulkan"):
        x = vkml.arange(6, dtype=vkml.float32, device=device)
        q, term, total = x * 0.25, x, x
        for _ in range(links): term = term * q; total = total + term
        if device == "vulkan": assert _unstored_reads(total) == []
        out[device] = total.numpy()
    np.testing.assert_allclose(out["vulkan"], out["cpu"], rtol=1e-5)


@pytest.mark.parametrize("steps", [30, 33])
def test_a_kernel_binds_at_most_what_push_descriptors_hold(steps):
    """A row sum read by thirty comparisons, each used by its own `where` between matrix products (matrix_exp's
    squarings once had this shape): the row kernel folded the sum and every comparison, and stored all 30 masks,
    32 buffers in one kernel: with 32 it gave wrong values on lavapipe, with 33 and more it crashed the driver
    (Vulkan guarantees 32 push descriptors). A kernel now binds at most MAX_BINDINGS buffers, reads and writes."""
    from vkml.engine.schedule import MAX_BINDINGS
    out = {}
    for device in ("cpu", "vulkan"):
        rng = np.random.default_rng(0)
        a = vkml.tensor(rng.standard_normal((3, 3)).astype(np.float32) * 0.3, device=device)
        s = a.abs().sum(-1, keepdim=True)               # held, as a user's variable: its value is asked for too
        e = a
        for i in range(steps): e = vkml.where(s > i * 0.01, e @ e, e)
        if device == "vulkan":
            for k in schedule(e).kernels:
                assert len({id(n) for n in k.inputs()}) + len(k.stores) <= MAX_BINDINGS, k
        out[device] = e.numpy()
    np.testing.assert_allclose(out["vulkan"], out["cpu"], rtol=1e-5, atol=1e-7)


def test_a_fused_reduction_with_few_outputs_splits_its_long_rows():
    """A fused reduction gave each output one workgroup: a scalar sum of 10 M terms (GradScaler's inf check over every
    gradient) walked them on one multiprocessor, 26 ms of the H200's GPT step under amp; BatchNorm's per-channel sums
    too. With few outputs and long rows it now runs as two generated kernels (a GPU's choice: the tests run it on
    lavapipe too): 'part' folds chunks of each row, its prologue computed as it reads them, into partials; 'final'
    folds those and runs the epilogue. Nothing of the input's shape is written between them (the prologue was a kernel
    of its own that wrote the whole tensor for the hand-written reduction to read back)."""
    from vkml.backends.vulkan import profile, get_device
    from vkml.backends.vulkan.recorder import runtime
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 16, 64, 64)).astype(np.float32)
    x[1, 2, 3, 4] = np.inf
    cases = [(lambda t: (t * 2).sum(), lambda a: (a * 2).sum()),                                  # a scalar
             (lambda t: (vkml.isinf(t) | vkml.isnan(t)).any(), lambda a: (np.isinf(a) | np.isnan(a)).any()),
             (lambda t: ((t.clamp(-3, 3) - 1) ** 2).mean((0, 2, 3)), lambda a: ((np.clip(a, -3, 3) - 1) ** 2).mean((0, 2, 3))),
             (lambda t: t.abs().amax((0, 2, 3)), lambda a: np.abs(a).max((0, 2, 3))),              # per channel
             (lambda t: (t.half() * 0.5).sum((0, 2, 3)).float(), lambda a: (a * 0.5).sum((0, 2, 3))),   # f16 sums in f32
             (lambda t: (t > 0).int().sum((0, 2, 3)).float(), lambda a: (a > 0).sum((0, 2, 3)))]
    for f, ref in cases:
        out = {}
        xt = vkml.tensor(x, device="vulkan")
        with profile() as p: out["y"] = f(xt).numpy()
        programs = runtime(get_device(0)).programs
        split = {name: form for (_, form), name in programs.items() if form in ("part", "final")}
        assert sorted(split.get(name, name) for name in p) == ["final", "part"], dict(p)   # two kernels, nothing else
        assert all(e["count"] == 1 for e in p.values()), dict(p)
        np.testing.assert_allclose(out["y"], ref(x.astype(np.float64)), rtol=1e-5 * np.sqrt(x.size), atol=0)


def test_a_recalled_split_reduction_works_out_its_programs_once(monkeypatch):
    """A fused reduction split into parts (few outputs over long rows: batch statistics) keeps each part's program with
    the plan, as every other kernel does: a step whose plan is recalled describes none of them again (it re-derived
    them every step, host time of every eager BatchNorm step)."""
    import vkml
    from vkml.backends.vulkan import codegen, kernel_api
    monkeypatch.setattr(kernel_api, "TILE_POLICY", "gpu")   # (a CPU device keeps one kernel: nothing is split there)
    x = vkml.tensor(np.random.default_rng(0).standard_normal((16, 4, 32, 32), dtype=np.float32), device="vulkan")
    calls = []
    recipe = codegen._recipe
    monkeypatch.setattr(codegen, "_recipe", lambda k: calls.append(k) or recipe(k))
    want = (x.numpy() * 2.0).sum(axis=(0, 2, 3))
    for step in range(3):
        calls.clear()
        got = (x * 2.0).sum(dim=(0, 2, 3)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4)
        if step: assert calls == [], f"step {step}: {len(calls)} programs worked out again"


@pytest.mark.parametrize("policy", ["gpu", "auto"])
def test_conv_weight_gradients_are_written_in_place(policy, monkeypatch):
    """A convolution's weight gradient is written straight into its slot of the gradients' concatenation, as a
    product's or a sum's is (PLACEABLE_OPS): a training step copies nothing (it copied each conv's gradient), on a
    GPU's kernels and on a CPU device's, and its gradients still match the CPU's."""
    import vkml, vkml.demo, vkml.optim as optim
    import vkml.nn.functional as F
    from vkml.backends.vulkan import kernel_api, profile
    monkeypatch.setattr(kernel_api, "TILE_POLICY", policy)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((32, 1, 8, 8), dtype=np.float32), rng.integers(0, 10, 32)
    grads = {}
    for dev in ("cpu", "vulkan"):
        vkml.manual_seed(0)
        model = vkml.demo.build_model("cnn").to(dev)
        opt = optim.Adam(model.parameters(), 1e-3)
        xv, yv = vkml.tensor(x, device=dev), vkml.tensor(y, device=dev)
        for step in range(3):
            opt.zero_grad(); loss = F.cross_entropy(model(xv), yv); loss.backward()
            if dev == "vulkan" and step == 2:
                with profile() as prof: opt.step(); loss.item()
                assert not any(n.startswith("copy") for n in prof), sorted(prof)
            else: opt.step(); loss.item()
        grads[dev] = [p.grad.numpy() for p in model.parameters()]
    for g, w in zip(grads["vulkan"], grads["cpu"]): np.testing.assert_allclose(g, w, rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("shape,axes", [((3, 5, 7, 2), (1, 3)), ((6, 40, 3, 9), (0, 2)), ((2, 300, 3, 5), (1, 3)),
                                        ((64, 3, 5, 7), (0, 2, 3)), ((9, 4, 33, 3), (0, 1, 2, 3)), ((700, 3), (0,))])
def test_a_fused_reduction_walks_its_terms_in_every_form(shape, axes):
    """A generated reduction finds each term's coordinates once, then steps them on (dividing only where an axis carries
    into the next): short rows (a thread per output), long ones (a workgroup), few long ones (split), with extents
    shorter than a workgroup's step (several carries a step) and reduced axes that are not neighbours."""
    from vkml.backends.vulkan import kernel_api
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    want = np.sqrt(np.abs(x.astype(np.float64) * 2 + 1)).sum(axis=axes)
    got = (vkml.tensor(x, device="vulkan") * 2 + 1).abs().sqrt().sum(dim=axes).numpy()
    k = int(np.prod([shape[a] for a in axes]))
    np.testing.assert_allclose(got, want, rtol=1e-5 * np.sqrt(k), atol=1e-6 * k)
    assert kernel_api.TILE_POLICY == "gpu"    # (the suite's: split forms run on lavapipe too)


def test_a_recalled_plan_works_out_its_launch_words_once(monkeypatch):
    """A fused kernel's argument words (its operands' layouts, its form) depend only on its operands' views: a kernel of
    a recalled plan keeps them with the plan (they were worked out again every eager step, a fifth of its host time),
    and works them out again when a view differs (a slice at another offset, same shapes, same plan)."""
    import vkml
    from vkml.backends.vulkan import codegen
    x = np.random.default_rng(0).standard_normal((8, 64), dtype=np.float32)
    t = vkml.tensor(x, device="vulkan")
    calls = []
    for name in ("elementwise_form", "reduce_words"):
        f = getattr(codegen, name)
        monkeypatch.setattr(codegen, name, lambda *a, _f=f, _n=name, **kw: calls.append(_n) or _f(*a, **kw))
    for step, lo in enumerate((1, 1, 1, 2, 2, 1)):
        calls.clear()
        got = ((t[lo:lo + 4] * 2 + 1).exp().sum(1) + 1).numpy()
        np.testing.assert_allclose(got, np.exp(x[lo:lo + 4] * 2 + 1).sum(1) + 1, rtol=1e-5)
        if step in (1, 2, 4): assert calls == [], f"step {step}: {calls}"


def test_a_reduction_stores_no_value_of_its_prologue():
    """A six-layer GPT's gradients under amp (nb 38's GPT at 32 wide): LayerNorm's backward put a small region (dx) in a
    row kernel and, recomputed, in the reduce kernel that sums it; both stored it, and a reduce kernel's GLSL writes at
    the outputs' index, so dx's memory got one value per row over the right ones. Most gradients of the first layers came out 10-100% off
    or inf, on lavapipe and on an H100 alike (the eager amp GPT skipped every step). Fewer layers did not cut it so."""
    from vkml.demo_gpt import GPTConfig, build_gpt
    rng = np.random.default_rng(0)
    idx, tgt = (rng.integers(0, 65, (1, 16)) for _ in range(2))
    grads = {}
    for device in ("cpu", "vulkan"):
        model = build_gpt(GPTConfig(vocab_size=65, block_size=16, n_layer=6, n_head=2, n_embd=32, bias=False))
        w = np.random.default_rng(1)                            # (weights large enough for f16 to matter)
        sd = {k: (w.standard_normal(v.shape) * 0.2 + (len(v.shape) == 1)).astype(np.float32) for k, v in model.state_dict().items()}
        model.load_state_dict({k: vkml.tensor(v) for k, v in sd.items()})
        model = model.to(device)
        with vkml.amp.autocast(device):
            out = model(vkml.tensor(idx, device=device))
            loss = F.cross_entropy(out.reshape(-1, 65), vkml.tensor(tgt, device=device).reshape(-1))
        (loss * 1024.0).backward()
        gs = [p.grad for p in model.parameters()]
        if device == "vulkan":
            from vkml.engine.schedule import _prologue
            s = schedule(*gs)
            assert not [k for k in s.kernels if k.kind == "reduce" and any(id(n) in _prologue(k) for n in k.stores)]
            assert _unstored_reads(*gs) == []
        grads[device] = [g.numpy().astype(np.float64) / 1024.0 for g in gs]
    for (n, _), a, b in zip(model.named_parameters(), grads["vulkan"], grads["cpu"]):
        assert np.isfinite(a).all(), n
        assert np.linalg.norm(a - b) <= 1e-2 * np.linalg.norm(b), (n, np.linalg.norm(a - b) / np.linalg.norm(b))


def test_batch_norm_running_statistics_update_in_one_kernel():
    """A training BatchNorm2d's running statistics: one kernel updates both. The unbiased variance (var * n/(n-1)) was
    a kernel of its own (scaled at (1, C, 1, 1), then seen through a RESHAPE and a DETACH, it could not be inlined
    into the (C,) update), and the mean's update, written first, was scheduled before the variance was computed, so
    the two updates were not neighbours to merge. The values are the CPU's."""
    from vkml import nn
    x = np.random.default_rng(2).standard_normal((4, 3, 5, 5)).astype(np.float32)
    got = {}
    for dev in ("cpu", "vulkan"):
        bn = nn.BatchNorm2d(3).to(dev)
        t = vkml.tensor(x, device=dev, requires_grad=True)
        bn(t).sum().backward()
        if dev == "vulkan":
            per_channel = [k for k in schedule(bn.running_mean, bn.running_var, t.grad).dispatching
                           if k.kind == "fused" and np.prod(k.shape) == 3]
            assert len(per_channel) == 2, per_channel       # the updates and rsqrt(var + eps): it was 4
        got[dev] = (bn.running_mean.numpy(), bn.running_var.numpy(), t.grad.numpy())
    for a, b in zip(got["vulkan"], got["cpu"]): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
