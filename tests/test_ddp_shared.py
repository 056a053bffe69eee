"""The shared-memory gradient exchange of `DistributedDataParallel` (nbs/37_distributed.ipynb, nbs/37a_shared_exchange.ipynb):
two ranks on one host, each on its own logical Vulkan device, write their buckets into a /dev/shm region imported into
both devices and sum it on the device in rank order. Eager and jitted steps through it give the host-staged MPI path's
parameters and losses bit for bit (SGD; and Adam with BatchNorm, whose buffers still go through MPI), the backward moves
no byte between host and device (the backend's upload/readback counters), a replay's two barriers read and write
nothing, "auto" picks it here; forcing it where it cannot work is a typed error saying why. Exchanged a bucket at a time
while backward computes the next (the default) or all at once after it (`overlap=False`): the same bits."""
import json, os, subprocess, sys
from types import SimpleNamespace
import pytest

from conftest import ROOT
import vkml.distributed as dist

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="mpi4py is not installed (the `distributed` extra)")

RANK_SCRIPT = r"""
import sys, json, numpy as np, vkml, vkml.nn as nn, vkml.optim as optim, vkml.distributed as dist
import vkml.backends.vulkan as V
model = sys.argv[1]
dist.init_process_group(timeout=60)
r = dist.get_rank()
dev = f"vulkan:{dist.get_node_local_rank() % len(vkml.devices())}"

def run(exchange, jit, steps=5, overlap=True):
    vkml.manual_seed(r)                               # different seeds: the broadcast makes the copies equal
    mid = [nn.BatchNorm1d(16)] if model == "bn" else []
    net = nn.Sequential(nn.Linear(6, 16), *mid, nn.ReLU(), nn.Linear(16, 3)).to(dev)
    ddp = dist.DistributedDataParallel(net, bucket_cap_mb=200 / 2**20, exchange=exchange)   # several buckets
    ddp.overlap = overlap
    opt = optim.SGD(ddp.parameters(), lr=0.1) if model == "sgd" else optim.Adam(ddp.parameters(), lr=1e-2)
    moved = []
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x), y)
        s = V.stats(); b0 = s["bytes_uploaded"] + s["bytes_downloaded"]
        loss.backward()                               # the exchange runs in here (eagerly, and at the capture)
        s = V.stats(); moved.append(s["bytes_uploaded"] + s["bytes_downloaded"] - b0)
        opt.step()
        return loss
    f = vkml.jit(step, enabled=jit)
    rng = np.random.default_rng(10 + r)               # each rank its own data
    losses, subs = [], []
    for _ in range(steps):
        x = vkml.tensor(rng.standard_normal((4, 6)).astype(np.float32), device=dev)
        y = vkml.tensor(rng.integers(0, 3, 4), device=dev)
        s0 = V.stats()["submissions"]
        losses.append(f(x, y).numpy())
        subs.append(V.stats()["submissions"] - s0)
    pts = [p for c in f.captures.values() for st in c for p in st.captured.points] if jit else []
    params = [p.numpy() for p in net.parameters()]
    return dict(values=params + losses, params=params, exchange=ddp.exchange, moved=moved, subs=subs,
                points=[[len(p.gets), len(p.outs), p.runs] for p in pts], reductions=ddp.timings["reductions"],
                buckets=len(ddp.buckets))

def agree(arrays) -> bool:
    "Do the ranks hold the same arrays, bit for bit?"
    flat = np.concatenate([a.reshape(-1) for a in arrays]).view(np.uint32).astype(np.int64)
    lo, hi = flat.copy(), flat.copy()
    dist.all_reduce(lo, dist.ReduceOp.MIN); dist.all_reduce(hi, dist.ReduceOp.MAX)
    return bool((lo == hi).all())

mpi, eager, jitted = run("mpi", False), run(None, False), run("shared", True)
at_once, at_once_jit = run("shared", False, overlap=False), run("shared", True, overlap=False)
same = lambda a, b: all(np.array_equal(u, v) for u, v in zip(a["values"], b["values"]))
out = dict(rank=r, eager_equal=same(mpi, eager), jit_equal=same(mpi, jitted), agree=agree(jitted["params"]),
           at_once_equal=[same(mpi, at_once), same(mpi, at_once_jit)],
           **{k: {f: d[f] for f in ("exchange", "moved", "subs", "points", "reductions", "buckets")}
              for k, d in (("mpi", mpi), ("eager", eager), ("jit", jitted), ("at_once_jit", at_once_jit))})
sys.stdout.write(json.dumps(out) + "\n")              # one write: the ranks' lines meet in mpiexec
"""


def two_ranks(tmp_path, model: str) -> list:
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    r = dist.launch(2, script, model, timeout=300, check=False,
                    env={"VKML_VIRTUAL_DEVICES": "2", "VKML_DDP_EXCHANGE": ""})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return sorted((json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")), key=lambda d: d["rank"])


@pytest.mark.vulkan
@pytest.mark.parametrize("model", ["sgd", "bn"])
def test_the_shared_exchange_equals_the_mpi_path_bit_for_bit_and_stages_nothing(tmp_path, model):
    ranks = two_ranks(tmp_path, model)
    assert [d["rank"] for d in ranks] == [0, 1]
    for d in ranks:
        assert (d["eager_equal"], d["jit_equal"], d["agree"]) == (True, True, True), d
        assert d["at_once_equal"] == [True, True], d          # overlapped or all buckets at once: the same bits
        assert d["mpi"]["exchange"] == "mpi" and d["eager"]["exchange"] == d["jit"]["exchange"] == "shared"  # auto: shared
        assert all(n > 0 for n in d["mpi"]["moved"]), d["mpi"]            # the host-staged path reads back and uploads
        if model == "sgd":                                               # (BatchNorm's buffers still go through MPI)
            assert d["eager"]["moved"] == [0] * 5 and d["jit"]["moved"] == [0, 0], d   # (calls 3-5 replay: no backward)
        assert d["eager"]["reductions"] == d["jit"]["reductions"] == 5 and d["eager"]["buckets"] > 1
        # a replay: the guard and the ready barriers are host points that read and write nothing (the buffers'
        # broadcast, with BatchNorm, is the host-staged one): overlapped, a barrier per bucket, the step cut after
        # each; all at once, one barrier and three segments (one more with the broadcast)
        bn, k = model == "bn", d["jit"]["buckets"]
        assert d["jit"]["points"][-(k + 1):] == [[0, 0, 3]] * (k + 1), d["jit"]
        assert d["jit"]["subs"][2:] == [k + 2 + bn] * 3, d["jit"]
        assert d["at_once_jit"]["points"][-2:] == [[0, 0, 3], [0, 0, 3]], d["at_once_jit"]
        assert d["at_once_jit"]["subs"][2:] == [3 + bn] * 3, d["at_once_jit"]


CHOICE = r"""
import os, sys, vkml, vkml.nn as nn, vkml.distributed as dist
dist.init_process_group(timeout=30)                   # a group of one: the choice is made (and checked) all the same
out = []
try: dist.DistributedDataParallel(nn.Linear(2, 1), exchange="shared")          # on the CPU
except dist.SharedExchangeUnavailableError as e: out.append("cpu" in str(e) and "exchange='auto'" in str(e))
out.append(dist.DistributedDataParallel(nn.Linear(2, 1)).exchange)             # auto on the CPU: MPI
out.append(dist.DistributedDataParallel(nn.Linear(2, 1).to("vulkan")).exchange)  # auto on lavapipe: shared
os.environ["VKML_DDP_EXCHANGE"] = "mpi"
out.append(dist.DistributedDataParallel(nn.Linear(2, 1).to("vulkan")).exchange)  # the variable forces MPI
out.append(dist.DistributedDataParallel(nn.Linear(2, 1).to("vulkan"), exchange="shared").exchange)  # the argument wins
os.environ["VKML_DDP_EXCHANGE"] = "nvlink"
try: dist.DistributedDataParallel(nn.Linear(2, 1))
except dist.DistributedError as e: out.append("VKML_DDP_EXCHANGE='nvlink'" in str(e))
print(out)
"""


@pytest.mark.vulkan
def test_the_exchange_is_chosen_and_forcing_shared_where_it_cannot_work_is_a_typed_error():
    r = subprocess.run([sys.executable, "-c", CHOICE], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={k: v for k, v in os.environ.items() if k != "VKML_DDP_EXCHANGE"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "[True, 'mpi', 'shared', 'mpi', 'shared', True]", r.stdout + r.stderr


def test_ranks_on_several_hosts_cannot_share_memory():
    "The first reason checked needs no device: a group larger than this host's part of it."
    g = SimpleNamespace(size=4, local=SimpleNamespace(Get_size=lambda: 2))
    why = dist._why_not_shared(g, "vulkan:0")
    assert "several hosts" in why and "2 on this one" in why
    assert issubclass(dist.SharedExchangeUnavailableError, dist.DistributedError)


SETUP_FAILS = r"""
import sys, vkml, vkml.nn as nn, vkml.distributed as dist
dist.init_process_group(timeout=60)
r = dist.get_rank()
dev = f"vulkan:{dist.get_node_local_rank() % len(vkml.devices())}"
dist.SHM_DIR = "/proc"               # a folder where no file can be made: the region's setup fails on rank 0
out = [dist.DistributedDataParallel(nn.Linear(4, 2).to(dev)).exchange]          # auto: every rank falls back to MPI
try: dist.DistributedDataParallel(nn.Linear(4, 2).to(dev), exchange="shared")
except dist.SharedExchangeUnavailableError as e: out.append("could not be set up" in str(e))
sys.stdout.write(f"{r} {out}\n")
"""


@pytest.mark.vulkan
def test_a_region_that_cannot_be_set_up_falls_back_under_auto_and_raises_when_forced(tmp_path):
    "Rank 0 cannot create the file: both ranks learn it; 'auto' goes on through MPI, 'shared' raises on every rank."
    r = dist.launch(2, "-c", SETUP_FAILS, timeout=120, check=False, env={"VKML_VIRTUAL_DEVICES": "2"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert sorted(r.stdout.splitlines()) == ["0 ['mpi', True]", "1 ['mpi', True]"], r.stdout + r.stderr
