"""Memory stays flat: 1,000 training steps of a small MLP with Adam, 1,000 inference batches under
no_grad and 1,000 replayed steps keep the device bytes in use, the number of live buffers and the
Vulkan objects (pipelines, descriptor set layouts, command buffers, fences, generated programs)
exactly where they were after step 2, and the host's resident memory within a few percent. A planted
leak (a range the allocator never takes back) fails the same check. (`vkml.close()` releasing
everything is tests/test_reliability.py's `test_close_releases_everything_and_reopening_leaks_nothing`.)"""
import gc
import os
import numpy as np
import pytest

import vkml
import vkml.frontend.functions as VF
import vkml.nn as nn
import vkml.optim as optim
from vkml.frontend.tensor import tensor
from vkml.backends.vulkan import memory as vkmem

pytestmark = pytest.mark.vulkan

STEPS = 1000
RSS_TOLERANCE = 0.03          # host memory may move a little (allocator arenas); a leak moves it a lot


def rss() -> int:
    "Resident host memory of this process, in bytes."
    with open("/proc/self/statm") as f: return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def vk_objects() -> dict:
    "Counts of the Vulkan objects a step could leak: pipelines, descriptor set layouts, command buffers, fences, programs."
    from vkml.backends.vulkan.device import get_device, stats
    from vkml.backends.vulkan.recorder import runtime
    dev = get_device(); rt = runtime(dev)
    m = vkml.memory_stats("vulkan")
    return dict(pipelines=len(rt.pipelines.pipes), layouts=len(rt.pipelines.layouts),
                pipelines_created=stats()["pipelines_created"], command_buffers=len(dev._cbs) + len(dev._inflight),
                fences=len(dev._fences) + len(dev._inflight), buffers=m["buffers"], blocks=m["blocks"],
                bytes_in_use=m["bytes_in_use"], programs=len(rt.programs))


def sample() -> tuple:
    "Memory once the device has finished the step (a read waits only for the part of the step that computed it)."
    from vkml.core.graph import get_backend
    get_backend("vulkan:0").device.wait()
    s = vkml.memory_stats()
    return s["bytes_in_use"], s["buffers"], rss(), vk_objects()


def assert_flat(samples, what):
    "Every sample after step 2 has the device bytes, buffers and Vulkan objects of step 2, and RSS within the tolerance."
    (b0, n0, r0, o0), last = samples[0], samples[-1]
    grew = [(i + 2, b, n) for i, (b, n, _, _) in enumerate(samples) if (b, n) != (b0, n0)]
    assert not grew, f"{what}: device memory moved after step 2 (step, bytes, buffers): first {grew[:3]}, was {(b0, n0)}"
    moved = [(i + 2, {k: (o0[k], o[k]) for k in o0 if o[k] != o0[k]}) for i, (_, _, _, o) in enumerate(samples) if o != o0]
    assert not moved, f"{what}: Vulkan objects moved after step 2 (step, {{count: (was, now)}}): first {moved[:3]}"
    assert last[2] <= r0 * (1 + RSS_TOLERANCE), f"{what}: host RSS grew from {r0:,} to {last[2]:,} bytes"


def model_and_data(seed=0):
    VF.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)).to("vulkan")
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal((32, 64)).astype(np.float32), rng.integers(0, 10, 32)) for _ in range(8)]
    return model, data


def settle():
    "Collect what earlier tests left in reference cycles, so that it is not freed during the measurement."
    gc.collect()
    vkml.memory_stats()


def train_steps(n, jit=False):
    settle()
    model, data = model_and_data()
    opt = optim.Adam(model.parameters(), lr=1e-3)
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward(); opt.step()
        return loss
    if jit: step = vkml.jit(step)
    samples = []
    for i in range(n):
        x, y = data[i % len(data)]
        step(tensor(x, device="vulkan"), tensor(y, device="vulkan")).item()
        if i >= 2: samples.append(sample())
    return samples


def inference_batches(n):
    settle()
    model, data = model_and_data()
    samples = []
    with vkml.no_grad():
        for i in range(n):
            x, _ = data[i % len(data)]
            model(tensor(x, device="vulkan")).argmax(1).numpy()
            if i >= 2: samples.append(sample())
    return samples


def test_training_steps_keep_memory_flat():
    assert_flat(train_steps(STEPS), "1,000 Adam steps")


def test_replayed_steps_keep_memory_flat():
    assert_flat(train_steps(STEPS, jit=True), "1,000 replayed Adam steps")


def test_inference_keeps_memory_flat():
    assert_flat(inference_batches(STEPS), "1,000 no_grad batches")


def test_a_planted_leak_fails_the_check(monkeypatch):
    "A pool that never takes back one range of each collection: the check must catch it."
    real = vkmem.Pool.collect
    def leaky(self):
        if self.kind == "device" and self.dropped: self.dropped.pop(); self.live -= 1   # forgotten: never freed
        real(self)
    monkeypatch.setattr(vkmem.Pool, "collect", leaky)
    with pytest.raises(AssertionError, match="device memory moved"):
        assert_flat(train_steps(60), "60 Adam steps, leaking")


def chain_peak(jit: bool, links: int = 8, n: int = 256) -> tuple:
    "Peak bytes a step of `links` products in a chain (each n x n float32) takes beyond its inputs, and one link's size."
    settle()
    rng = np.random.default_rng(0)
    x = tensor(rng.standard_normal((n, n)).astype(np.float32), device="vulkan")
    w = tensor((rng.standard_normal((n, n)) / n).astype(np.float32), device="vulkan")
    def step(x, w):
        y = x
        for _ in range(links): y = (y @ w).relu()   # each link is dead once the next is computed
        return y.sum()
    f = vkml.jit(step) if jit else step
    with vkml.no_grad():
        f(x, w).item(); f(x, w).item()
        if jit:
            (st,) = next(iter(f.captures.values()))
            cap = st.captured                     # (its device pool holds its own copies of the inputs too)
            return cap.pools["device"].peak - sum(t.alloc.size for t in cap.inputs), n * n * 4
        before = vkml.memory_stats()["bytes_in_use"]; vkml.reset_peak_memory_stats()
        f(x, w).item()
        return vkml.memory_stats()["peak_bytes_in_use"] - before, n * n * 4


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "captured"])
def test_a_step_reuses_the_memory_it_drops(jit):
    """Eight products in a chain need two links' memory at a time, eager or captured: the memory plan hands a dead
    link's range to a later one, and a captured step keeps the plan (its recordings bind only what they reuse)."""
    peak, link = chain_peak(jit)
    assert peak <= 3 * link, f"{'captured' if jit else 'eager'} chain of 8 links took {peak:,} bytes ({peak / link:.1f} links)"


def test_the_peak_counts_every_pool_together():
    """A captured step's private pools and the shared one (its weights) are one device: the peak is of their sum, never
    below what is in use (it was the largest single pool's, so a jit step's peak left its weights out)."""
    settle()
    w = tensor(np.ones((512, 512), np.float32), device="vulkan")        # the shared pool
    f = vkml.jit(lambda x, w: ((x @ w).relu() @ w).sum())
    x = tensor(np.ones((512, 512), np.float32), device="vulkan")
    with vkml.no_grad():
        f(x, w).item(); f(x, w).item()
        vkml.reset_peak_memory_stats()
        f(x, w).item()
    s = vkml.memory_stats()
    (st,) = next(iter(f.captures.values()))
    private = sum(p.in_use for p in st.captured.pools.values())
    assert private > 0 and s["bytes_in_use"] - private >= 512 * 512 * 4   # both pools hold memory
    assert s["peak_bytes_in_use"] >= s["bytes_in_use"]


def test_a_recording_merges_the_neighbours_it_frees():
    """Two ranges a recording made side by side and then dropped become one: a tensor as large as both, later in the
    same recording, takes their bytes (they were two entries of its recycled list, and it took new memory)."""
    from vkml.backends.vulkan.device import get_device
    p = vkmem.Pool(get_device(), "device", block_size=1 << 20)   # a pool of its own: one empty block, ranges in order
    serial = 10 ** 9                                   # a serial no submission reaches
    p.begin_recording(serial)
    try:
        a, b = p.alloc(1 << 16), p.alloc(1 << 16)
        assert b.block is a.block and b.offset == a.offset + a.size   # (side by side: the test's premise)
        a.use[0] = b.use[0] = serial                   # made and used by this recording
        where = (a.block.id, a.offset)
        del a, b; p.collect()
        c = p.alloc(2 << 16)
        assert (c.block.id, c.offset) == where and len(p.blocks) == 1
    finally:
        p.end_recording(serial)
        p.close()


def test_the_planned_peak_counts_a_freed_view_once():
    """A view has no memory of its own: freeing a node and its views frees the node's bytes once. Every output is
    stored and counts until the end, so the plan's peak is at least their bytes (it subtracted each freed view too,
    and fell below them)."""
    rng = np.random.default_rng(0)
    m = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).to("vulkan")
    x = tensor(rng.standard_normal((128, 256)).astype(np.float32), device="vulkan")
    y = tensor(rng.integers(0, 10, 128), device="vulkan")
    grads = vkml.frontend.autograd.grad(nn.functional.cross_entropy(m(x), y), list(m.parameters()))
    s = vkml.schedule(*grads)
    assert s.planned_peak() >= sum(g.numel() * 4 for g in grads)


class _Block(nn.Module):
    "A GPT block: layer norms, a fused q, k, v projection split three ways, causal attention, a GELU MLP, residuals."
    def __init__(self, C, H):
        super().__init__()
        self.ln1, self.qkv, self.proj = nn.LayerNorm(C), nn.Linear(C, 3 * C, bias=False), nn.Linear(C, C, bias=False)
        self.ln2, self.fc, self.out = nn.LayerNorm(C), nn.Linear(C, 4 * C, bias=False), nn.Linear(4 * C, C, bias=False)
        self.H = H
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.reshape(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))


def block_step_peak(blocks: int, C=64, H=4, T=32, B=16) -> float:
    "The planned peak of an eager AdamW step (forward, backward, update: one graph) of `blocks` blocks, in (B, T, C) tensors."
    rng = np.random.default_rng(0)
    m = nn.Sequential(*[_Block(C, H) for _ in range(blocks)], nn.Linear(C, 10)).to("vulkan")
    opt = optim.AdamW(m.parameters(), lr=1e-3)
    x = tensor(rng.standard_normal((B, T, C)).astype(np.float32), device="vulkan")
    y = tensor(rng.integers(0, 10, B * T), device="vulkan")
    for _ in range(2):
        opt.zero_grad(); nn.functional.cross_entropy(m(x).reshape(-1, 10), y).backward(); opt.step()
    opt.zero_grad(); nn.functional.cross_entropy(m(x).reshape(-1, 10), y).backward()
    with vkml.no_grad(): outs, _ = opt._step_fused()     # (what step() would realize)
    return vkml.schedule(*outs).planned_peak() / (B * T * C * 4)


def test_a_deeper_model_costs_its_saved_activations_and_no_more():
    """Each block more costs what its forward saves for the backward: about 12 tensors of the block's input size (its
    input, the two norms' outputs, q, k, v, the attention's output, the residual sum, and the MLP's 4-wide product).
    Eager PyTorch keeps 16: also the GELU's 4-wide result, which vkML's weight gradient computes again from the
    product (`autograd.RECOMPUTED`). And the schedule computes nodes in the order autograd made them, so a block's
    weight gradients come right after its output's gradient, which is then freed. (Walking the optimiser's
    concatenation of gradients in parameter order computed every block's output gradient first and kept each for
    its weight gradient: 4 more per block.)"""
    per_block = (block_step_peak(8) - block_step_peak(4)) / 4
    assert per_block < 13, f"each block adds {per_block:.1f} tensors of its input's size to the step's peak"


def test_weight_gradients_follow_their_output_gradients_through_the_optimisers_reshapes():
    """Regression: the optimiser flattens each gradient with a reshape it makes at step time, and the schedule sorted
    the flat concatenation's sources by *those* reshapes' order, which is parameter order: the first block's
    gradients came first and pulled the whole backward before any other weight gradient (in the GPT, the tied
    embedding's did), so each block's saved inputs waited for its weight gradients to the end. Sorted by the order
    the gradients themselves were made, a 4-block step planned 69.3 input-sized tensors (74.4 before; 57.3 once
    activations were recomputed for the weight gradients)."""
    assert block_step_peak(4) < 72


def test_a_tied_weights_output_gradient_comes_first():
    """Regression: a tied weight's gradient is a sum made at the end of backward (the output layer's term plus the
    embedding's), and the schedule reached the output layer's term only through that sum, last: the final hidden
    state, which the term reads, stayed alive through the whole backward. Now the sum's terms are visited in the
    order they were made, and the output layer's weight gradient comes before the hidden layers' backward."""
    from vkml.engine.schedule import order, _base
    from vkml.core.ops import Op
    rng = np.random.default_rng(0)
    emb, hidden = nn.Embedding(20, 16), nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
    head = nn.Linear(16, 20, bias=False)
    head.weight = emb.weight
    m = nn.ModuleList([emb, hidden, head]).to("vulkan")
    opt = optim.AdamW(m.parameters(), lr=1e-3)
    x, y = (tensor(rng.integers(0, 20, 8), device="vulkan") for _ in range(2))
    for step in range(3):
        opt.zero_grad()
        h = hidden(emb(x))
        nn.functional.cross_entropy(head(h), y).backward()
        if step < 2: opt.step()                            # (the third step is scheduled, not run)
    with vkml.no_grad(): outs, _ = opt._step_fused()
    nodes = order([o.node for o in outs])
    head_grad = next(i for i, n in enumerate(nodes) if n.op is Op.MATMUL and n.shape[-2:] == head.weight.shape
                     and any(_base(s) is h.node for s in n.srcs))
    hidden_grads = [i for i, n in enumerate(nodes) if n.op is Op.MATMUL and n.shape[-2:] == hidden[0].weight.shape]
    assert head_grad < min(hidden_grads), (head_grad, hidden_grads, len(nodes))


@pytest.mark.parametrize("act", ["gelu", "relu", "silu"])
def test_an_activation_is_recomputed_for_the_weight_gradient(monkeypatch, act):
    """The next layer's weight gradient reads the activation's result computed again from its input (which the
    activation's own gradient keeps), so the forward's result is freed once the next layer has read it; the gradients
    are the CPU oracle's."""
    import vkml.frontend.autograd as AG
    from vkml.core.ops import Op
    from oracle import assert_close
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((64, 16)).astype(np.float32)
    def run(device, recompute=True):
        monkeypatch.setattr(AG, "RECOMPUTED", AG.RECOMPUTED if recompute else frozenset())
        vkml.manual_seed(0)
        m = nn.Sequential(nn.Linear(16, 64), getattr(nn, {"gelu": "GELU", "relu": "ReLU", "silu": "SiLU"}[act])(),
                          nn.Linear(64, 16)).to(device)
        y = m(tensor(x0, device=device))
        grads = vkml.frontend.autograd.grad(y.square().sum(), list(m.parameters()))
        return y, grads
    def readers(y, grads):
        "The kernels (views looked through) that read the activation's forward result."
        from vkml.engine.schedule import _base
        a, = [n for n in vkml.core.graph.toposort([y.node]) if n.op.name == act.upper()]
        nodes = vkml.core.graph.toposort([g.node for g in grads])
        return [n for n in nodes if n.op not in (Op.RESHAPE, Op.PERMUTE) and any(_base(s) is a for s in n.srcs)]
    y, grads = run("vulkan")
    assert len(readers(y, grads)) == 1                   # the forward's product only: the weight gradient recomputes
    _, ref = run("cpu")
    for g, r in zip(grads, ref): assert_close(g.numpy(), r.numpy(), k=64, what=act)
    assert len(readers(*run("vulkan", recompute=False))) == 2


def test_an_activation_is_recomputed_under_autocast_too():
    "Under autocast the activation runs in float16, and the weight gradient recomputes it all the same."
    from vkml.core.ops import Op
    m = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16)).to("vulkan")
    with vkml.amp.autocast("vulkan", dtype=vkml.float16):
        y = m(tensor(np.ones((8, 16), np.float32), device="vulkan"))
    grads = vkml.frontend.autograd.grad(y.float().sum(), list(m.parameters()))
    fwd, = [n for n in vkml.core.graph.toposort([y.node]) if n.op is Op.GELU]
    bwd = [n for n in vkml.core.graph.toposort([g.node for g in grads]) if n.op is Op.GELU]
    assert len(bwd) == 1 and bwd[0] is not fwd             # the weight gradient's own, not the forward's


def test_a_deleted_step_gives_its_memory_back():
    """Regression: the backend kept the last schedule's placement (each gradient -> the flat concatenation it is
    written into), and with it that schedule's nodes and their memory, until the next run. A captured step's private
    pool then outlived its step, model and optimiser."""
    gc.collect()
    base = vkml.memory_stats()["bytes_in_use"]
    rng = np.random.default_rng(0)
    m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to("vulkan")
    opt = optim.Adam(m.parameters(), lr=1e-3)
    def f(x, y):
        opt.zero_grad(); loss = nn.functional.cross_entropy(m(x), y); loss.backward(); opt.step(); return loss
    step = vkml.jit(f)
    x, y = tensor(rng.standard_normal((16, 32)).astype(np.float32), device="vulkan"), tensor(rng.integers(0, 10, 16), device="vulkan")
    for _ in range(3): step(x, y).item()
    assert vkml.memory_stats()["bytes_in_use"] > base
    del m, opt, f, step, x, y
    gc.collect()
    assert vkml.memory_stats()["bytes_in_use"] == base
