"""Row kernels (nbs/05_schedule, nbs/24_codegen): the norms, softmax and cross-entropy each run as one dispatch with a
workgroup per row, and agree with the CPU oracle within the parity bound (a reduction over K terms: sqrt(K)-scaled)
over row lengths that take each form (a few threads, registers, re-reading a long row), dtypes, views and ranks."""
import numpy as np
import pytest
import vkml
import vkml.nn.functional as F
from vkml.frontend.tensor import schedule
from vkml.backends.vulkan import codegen
import vkml.backends.vulkan.backend as vb
from oracle import assert_parity

pytestmark = pytest.mark.vulkan
rng = np.random.default_rng(11)

NORMS = {
    "softmax": lambda x: F.softmax(x, -1),
    "log_softmax": lambda x: F.log_softmax(x, -1),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "rms_norm": lambda x: F.rms_norm(x, x.shape[-1:]),
}


def kinds(*ts) -> list:
    return [k.kind for k in schedule(*ts).dispatching]


@pytest.mark.parametrize("name", NORMS)
def test_each_norm_is_one_row_kernel(name):
    x = vkml.tensor(rng.standard_normal((6, 50)).astype(np.float32), device="vulkan")
    assert kinds(NORMS[name](x)) == ["row"]


def test_group_norm_and_the_affine_layer_norm_are_one_row_kernel():
    x = vkml.tensor(rng.standard_normal((2, 8, 5, 5)).astype(np.float32), device="vulkan")
    assert kinds(F.group_norm(x, 4)) == ["row"]
    w, b = (vkml.tensor(rng.standard_normal(25).astype(np.float32), device="vulkan") for _ in range(2))
    assert kinds(F.layer_norm(x.reshape(16, 25), (25,), w, b)) == ["row"]


@pytest.mark.parametrize("k", [2, 3, 31, 1000, 5000, 20000])
@pytest.mark.parametrize("name", NORMS)
def test_row_lengths_of_every_form(name, k):
    "Row lengths that take 32 threads, registers (1 to 16 values a thread), and re-reading (no registers)."
    x = rng.standard_normal((128 if k > 16384 else 3, k)).astype(np.float32) * 3   # (a few long rows take no row kernel)
    assert kinds(NORMS[name](vkml.tensor(x, device="vulkan"))) == ["row"]
    assert_parity(NORMS[name], x, k=k, what=f"{name} rows of {k}")


def test_the_forms():
    "As few threads as keep the row in registers, 32 values each (fewer when a thread keeps many arrays)."
    assert codegen.row_form(2) == "row32x1" and codegen.row_form(1000) == "row32x32"
    assert codegen.row_form(4096, None, 2) == "row128x32" and codegen.row_form(16384, None, 2) == "row512x32"
    assert codegen.row_form(16385) == "row512x0" and codegen.row_form(16384, None, 4) == "row512x0"
    assert codegen.row_form(4096, None, 4) == "row256x16"
    assert codegen.row_form(1000, "cpu") == "row32x32" and codegen.row_form(16384, "cpu") == "row64x0"   # lavapipe


@pytest.mark.parametrize("shape", [(7,), (2, 3, 40), (2, 2, 3, 17), (0, 9), (4, 0, 6)])
def test_ranks_and_empty_batches(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    for name, f in NORMS.items(): assert_parity(f, x, k=shape[-1], what=f"{name} {shape}")


def test_float16_and_views():
    x = rng.standard_normal((64, 40)).astype(np.float32)
    assert_parity(lambda t: F.softmax(t.to(vkml.float16), -1), x, k=40, what="f16")
    assert_parity(lambda t: F.layer_norm(t.T, (64,)), x, k=64, what="a transposed input (strided rows)")
    assert_parity(lambda t: F.softmax(t[1:, ::2], -1), x, k=20, what="a sliced input")
    assert_parity(lambda t: F.rms_norm(t[:, None, :].expand(64, 3, 40), (40,)), x, k=40, what="a broadcast input")


def test_a_reduction_read_outside_the_kernel_is_stored():
    "The row kernel also writes the per-row values that something after it reads (here the max, and a view of it)."
    x = rng.standard_normal((5, 33)).astype(np.float32)
    def f(t):
        m = t.amax(-1, keepdim=True)
        y = (t - m).exp() / (t - m).exp().sum(-1, keepdim=True)
        return y + m.detach().expand(5, 33) * 0.5 + m.permute(1, 0).sum()
    assert_parity(f, x, k=33)
    t = vkml.tensor(x, device="vulkan")
    m = t.amax(-1, keepdim=True)
    y = (t - m).exp() / (t - m).exp().sum(-1, keepdim=True)
    s = schedule(y, m)
    assert s.dispatching[0].kind == "row" and {id(n) for n in s.dispatching[0].stores} == {id(y.node), id(m.node)}


def test_a_training_step_with_cross_entropy_reads_the_max_through_a_view_later():
    """Regression: the forward max of cross_entropy was folded into a row kernel that did not store it, while a view
    of it (read again by the backward) was made after the kernel: 'MAX was not computed before it was read'."""
    from vkml import nn, optim
    xs, ys = rng.standard_normal((16, 10)).astype(np.float32), rng.integers(0, 4, 16)
    def step(device, state=None):
        model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
        if state is not None: model.load_state_dict(state)
        model = model.to(device)
        opt = optim.SGD(model.parameters(), lr=0.1)    # (Adam's update of a gradient near its eps is too sensitive to compare)
        loss = F.cross_entropy(model(vkml.tensor(xs, device=device)), vkml.tensor(ys, device=device))
        loss.backward()
        opt.step()                  # on Vulkan one realize: the forward, the backward and the update
        return loss.item(), [p.numpy() for p in model.parameters()]
    init = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4)).state_dict()
    l_a, p_a = step("cpu", init)
    l_b, p_b = step("vulkan", init)
    assert l_b == pytest.approx(l_a, rel=1e-5)
    for a, b in zip(p_a, p_b): np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_cross_entropy_forward_and_backward_agree():
    x = rng.standard_normal((8, 300)).astype(np.float32)
    t = rng.integers(0, 300, 8)
    def f(xt):
        xt = xt.detach().requires_grad_(True)
        loss = F.cross_entropy(xt, vkml.tensor(t, device=xt.device))
        return vkml.frontend.autograd.grad(loss, xt)[0] + loss
    assert_parity(f, x, k=300 * 8)


def test_a_row_past_the_loop_budget_runs_node_by_node(monkeypatch):
    "Rows too long for one invocation's loop (lavapipe's budget) fall back to one kernel per node, views included."
    monkeypatch.setattr(vb, "LOOP_BUDGET", 1)
    x = rng.standard_normal((128, 20000)).astype(np.float32)
    for name, f in NORMS.items(): assert_parity(f, x, k=20000, what=name)


def test_a_few_long_rows_keep_the_split_reductions():
    "One workgroup per row would leave the GPU idle for a mean over a million values: that stays a split reduction."
    a = vkml.tensor(rng.standard_normal(1 << 20).astype(np.float32), device="vulkan")
    assert "row" not in kinds(((a - 1.0) ** 2).mean() / 2.0)
    x = vkml.tensor(rng.standard_normal((4, 1 << 15)).astype(np.float32), device="vulkan")
    assert "row" not in kinds(F.softmax(x, -1))


def test_cross_entropy_forward_is_one_row_kernel_and_a_mean():
    x = vkml.tensor(rng.standard_normal((256, 100)).astype(np.float32), device="vulkan")
    t = vkml.tensor(rng.integers(0, 100, 256), device="vulkan")
    ks = kinds(F.cross_entropy(x, t))
    assert ks.count("row") == 2 and len(ks) <= 3, ks      # the rows; the mean over them; (the class indices)


@pytest.mark.parametrize("name", NORMS)
def test_a_norm_alone_stores_only_its_result(name):
    """Regression: a view of a view of a row's value (softmax's max, detached, then expanded) was taken for one read
    outside the kernel, so the kernel stored the max and remade the views after it."""
    x = vkml.tensor(rng.standard_normal((6, 50)).astype(np.float32), device="vulkan")
    y = NORMS[name](x)
    (k,) = schedule(y).dispatching
    assert [id(n) for n in k.stores] == [id(y.node)]
