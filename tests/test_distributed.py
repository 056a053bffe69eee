"""Data-parallel training over MPI (nbs/37_distributed.ipynb), with ranks started by `mpiexec` from MPICH's wheel:
two ranks of the demo give, step by step, one process's parameters on the full batch; its checkpoint loads into
one process; a killed rank and a hung rank end the run with a clear error within a time limit, never a hang;
two Vulkan devices in one process (a data-parallel step under `vkml.jit`: tests/test_ddp_jit.py);
`import vkml` does not load MPI; collectives write through views and non-contiguous tensors; ranks that disagree on
a collective (its kind, op, src, dtype or element count) all raise CollectiveMismatchError, never garbage or a hang."""
import math, os, signal, subprocess, sys, time
from pathlib import Path
import numpy as np
import pytest

from conftest import ROOT
import vkml.distributed as dist

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="mpi4py is not installed (the `distributed` extra)")

STEPS = 12
LR, K = 1e-2, 32 * 64            # the demo's learning rate; the longest sum behind a gradient (batch 32 x 8 x 8)
# The runs train with SGD: a parameter moves by LR x its gradient. Under Adam an element whose gradient is near
# Adam's eps turns one rounding of the gradient's sum into a different step (up to LR): no bound holds.
RTOL = 1e-5 * math.sqrt(K)       # the parity bound of a reduction over K terms, as tests/oracle.py's: 1e-5 scaled by sqrt(K)
ATOL = RTOL * LR                 # for parameters near zero: the same fraction of one step's size


def demo(*args, ranks=0, env=None, timeout=240):
    "`python -m vkml.demo args`, alone (ranks=0) or under `mpiexec -n ranks`; the finished process."
    if ranks:
        return dist.launch(ranks, "-m", "vkml.demo", *args, timeout=timeout, env=env)
    r = subprocess.run([sys.executable, "-m", "vkml.demo", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def trace_steps(path) -> dict:
    z, out = np.load(path), {}
    for k in z.files:
        s, name = k.split("/", 1)
        out.setdefault(int(s), {})[name] = z[k]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    "The demo's CNN for STEPS steps: one process with batches of 32, and two ranks with 16 each (rank 1 on vulkan:1)."
    tmp = tmp_path_factory.mktemp("dist")
    common = ["--steps", STEPS, "--no-progress", "--epochs", 1, "--optimizer", "sgd"]   # (Adam: see nbs/37_distributed)
    one = demo(*common, "--trace", tmp / "one.npz", "--out", tmp / "one")
    two = demo(*common, "--distributed", "--trace", tmp / "two.npz", "--out", tmp / "two", ranks=2,
               env={"VKML_VIRTUAL_DEVICES": "2"})
    return tmp, one, two


@pytest.mark.vulkan
def test_two_ranks_give_one_process_parameters_step_by_step(runs):
    tmp, one, two = runs
    assert "data-parallel: 2 rank(s) x batch 16 = 32 per step" in two.stdout
    assert "the step runs eagerly (no vkml.jit" in two.stdout          # host work mid-step: no replay
    assert "submissions per training step: 2.00" in two.stdout          # compute + readback, then the update
    a, b = trace_steps(tmp / "one.npz"), trace_steps(tmp / "two.npz")
    assert sorted(a) == sorted(b) == list(range(STEPS + 1))
    for s in sorted(a):
        assert a[s].keys() == b[s].keys()
        for k in a[s]:
            bound = ATOL + RTOL * np.abs(a[s][k])
            excess = np.abs(b[s][k] - a[s][k]) / bound
            assert excess.max() <= 1, (f"step {s}, {k}: two ranks differ from one process by "
                                       f"{np.abs(b[s][k] - a[s][k]).max():.2e}, {excess.max():.2f} x the bound")
    assert all(np.array_equal(a[0][k], b[0][k]) for k in a[0])         # the same start


@pytest.mark.vulkan
def test_the_distributed_checkpoint_loads_into_one_process(runs):
    from vkml import demo as D
    tmp, _, two = runs
    files = list((tmp / "two").glob("*.safetensors"))
    assert [f.name for f in files] == ["digits_cnn.safetensors"]
    model = D.build_model("cnn", seed=3)
    info = D.load_checkpoint(files[0], model)
    last = trace_steps(tmp / "two.npz")[STEPS]
    for k, p in model.named_parameters(): np.testing.assert_array_equal(p.numpy(), last[k], err_msg=k)
    assert info["ranks"] == 2 and f"final test accuracy: {info['test_acc']:.3f}" in two.stdout


def rank_pids(mpiexec_pid: int, timeout=60) -> dict:
    "{rank: pid} of the Python ranks below `mpiexec_pid`, read from /proc (PMI_RANK in their environment)."
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        found = {}
        for d in Path("/proc").iterdir():
            if not d.name.isdigit(): continue
            try:
                env = (d / "environ").read_bytes().split(b"\0")
                cmd = (d / "cmdline").read_bytes()
            except OSError: continue
            if b"vkml.demo" not in cmd or not any(e.startswith(b"PMI_RANK=") for e in env): continue
            if not _descends(int(d.name), mpiexec_pid): continue
            rank = next(int(e.split(b"=")[1]) for e in env if e.startswith(b"PMI_RANK="))
            found[rank] = int(d.name)
        if len(found) == 2: return found
        time.sleep(0.2)
    raise AssertionError(f"the ranks of mpiexec {mpiexec_pid} did not appear in {timeout} s")


def _descends(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor: return True
        try: pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError): return False
    return False


def start_long_demo(tmp, env):
    "Two ranks of the demo for many epochs, started in a process group of their own; (process, pids by rank)."
    cmd = [dist.mpiexec_path(), "-n", "2", sys.executable, "-m", "vkml.demo", "--distributed", "--epochs", "100",
           "--no-progress", "--model", "mlp", "--out", str(tmp)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env={**os.environ, **env}, start_new_session=True)
    pids = rank_pids(p.pid)
    return p, pids


def wait_for_epoch(p, timeout=120):
    "Read rank 0's output until it reports the first epoch (training is under way); what it printed."
    lines, t_end = [], time.monotonic() + timeout
    while time.monotonic() < t_end:
        line = p.stdout.readline()
        if not line: break
        lines.append(line)
        if line.startswith("epoch 1/"): return "".join(lines)
    raise AssertionError("the demo did not finish its first epoch:\n" + "".join(lines))


def finish(p, timeout):
    "Wait for mpiexec at most `timeout` s (then kill its group and fail); (exit code, stdout, stderr, seconds)."
    t0 = time.monotonic()
    try: out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL); p.communicate()
        raise AssertionError(f"the run did not end within {timeout} s of losing a rank: it hangs")
    return p.returncode, out, err, time.monotonic() - t0


@pytest.mark.vulkan
@pytest.mark.timeout(240)
def test_a_killed_rank_ends_the_run_with_an_error(tmp_path):
    p, pids = start_long_demo(tmp_path, {"VKML_DIST_TIMEOUT": "30"})
    try:
        wait_for_epoch(p)
        os.kill(pids[1], signal.SIGKILL)
        rc, out, err, took = finish(p, 60)
    finally:
        if p.poll() is None: os.killpg(p.pid, signal.SIGKILL)
    assert rc != 0 and took < 60
    assert "BAD TERMINATION" in out + err and "signal 9" in (out + err).lower(), (out[-2000:], err[-2000:])


@pytest.mark.vulkan
@pytest.mark.timeout(240)
def test_a_hung_rank_times_out_with_a_clear_error(tmp_path):
    p, pids = start_long_demo(tmp_path, {"VKML_DIST_TIMEOUT": "5"})
    try:
        wait_for_epoch(p)
        os.kill(pids[1], signal.SIGSTOP)           # rank 1 stops answering; rank 0's next all-reduce waits for it
        rc, out, err, took = finish(p, 60)
    finally:
        if p.poll() is None: os.killpg(p.pid, signal.SIGKILL)
        try: os.kill(pids[1], signal.SIGKILL)
        except ProcessLookupError: pass
    assert rc != 0 and took < 60
    assert "DistributedTimeoutError" in err and "on rank 0 of 2 waited 5 s for the other ranks" in err, err[-3000:]
    assert "ending every rank (MPI_Abort)" in err, err[-3000:]


@pytest.mark.vulkan
def test_two_vulkan_devices_in_one_process():
    code = r"""
import numpy as np, vkml
import vkml.nn as nn
assert [d.index for d in vkml.devices()][:2] == [0, 1], vkml.devices()
x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
outs, grads = [], []
for dev in ("vulkan:0", "vulkan:1"):
    vkml.manual_seed(0)
    m = nn.Linear(8, 3).to(dev)
    y = m(vkml.tensor(x, device=dev))
    y.sum().backward()
    outs.append(y.numpy()); grads.append(m.weight.grad.numpy())
    assert m.weight.device == dev
np.testing.assert_array_equal(outs[0], outs[1]); np.testing.assert_array_equal(grads[0], grads[1])
a, b = vkml.ones((2,), device="vulkan:0"), vkml.ones((2,), device="vulkan:1")
try: a + b
except vkml.DeviceError as e: assert ".to(" in str(e), e
else: raise AssertionError("mixing devices did not raise")
assert (a.to("vulkan:1") + b).numpy().tolist() == [2.0, 2.0]
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "VKML_VIRTUAL_DEVICES": "2"})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_import_vkml_loads_no_mpi():
    r = subprocess.run([sys.executable, "-c", "import sys, vkml, vkml.distributed; print('mpi4py' in sys.modules)"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.stdout.strip() == "False", r.stdout + r.stderr


def test_ddp_refuses_unused_parameters_and_no_sync_accumulates():
    "Two ranks on the CPU: a parameter without a gradient is named at the next forward; no_sync() defers the average."
    code = r"""
import sys, numpy as np, vkml, vkml.nn as nn, vkml.distributed as dist
dist.init_process_group(timeout=60)
r = dist.get_rank()
class Two(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(2, 1); self.b = nn.Linear(2, 1)
    def forward(self, x): return self.a(x)
net = Two()
ddp = dist.DistributedDataParallel(net)
ddp(vkml.ones((1, 2))).sum().backward()
try: ddp(vkml.ones((1, 2)))
except dist.DistributedError as e: assert "b.weight" in str(e) and "requires_grad_(False)" in str(e), e
else: raise AssertionError("no error")
lin = nn.Linear(2, 1)
ddp = dist.DistributedDataParallel(lin)
x = vkml.tensor([[1.0 + r, 2.0]])
with ddp.no_sync():
    ddp(x).sum().backward()
    assert ddp.timings["reductions"] == 0
ddp(x).sum().backward()                        # the accumulated 2 x local gradient, averaged over the ranks
assert ddp.timings["reductions"] == 1
np.testing.assert_allclose(lin.weight.grad.numpy(), [[2 * 1.5, 2 * 2.0]])
sys.stdout.write(f"ok {r}\n")     # one write: the ranks' lines meet in mpiexec
"""
    r = dist.launch(2, "-c", code, timeout=120)
    assert sorted(r.stdout.splitlines()) == ["ok 0", "ok 1"], r.stdout + r.stderr


def two_ranks(body: str, timeout=60) -> list:
    "Run `body` on two CPU ranks (after init_process_group; `r` is the rank, each rank writes one line); the sorted lines."
    code = ("import sys, numpy as np, vkml, vkml.distributed as dist\n"
            "dist.init_process_group(timeout=10)\nr = dist.get_rank()\n" + body)
    p = dist.launch(2, "-c", code, timeout=timeout, check=False)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return sorted(p.stdout.splitlines())


def test_all_reduce_of_a_non_contiguous_tensor_or_array():
    "A transposed tensor is reduced (and the tensor it views sees it); so is a numpy array that is not C-contiguous."
    lines = two_ranks(r"""
x = vkml.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) * (r + 1))
t = x.T                                    # non-contiguous
dist.all_reduce(t)
assert t.numpy().tolist() == [[0, 9], [3, 12], [6, 15]], t.numpy()
assert x.numpy().tolist() == [[0, 3, 6], [9, 12, 15]], x.numpy()
h = vkml.tensor(np.ones((4, 2), np.float16)).T
dist.all_reduce(h, dist.ReduceOp.AVG)      # float16, reduced in float32
assert h.numpy().tolist() == [[1.0] * 4] * 2 and h.dtype is vkml.float16
a = np.arange(6, dtype=np.int64).reshape(2, 3).T   # a numpy view, not C-contiguous
dist.all_reduce(a)
assert a.tolist() == [[0, 6], [2, 8], [4, 10]], a
sys.stdout.write(f"ok {r}\n")
""")
    assert lines == ["ok 0", "ok 1"]


def test_collectives_into_a_view_update_its_base():
    "all_reduce, broadcast and recv into a slice (or a slice of a transpose): the base tensor sees the result."
    lines = two_ranks(r"""
y = vkml.tensor(np.arange(4, dtype=np.float32))
s = y[1:3]                                 # a view: the reduction must reach y
dist.all_reduce(s, dist.ReduceOp.MAX)
s2 = y[1:3]
dist.all_reduce(s2)
assert y.numpy().tolist() == [0, 2, 4, 3], y.numpy()
z = vkml.tensor(np.full((2, 3), float(r), np.float32))
dist.broadcast(z.T[1:], src=1)              # rank 0's z gets rank 1's value in columns 1 and 2
assert z.numpy().tolist() == [[r, 1, 1], [r, 1, 1]], z.numpy()
w = vkml.tensor(np.zeros((3, 2), np.float32))
if r == 0: dist.send(vkml.tensor([[5.0, 6.0]]), dst=1)
else: dist.recv(w[1:2], src=0)
assert w.numpy().tolist() == ([[0, 0], [5, 6], [0, 0]] if r else [[0, 0]] * 3), w.numpy()
sys.stdout.write(f"ok {r}\n")
""")
    assert lines == ["ok 0", "ok 1"]


MISMATCHES = {   # rank 0's call, rank 1's call, what the error must name
    "count": ("dist.all_reduce(vkml.ones((3,)))", "dist.all_reduce(vkml.ones((4,)))",
              "disagree on the element count: rank 0 called all_reduce(op=ReduceOp.SUM) of 3 float32 values; "
              "rank 1 called all_reduce(op=ReduceOp.SUM) of 4 float32 values"),
    "dtype": ("dist.all_reduce(vkml.ones((3,)))", "dist.all_reduce(vkml.ones((3,)).int())",
              "disagree on the dtype: rank 0 called all_reduce(op=ReduceOp.SUM) of 3 float32 values; "
              "rank 1 called all_reduce(op=ReduceOp.SUM) of 3 int32 values"),
    "op": ("dist.all_reduce(vkml.ones((3,)), dist.ReduceOp.SUM)", "dist.all_reduce(vkml.ones((3,)), dist.ReduceOp.MAX)",
           "disagree on the op: rank 0 called all_reduce(op=ReduceOp.SUM) of 3 float32 values; "
           "rank 1 called all_reduce(op=ReduceOp.MAX) of 3 float32 values"),
    "barrier": ("dist.all_reduce(vkml.ones((3,)))", "dist.barrier()",
                "disagree on the collective: rank 0 called all_reduce(op=ReduceOp.SUM) of 3 float32 values; "
                "rank 1 called barrier()"),
    "broadcast": ("dist.broadcast(vkml.ones((3,)), src=0)", "dist.all_reduce(vkml.ones((3,)))",
                  "disagree on the collective: rank 0 called broadcast(src=0) of 3 float32 values; "
                  "rank 1 called all_reduce(op=ReduceOp.SUM) of 3 float32 values"),
    "src": ("dist.broadcast(vkml.ones((3,)), src=0)", "dist.broadcast(vkml.ones((3,)), src=1)",
            "disagree on src: rank 0 called broadcast(src=0) of 3 float32 values; rank 1 called broadcast(src=1)"),
    "ddp": ("ddp(vkml.ones((1, 2))).sum().backward()", "dist.all_reduce(vkml.ones((3,)))",
            "disagree on the collective: rank 0 called DistributedDataParallel's gradient average of 3 float32 values; "
            "rank 1 called all_reduce(op=ReduceOp.SUM) of 3 float32 values"),
}


@pytest.mark.parametrize("case", list(MISMATCHES))
def test_ranks_that_disagree_on_a_collective_all_raise_and_the_group_goes_on(case):
    "Different counts, dtypes, ops, srcs or collectives: every rank raises CollectiveMismatchError naming both calls; nothing hangs."
    call0, call1, words = MISMATCHES[case]
    lines = two_ranks(f"""
import vkml.nn as nn
ddp = dist.DistributedDataParallel(nn.Linear(2, 1))   # (3 values)
try: {call0} if r == 0 else {call1}
except dist.CollectiveMismatchError as e: got = str(e)
else: got = "no error"
ok = vkml.ones((2,)); dist.all_reduce(ok)           # the group is still usable, in step
sys.stdout.write(f"{{r}} {{ok.numpy().tolist()}} {{got}}\\n")
""")
    for r, line in enumerate(lines):
        assert line.startswith(f"{r} [2.0, 2.0] ") and words in line and f"on rank {r} of 2" in line, line
