"""A data-parallel step under `vkml.jit` (nbs/37_distributed.ipynb, ADR 0030), two ranks started by `mpiexec` from
MPICH's wheel on two logical Vulkan devices: the capture cuts the step at the gradient exchange and every replay
exchanges again, giving the eager data-parallel step's parameters and losses bit for bit (SGD, and Adam with
BatchNorm, whose buffers' broadcast is a second host point), on both readback paths; ranks whose replayed exchanges
disagree (one skips a bucket) both raise CollectiveMismatchError and the group goes on; an exchange planted wrong on
every rank (a bucket never summed) is caught by the comparison with the eager run and by the ranks' disagreement.
These runs force the host-staged exchange (VKML_DDP_EXCHANGE=mpi); the shared-memory one: tests/test_ddp_shared.py.
Each runs with the buckets exchanged one at a time while backward computes the next (overlap, the default: a host
point per bucket and one for the averages) and all at once after backward (VKML_DDP_OVERLAP=0: one host point)."""
import pytest

import vkml.distributed as dist

pytestmark = [pytest.mark.skipif(not dist.is_available(), reason="mpi4py is not installed (the `distributed` extra)"),
              pytest.mark.vulkan]

RANK_SCRIPT = r"""
import os, sys, numpy as np, vkml, vkml.nn as nn, vkml.optim as optim, vkml.distributed as dist
import vkml.backends.vulkan as V
mode, model = sys.argv[1], sys.argv[2]
OVERLAP = os.environ.get("VKML_DDP_OVERLAP", "1") != "0"   # a host point per bucket, then one for the averages
dist.init_process_group(timeout=60)
r = dist.get_rank()
dev = f"vulkan:{dist.get_node_local_rank() % len(vkml.devices())}"
STEPS = 5

def points(f):
    "The host points of `f`'s captures."
    return [p for steps in f.captures.values() for st in steps for p in st.captured.points]

def run(jit, plant=None):
    vkml.manual_seed(r)                               # different seeds: the broadcast makes the copies equal
    mid = [nn.BatchNorm1d(16)] if model == "bn" else []
    net = nn.Sequential(nn.Linear(6, 16), *mid, nn.ReLU(), nn.Linear(16, 3)).to(dev)
    ddp = dist.DistributedDataParallel(net, bucket_cap_mb=200 / 2**20)    # several buckets
    opt = optim.SGD(ddp.parameters(), lr=0.1) if model == "sgd" else optim.Adam(ddp.parameters(), lr=1e-2)
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        return loss
    f = vkml.jit(step, enabled=jit)
    rng = np.random.default_rng(10 + r)               # each rank its own data
    losses, subs, caught = [], [], []
    for s in range(STEPS):
        x = vkml.tensor(rng.standard_normal((4, 6)).astype(np.float32), device=dev)
        y = vkml.tensor(rng.integers(0, 3, 4), device=dev)
        if plant is not None and s == 3: plant(points(f))
        s0 = V.stats()["submissions"]
        try: losses.append(f(x, y).numpy())
        except dist.CollectiveMismatchError as e: caught.append(str(e))
        subs.append(V.stats()["submissions"] - s0)
    return dict(params=[p.numpy() for p in net.parameters()], losses=losses, f=f, ddp=ddp, subs=subs, caught=caught)

def agree(arrays) -> bool:
    "Do the ranks hold the same arrays, bit for bit?"
    flat = np.concatenate([a.reshape(-1) for a in arrays]).view(np.uint32).astype(np.int64)
    lo, hi = flat.copy(), flat.copy()
    dist.all_reduce(lo, dist.ReduceOp.MIN); dist.all_reduce(hi, dist.ReduceOp.MAX)
    return bool((lo == hi).all())

def same(a, b) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(a["params"] + a["losses"], b["params"] + b["losses"]))

eager = run(False)
if mode == "equal":
    jitted = run(True)
    f, ddp = jitted["f"], jitted["ddp"]
    out = [same(eager, jitted), agree(jitted["params"]), f.captured, ddp.timings["reductions"], len(ddp.buckets),
           len(points(f)), jitted["subs"][-1], points(f)[-1].runs]
elif mode == "mismatch":                              # rank 1's replay sums every bucket but the last
    def plant(ps):                                    # (overlapped: its last bucket one element short)
        if r == 1:
            p = [q for q in ps if q.gets][-1] if OVERLAP else ps[-1]; exchange = p.fn
            p.fn = (lambda arrays: exchange([arrays[0][:-1]])) if OVERLAP else (lambda host: exchange(host[:-1]) + host[-1:])
            planted.append((p, exchange))
    planted = []
    jitted = run(True, plant)
    ok = vkml.ones((2,)); dist.all_reduce(ok)        # the group is still usable, in step
    words = "disagree on the element count" in jitted["caught"][0] and "DistributedDataParallel's gradient average" in jitted["caught"][0]
    for p, exchange in planted: p.fn = exchange       # and the capture too: the next replay exchanges every bucket
    f = jitted["f"]
    f(vkml.ones((4, 6), device=dev), vkml.tensor(np.arange(4) % 3, device=dev))
    params = [p.numpy() for p in jitted["ddp"].module.parameters()]
    out = [len(jitted["caught"]), words, ok.numpy().tolist(), f.captured, agree(params)]
else:                                                 # "skip": every rank's replay leaves the last bucket unsummed
    def plant(ps):
        p = ps[-1]; exchange = p.fn
        p.fn = lambda host: exchange(host[:-1]) + host[-1:]
    jitted = run(True, plant)
    out = [same(eager, jitted), agree(jitted["params"]), len(jitted["caught"])]
sys.stdout.write(f"{r} {out}\n")                      # one write: the ranks' lines meet in mpiexec
"""


def two_ranks(tmp_path, *args, env=None) -> list:
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    # the host-staged exchange, forced: on one host "auto" takes shared memory (tests/test_ddp_shared.py)
    r = dist.launch(2, script, *args, timeout=300, check=False,
                    env={"VKML_VIRTUAL_DEVICES": "2", "VKML_DDP_EXCHANGE": "mpi", **(env or {})})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return sorted(r.stdout.splitlines())


OVERLAP = pytest.mark.parametrize("overlap", ["1", "0"], ids=["overlap", "at_once"])


@OVERLAP
@pytest.mark.parametrize("model, paths", [("sgd", "direct"), ("sgd", "discrete"), ("bn", "direct"), ("bn", "discrete")])
def test_a_jitted_data_parallel_step_equals_the_eager_one_bit_for_bit(tmp_path, model, paths, overlap):
    "Captured once, replayed with an exchange each call: the eager step's parameters and losses exactly, on every rank."
    env = {"VKML_DDP_OVERLAP": overlap, **({"VKML_DISCRETE_PATHS": "1"} if paths == "discrete" else {})}
    lines = two_ranks(tmp_path, "equal", model, env=env)
    # the buffers' broadcast before the forward; the gradients' average: one point, or one per bucket (4) and the averages
    n_points = (model == "bn") + (1 if overlap == "0" else 4 + 1)
    for r, line in enumerate(lines):
        # bitwise equal to eager; the ranks agree; one capture; an exchange per call; 4 buckets;
        # a replay is one submission per segment; the last replay went through the exchange (calls 3, 4, 5 replay)
        assert line == f"{r} [True, True, 1, 5, 4, {n_points}, {n_points + 1}, 3]", line


@OVERLAP
def test_ranks_whose_replayed_exchanges_disagree_all_raise_and_the_group_goes_on(tmp_path, overlap):
    "Rank 1's replays skip a bucket: both ranks raise CollectiveMismatchError from each; the group and the capture go on."
    lines = two_ranks(tmp_path, "mismatch", "sgd", env={"VKML_DDP_OVERLAP": overlap})
    assert lines == ["0 [2, True, [2.0, 2.0], 1, True]", "1 [2, True, [2.0, 2.0], 1, True]"], lines


def test_an_exchange_planted_wrong_on_every_rank_is_caught(tmp_path):
    "Every rank's replay leaves a bucket unsummed (the headers agree): the run differs from eager, the ranks diverge."
    lines = two_ranks(tmp_path, "skip", "sgd", env={"VKML_DDP_OVERLAP": "0"})   # (the exchange of all buckets at once)
    assert lines == ["0 [False, False, 0]", "1 [False, False, 0]"], lines
