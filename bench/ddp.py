"""Data-parallel training throughput with vkml.distributed: 1 and 2 ranks under `mpiexec`, beside PyTorch DDP.

    python bench/ddp.py --out bench/results/ddp_h200x2.json     # the H200 x2 run (bench/h200x2.sh)
    python bench/ddp.py --quick --out /tmp/ddp.json             # tiny sizes, 2 ranks on lavapipe (a smoke run)
    python bench/ddp.py --quick --exchange shared --out /tmp/ddp.json   # the shared-memory exchange in the steps

This process is the driver: it starts the ranks with `vkml.distributed.launch` (`mpiexec -n R` beside this
Python, else on PATH), each rank running this file with `--worker`, and writes one JSON.

Cases (bench/vs_torch.py's model builders):
  mlp     MLP 784-1024-1024-10, batch 512 per rank, Adam
  cifar   the CNN with BatchNorm on 3x32x32 images, batch 128 per rank, Adam

For each case and each library: samples per second with 1 rank and with R ranks (every step ends with the
loss read on the host; the slowest rank's wall time over the timed steps; the median of `--rounds` rounds)
and the scaling efficiency, R-rank throughput / (R x 1-rank throughput), goal >= 0.85. Each rank uses the
device of its rank on this host (`vulkan:{local_rank}` among the devices of the most capable type,
`cuda:{local_rank}` for PyTorch); with fewer devices than ranks every vkML rank shares the default device
(noted in the JSON) and PyTorch's R-rank run is skipped (NCCL refuses two ranks on one GPU).

vkML's data-parallel step runs eagerly and with vkml.jit: under the jit the gradient exchange is a host point
of the captured step (ADR 0030), run by every replay between its segments; the JSON records, for the jitted
R-rank step, what that exchange costs per step (jit.exchange) beside the 1-rank jitted step (no wrapper: a
group of one exchanges nothing). `--jit` prints those figures: the exchange's time / the jitted step, and
samples/s of R ranks vs 1.

`--exchange` is DistributedDataParallel's `exchange` in every run: `mpi` (the default here, so that the
recorded series compare across commits: the host-staged path), `shared` (one host: the buckets written by each
device into imported shared memory and summed on the device) or `auto` (shared where every rank can). With R
ranks the JSON also holds `exchange_alone`: each exchange that works here timed on its own, on gradients of
--exchange-sizes MiB already computed, until the device has the averages: bytes per second of one rank's buckets.

The equality check: after `--check-steps` steps of SGD (not Adam: Adam turns a last-bit difference in a
gradient near its eps into a whole step, which no rounding bound covers) from the same start, rank 0's
parameters equal one process trained on the R-times batch, within the parity bound (1e-5 relative, scaled by sqrt(K) for the longest sum
K behind a gradient; absolute part: the same fraction of the learning rate). A model with BatchNorm
normalises each rank's share by that share's statistics (as PyTorch's DDP without SyncBatchNorm does), so its
one-process reference passes the R shares through the model separately and averages their losses. The ranks
must also hold bit-identical parameters.
"""
import argparse, datetime, json, math, os, platform, socket, statistics, subprocess, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import numpy as np

GOAL = 0.85
LR = 1e-3


def sizes(quick: bool) -> dict:
    "What each case trains, and for how long: full sizes, or tiny ones for lavapipe."
    if quick:
        return dict(mlp=dict(model="mlp", sizes=[64, 64, 64, 10], batch=16, shape=[64], classes=10),
                    cifar=dict(model="cifar", widths=[4, 8, 8], batch=2, shape=[3, 32, 32], classes=10, bn=True),
                    warm=1, steps=3, rounds=1, check_steps=3, warm_s=0.0, exchange_sizes=[0.0625, 1.0], exchange_reps=5)
    return dict(mlp=dict(model="mlp", sizes=[784, 1024, 1024, 10], batch=512, shape=[784], classes=10),
                cifar=dict(model="cifar", widths=[32, 64, 128], batch=128, shape=[3, 32, 32], classes=10, bn=True),
                warm=10, steps=50, rounds=3, check_steps=10, warm_s=2.0, exchange_sizes=[1.0, 16.0, 100.0],
                exchange_reps=20)


def describe(c: dict) -> str:
    if c["model"] == "mlp": return f"MLP {'-'.join(map(str, c['sizes']))}, batch {c['batch']} per rank, Adam"
    return (f"CNN with BatchNorm (widths {'/'.join(map(str, c['widths']))}) on {'x'.join(map(str, c['shape']))} images, "
            f"batch {c['batch']} per rank, Adam")


def longest_sum(c: dict, ranks: int) -> int:
    "K of the parity bound: the longest sum behind a gradient (a weight's gradient sums over batch x positions)."
    if c["model"] == "mlp": return max(ranks * c["batch"], max(c["sizes"][:-1]))
    return ranks * c["batch"] * c["shape"][1] * c["shape"][2]


def global_batches(c: dict, ranks: int, k: int = 4):
    "k batches of ranks x batch rows (the same in every process): rank r trains on rows r*batch ... (r+1)*batch - 1."
    import vs_torch as VT
    return VT.batches((ranks * c["batch"], *c["shape"]), c["classes"], k=k)


def shard(data, r: int, b: int):
    return [(x[r * b:(r + 1) * b], y[r * b:(r + 1) * b]) for x, y in data]


# ------------------------------------------------------------------ vkML ranks
def vk_pick_device(local_rank: int, local_size: int):
    "(device, note): this rank's Vulkan device, one per rank on this host when there are enough, else the default one."
    import vkml.backends.vulkan as V
    from vkml.backends.vulkan.device import TYPE_PREFERENCE
    infos = [d for d in V.devices() if not d.missing] or list(V.devices())
    best = min(TYPE_PREFERENCE.index(d.type) for d in infos)
    same = sorted(d.index for d in infos if TYPE_PREFERENCE.index(d.type) == best)
    if len(same) >= local_size: return f"vulkan:{same[local_rank]}", None
    d = V.default_index()
    return f"vulkan:{d}", (f"{len(same)} Vulkan device(s) of the most capable type for {local_size} rank(s) on this host: "
                           f"every rank on vulkan:{d} ({V.devices()[d].name})")


def vk_worker(spec: dict, result: str, work: str):
    import vkml, vkml.distributed as dist
    from vkml import nn, optim
    from vkml.engine.capture import JitError
    sys.modules.setdefault("torch", None)   # the vkML ranks leave CUDA alone: vs_torch's builders without PyTorch
    import vs_torch as VT
    from mpi4py import MPI
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    local_comm = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
    local_size = local_comm.Get_size(); local_comm.Free()
    device, note = vk_pick_device(dist.get_node_local_rank(), local_size)
    VT.DEV = device
    info = vkml.backends.vulkan.devices()[int(device.split(":")[1])]
    ranks_info = MPI.COMM_WORLD.allgather(dict(rank=rank, device=device, name=info.name, driver=info.driver))
    R = spec["ranks"]   # the global batch is R shares in every run, so that 1 rank's reference sees R ranks' data
    out = dict(world=world, ranks=ranks_info, device_note=note, mpi=" ".join(MPI.Get_library_version().splitlines()[0].split()),
               cases={})

    def build(c):
        return VT.vk_mlp(tuple(c["sizes"])) if c["model"] == "mlp" else VT.vk_cifar(tuple(c["widths"]))

    if spec.get("warm_s"):   # clocks up before the first case (a fresh GPU's first steps met idle clocks, vs_torch.py)
        w, t_end = vkml.randn(2048, 2048, device=device), time.perf_counter() + spec["warm_s"]
        while time.perf_counter() < t_end: (w @ w).sum().item()
        del w

    def stepper(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward(); opt.step()
            return loss
        return step

    def runner(f, data):
        it = [0]
        def run():
            x, y = data[it[0] % len(data)]; it[0] += 1
            return f(vkml.tensor(x, device=device), vkml.tensor(y, device=device)).item()
        return run

    def timed(run, warm):
        for _ in range(warm): run()
        rounds = []
        for _ in range(spec["rounds"]):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(spec["steps"]): run()
            el = np.array([time.perf_counter() - t0])
            dist.all_reduce(el, dist.ReduceOp.MAX)     # the slowest rank's time
            rounds.append(float(el[0]))
        sps = [world * batch * spec["steps"] / s for s in rounds]
        return dict(samples_per_s=statistics.median(sps), ms_per_step=statistics.median(rounds) / spec["steps"] * 1e3,
                    rounds_samples_per_s=sps, steps=spec["steps"], rounds=spec["rounds"], warm=warm)

    for name in spec["cases"]:
        c = spec[name]
        batch = c["batch"]
        data = global_batches(c, R)
        mine = shard(data, rank, batch)
        res = out["cases"][name] = {}
        # the equality run: data-parallel steps on the R shares (with 1 rank: the reference, one process on all of it).
        # It trains with SGD, not the timed runs' Adam: SGD moves a parameter by LR x its gradient, so a last-bit
        # difference in the gradient's sum (R partial sums added by MPI vs one long sum) stays a last-bit difference,
        # within the parity bound. Adam divides by sqrt(v) + eps: where a gradient is near eps, that last bit turns
        # into a different step of up to LR, which no bound on the sum's rounding covers (the H200 x2 check failed so).
        net, model = build(c), None
        if world > 1:
            model = dist.DistributedDataParallel(net, exchange=spec["exchange"], bucket_cap_mb=spec["bucket_cap_mb"])
            opt = optim.SGD(model.parameters(), lr=LR)
            step = stepper(model, opt)
            losses = [float(step(vkml.tensor(x, device=device), vkml.tensor(y, device=device)).item())
                      for x, y in (mine[i % len(mine)] for i in range(spec["check_steps"]))]
            flat = np.concatenate([p.numpy().reshape(-1) for _, p in net.named_parameters()])
            lo, hi = flat.copy(), flat.copy()
            dist.all_reduce(lo, dist.ReduceOp.MIN); dist.all_reduce(hi, dist.ReduceOp.MAX)
            res["ranks_identical"] = bool((lo == hi).all())
        else:
            opt = optim.SGD(net.parameters(), lr=LR)      # (SGD: see the equality run's comment above)
            shards = R if c.get("bn") else 1
            def ref_step(x, y):
                opt.zero_grad()
                b = x.shape[0] // shards
                loss = sum(nn.functional.cross_entropy(net(x[i * b:(i + 1) * b]), y[i * b:(i + 1) * b])
                           for i in range(shards)) / shards
                loss.backward(); opt.step()
                return loss
            losses = [float(ref_step(vkml.tensor(x, device=device), vkml.tensor(y, device=device)).item())
                      for x, y in (data[i % len(data)] for i in range(spec["check_steps"]))]
            res["reference"] = (f"one process, batch {R * batch}" + (f" passed through the model as {R} shares of {batch} "
                                "(BatchNorm's statistics per share, as each rank's), their losses averaged" if shards > 1 else ""))
        res["check_losses"] = losses
        if rank == 0:
            np.savez(Path(work) / f"{name}_{world}.npz", **{k: p.numpy() for k, p in net.named_parameters()})
        del net, model, opt
        # the eager step, data-parallel (with 1 rank the wrapper exchanges nothing)
        net = build(c)
        model = dist.DistributedDataParallel(net, exchange=spec["exchange"], bucket_cap_mb=spec["bucket_cap_mb"])
        opt = optim.Adam(model.parameters(), lr=LR)
        T0 = dict(model.timings)
        res["eager"] = timed(runner(vkml.jit(stepper(model, opt), enabled=False), mine), spec["warm"])
        n = model.timings["reductions"] - T0["reductions"]
        if n:
            res["exchange_ms_per_step"] = {k: (model.timings[k] - T0[k]) / n * 1e3
                                           for k in ("compute_readback_s", "allreduce_s", "upload_s", "guard_s")}
            res["exchange_bytes_per_step"] = (model.timings["bytes"] - T0["bytes"]) / n
            res["buckets"] = len(model.buckets)
        res["exchange"] = model.exchange
        del net, model, opt
        # the step with vkml.jit: one rank without the wrapper; R ranks through DDP, which refuses a capture
        net = build(c)
        if world == 1:
            opt = optim.Adam(net.parameters(), lr=LR)
            res["jit"] = timed(runner(vkml.jit(stepper(net, opt)), mine), max(3, spec["warm"]))
        else:
            model = dist.DistributedDataParallel(net, exchange=spec["exchange"], bucket_cap_mb=spec["bucket_cap_mb"])
            opt = optim.Adam(model.parameters(), lr=LR)
            f = vkml.jit(stepper(model, opt))
            try: res["jit"] = timed(runner(f, mine), max(3, spec["warm"]))
            except JitError as e:
                res["jit"] = dict(supported=False, error=f"{type(e).__name__}: {e}")
            else: res["jit"]["exchange"] = jit_exchange(f, model)
            del model, f
        del net, opt
    if world > 1: out["exchange_alone"] = exchange_alone(device, spec)
    if rank == 0: Path(result).write_text(json.dumps(out, indent=1))
    dist.destroy_process_group()


def exchange_alone(device: str, spec: dict) -> list:
    """Each exchange timed on its own (vkml.distributed.time_exchange): one bucket of each size in MiB, gradients
    computed once, then `exchange_reps` exchanges, each waited for on the device. An exchange that cannot work here
    is listed with the reason."""
    import vkml, vkml.distributed as dist
    from vkml import nn
    rows = []
    for mib in spec["exchange_sizes"]:
        n = int(mib * 2**20) // 4
        for how in ("mpi", "shared"):
            vkml.manual_seed(0)
            lin = nn.Linear(n, 1, bias=False).to(device)
            try: ddp = dist.DistributedDataParallel(lin, bucket_cap_mb=max(25.0, 2 * mib), exchange=how)
            except dist.SharedExchangeUnavailableError as e:
                rows.append(dict(exchange=how, mib=mib, error=str(e))); continue
            ddp(vkml.ones((1, n), device=device)).sum().backward()
            rows.append(dict(mib=mib, **dist.time_exchange(ddp, spec["exchange_reps"])))
            del lin, ddp
    return rows


def jit_exchange(f, model) -> dict:
    """What the replays' gradient exchange cost (ADR 0030): per replay, the host point's time (read the buckets back,
    agree, MPI all-reduce, divide, write the uploads), its MPI part (the host function: agree, all-reduce, divide; it
    includes waiting for the slower rank), the wait for the segment before it, and bytes/s of each."""
    pts = [p for steps in f.captures.values() for st in steps for p in st.captured.points]
    runs = sum(p.runs for p in pts) // max(1, len(pts))
    if not runs: return dict(replays=0)
    host_s, wait_s, fn_s = (sum(getattr(p, k) for p in pts) / runs for k in ("host_s", "wait_s", "fn_s"))
    nbytes = model.timings["bytes"] / model.timings["reductions"]
    return dict(replays=runs, host_points=len(pts), exchange_ms_per_step=host_s * 1e3, wait_ms_per_step=wait_s * 1e3,
                mpi_ms_per_step=fn_s * 1e3, bytes_per_step=nbytes, exchange_bytes_per_s=nbytes / host_s,
                mpi_bytes_per_s=nbytes / fn_s)


# ------------------------------------------------------------------ PyTorch ranks (DDP over NCCL)
def _env_int(*names, default=None):
    for n in names:
        if os.environ.get(n, "").strip(): return int(os.environ[n])
    return default


def th_worker(spec: dict, result: str):
    "One PyTorch rank: rank and size from mpiexec's environment (MPICH's PMI_*, Open MPI's), NCCL, DDP."
    import torch, torch.distributed as tdist
    from torch.nn.parallel import DistributedDataParallel as TDDP
    import vs_torch as VT
    rank = _env_int("PMI_RANK", "OMPI_COMM_WORLD_RANK", "RANK", default=0)
    world = _env_int("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", default=1)
    local = _env_int("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", default=rank)
    torch.cuda.set_device(local)
    tdist.init_process_group("nccl", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{spec['port']}",
                             device_id=torch.device("cuda", local))
    R = spec["ranks"]
    ranks_info = [None] * world
    tdist.all_gather_object(ranks_info, dict(rank=rank, device=f"cuda:{local}", name=torch.cuda.get_device_name(local)))
    try: nccl = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception: nccl = "unknown"
    out = dict(world=world, ranks=ranks_info, torch=torch.__version__, nccl=nccl, cases={})
    if spec.get("warm_s"):
        w, t_end = torch.randn(2048, 2048, device="cuda"), time.perf_counter() + spec["warm_s"]
        while time.perf_counter() < t_end: (w @ w).sum().item()
        del w
    for name in spec["cases"]:
        c = spec[name]
        batch = c["batch"]
        mine = shard(global_batches(c, R), rank, batch)
        model = VT.th_mlp(tuple(c["sizes"])) if c["model"] == "mlp" else VT.th_cifar(tuple(c["widths"]))
        model = TDDP(model, device_ids=[local])
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        it = [0]
        def run():
            x, y = mine[it[0] % len(mine)]; it[0] += 1
            xb, yb = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward(); opt.step()
            return loss.item()
        for _ in range(spec["warm"]): run()
        rounds = []
        for _ in range(spec["rounds"]):
            tdist.barrier()
            t0 = time.perf_counter()
            for _ in range(spec["steps"]): run()
            el = torch.tensor([time.perf_counter() - t0], device="cuda")
            tdist.all_reduce(el, op=tdist.ReduceOp.MAX)
            rounds.append(float(el.item()))
        sps = [world * batch * spec["steps"] / s for s in rounds]
        out["cases"][name] = dict(eager=dict(samples_per_s=statistics.median(sps),
                                             ms_per_step=statistics.median(rounds) / spec["steps"] * 1e3,
                                             rounds_samples_per_s=sps, steps=spec["steps"], rounds=spec["rounds"],
                                             warm=spec["warm"]))
        del model, opt
    if rank == 0: Path(result).write_text(json.dumps(out, indent=1))
    tdist.destroy_process_group()


def torch_status(ranks: int):
    "(usable, reason): whether PyTorch with CUDA, torch.distributed and NCCL, with `ranks` GPUs, is here (in a child process)."
    code = ("import json, torch, torch.distributed as d; print(json.dumps([torch.__version__, torch.cuda.is_available(), "
            "d.is_available() and d.is_nccl_available(), torch.cuda.device_count()]))")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        ver, cuda, nccl, count = json.loads(r.stdout.strip().splitlines()[-1])
    except Exception:
        return False, "torch is not importable here: vkML alone"
    if not cuda: return False, f"torch {ver} sees no CUDA device: vkML alone"
    if not nccl: return False, f"torch {ver} has no torch.distributed with NCCL: vkML alone"
    if count < ranks: return False, f"torch {ver} sees {count} CUDA device(s) for {ranks} ranks (NCCL needs one GPU a rank)"
    return True, f"torch {ver}, {count} CUDA device(s)"


# ------------------------------------------------------------------ the driver
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def equality(work: Path, name: str, c: dict, ranks: int) -> dict:
    "Rank 0's parameters after the check steps against one process's on the R-times batch, in units of the bound."
    K = longest_sum(c, ranks)
    rtol = 1e-5 * math.sqrt(K); atol = rtol * LR
    a, b = np.load(work / f"{name}_1.npz"), np.load(work / f"{name}_{ranks}.npz")
    worst, which, diff, over, n = 0.0, None, 0.0, 0, 0
    for k in a.files:
        d = np.abs(b[k] - a[k])
        ex = d / (atol + rtol * np.abs(a[k]))
        over += int((ex > 1).sum()); n += ex.size
        if ex.max() >= worst: worst, which, diff = float(ex.max()), k, float(d.max())
    # how many values are over the bound tells a few near-ties (a ReLU at zero) from a systematic mismatch
    return dict(optimizer="SGD", lr=LR, k=K, rtol=rtol, atol=atol, max_excess=worst, worst_parameter=which, max_abs_diff=diff,
                values_over_bound=over, values=n, passed=bool(worst <= 1 and sorted(a.files) == sorted(b.files)))


def provenance(argv, devices):
    try: commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=HERE).stdout.strip() or "unknown"
    except Exception: commit = "unknown"
    names = sorted({d["name"] for d in devices}) if devices else ["unknown"]
    drivers = sorted({d["driver"] for d in devices if d.get("driver")}) if devices else []
    return dict(date=datetime.date.today().isoformat(), device=", ".join(names), driver=", ".join(drivers) or "unknown",
                devices=devices, commit=os.environ.get("VKML_COMMIT", commit), host=platform.node(),
                command=" ".join(["python", "bench/ddp.py"] + list(argv)))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="the JSON to write (the driver)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes and few steps (2 ranks on lavapipe)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--cases", nargs="+", default=["mlp", "cifar"], choices=["mlp", "cifar"])
    ap.add_argument("--steps", type=int, help="timed steps per round")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--warm", type=int)
    ap.add_argument("--check-steps", type=int)
    ap.add_argument("--warm-s", type=float, help="seconds of GPU work in each rank before the first case (clocks up)")
    ap.add_argument("--no-torch", action="store_true", help="vkML alone")
    ap.add_argument("--jit", action="store_true", help="also print the jitted step: samples/s of 1 and R ranks, and the "
                    "exchange's time per step / the jitted step")
    ap.add_argument("--exchange", choices=["mpi", "shared", "auto"], default="mpi",
                    help="DistributedDataParallel's gradient exchange in the runs (default: mpi, the host-staged path)")
    ap.add_argument("--exchange-sizes", type=float, nargs="+", help="MiB of the buckets timed alone (exchange_alone)")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DistributedDataParallel's bucket_cap_mb (several "
                    "buckets: the exchange of one overlaps the backward of the next; VKML_DDP_OVERLAP=0 turns that off)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds for each mpiexec run")
    ap.add_argument("--worker", choices=["vk", "torch"], help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker == "vk": return vk_worker(json.loads(a.spec), a.result, a.work)
    if a.worker == "torch": return th_worker(json.loads(a.spec), a.result)
    if not a.out: ap.error("--out is required")
    import vkml.distributed as dist
    spec = sizes(a.quick)
    for k in ("steps", "rounds", "warm", "check_steps", "warm_s"):
        if getattr(a, k) is not None: spec[k] = getattr(a, k)
    if a.exchange_sizes: spec["exchange_sizes"] = a.exchange_sizes
    spec["bucket_cap_mb"], spec["overlap"] = a.bucket_cap_mb, os.environ.get("VKML_DDP_OVERLAP", "1") != "0"
    spec.update(ranks=a.ranks, cases=a.cases, exchange=a.exchange)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")   # NVLink multicast stays off on the lent machines
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    doc = dict(provenance=None, quick=a.quick, ranks=[1, a.ranks], goal_efficiency=GOAL, lr=LR, spec=spec, notes=[],
               runs={}, cases=[])
    use_torch, why = (False, "--no-torch: vkML alone") if a.no_torch else torch_status(a.ranks)
    doc["torch_status"] = why
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        def run(lib, n):
            res = work / f"{lib}{n}.json"
            s = dict(spec, port=free_port())
            t0 = time.perf_counter()
            try:
                r = dist.launch(n, str(Path(__file__).resolve()), "--worker", lib, "--spec", json.dumps(s),
                                "--result", str(res), "--work", str(work), timeout=a.timeout)
                doc["runs"][f"{lib}{n}"] = dict(seconds=round(time.perf_counter() - t0, 1), stderr_tail=r.stderr[-800:])
                return json.loads(res.read_text())
            except Exception as e:
                doc["runs"][f"{lib}{n}"] = dict(seconds=round(time.perf_counter() - t0, 1), error=f"{type(e).__name__}: {str(e)[-3000:]}")
                print(f"{lib} with {n} rank(s) failed: {e}", file=sys.stderr)
                return None
        R = a.ranks
        vk, th = {1: None, R: None}, {1: None, R: None}

        def assemble():
            "The document from the runs so far (written after each, so that a run cut short keeps what was done)."
            doc["notes"], doc["cases"] = [], []
            devices = [dict(d, ranks=n) for n in (1, R) if vk[n] for d in vk[n]["ranks"]]
            for n in (1, R):
                if vk[n] and vk[n].get("device_note"): doc["notes"].append(f"vkML, {n} rank(s): {vk[n]['device_note']}")
            if vk[R]: doc["mpi"], doc["exchange_alone"] = vk[R]["mpi"], vk[R].get("exchange_alone", [])
            if th[R]: doc["torch"] = dict(version=th[R]["torch"], nccl=th[R]["nccl"], ranks=th[R]["ranks"])
            for name in a.cases:
                c = spec[name]
                row = dict(case=name, what=describe(c), batch_per_rank=c["batch"])
                v1 = vk[1]["cases"][name] if vk[1] else None
                vR = vk[R]["cases"][name] if vk[R] else None
                row["vkml"] = {"1": v1, str(R): vR}
                if v1 and vR:
                    try: row["equality"] = equality(work, name, c, R)
                    except Exception as e: row["equality"] = dict(passed=False, error=f"{type(e).__name__}: {e}")
                    row["equality"].update(reference=v1.get("reference"), steps=spec["check_steps"],
                                           ranks_identical=vR.get("ranks_identical"))
                    row["equality"]["passed"] = bool(row["equality"]["passed"] and vR.get("ranks_identical"))
                    e1, eR = v1["eager"]["samples_per_s"], vR["eager"]["samples_per_s"]
                    row["efficiency"] = dict(vkml_eager=eR / (R * e1))
                    if isinstance(v1.get("jit"), dict) and "samples_per_s" in v1["jit"]:
                        row["efficiency"]["vkml_vs_jit_1_rank"] = eR / (R * v1["jit"]["samples_per_s"])
                    if isinstance(vR.get("jit"), dict) and "samples_per_s" in vR["jit"]:
                        row["efficiency"]["vkml_jit"] = vR["jit"]["samples_per_s"] / (R * v1["jit"]["samples_per_s"])
                    row["jit_under_ddp"] = ("supported" if "samples_per_s" in vR.get("jit", {})
                                            else vR.get("jit", {}).get("error", "not run"))
                t1 = th[1]["cases"][name] if th[1] else None
                tR = th[R]["cases"][name] if th[R] else None
                row["torch"] = {"1": t1, str(R): tR} if (t1 or tR) else None
                if t1 and tR:
                    row.setdefault("efficiency", {})["torch"] = tR["eager"]["samples_per_s"] / (R * t1["eager"]["samples_per_s"])
                if "vkml_eager" in row.get("efficiency", {}): row["met"] = row["efficiency"]["vkml_eager"] >= GOAL
                doc["cases"].append(row)
            doc["provenance"] = provenance(argv, devices)
            doc["seconds"] = round(time.perf_counter() - t_start, 1)
            out.write_text(json.dumps(doc, indent=1))

        for n in (1, R):
            vk[n] = run("vk", n); assemble()
        if use_torch:
            for n in (1, R):
                th[n] = run("torch", n); assemble()
    f = lambda v: "-" if v is None else f"{v:,.0f}"
    print(f"{'case':<7}{'lib':<7}{'1 rank':>12}{f'{R} ranks':>12}{'efficiency':>12}  equality")
    for r in doc["cases"]:
        for lib in ("vkml", "torch"):
            d = r.get(lib) or {}
            one, many = (d.get("1") or {}).get("eager", {}), (d.get(str(R)) or {}).get("eager", {})
            eff = (r.get("efficiency") or {}).get("vkml_eager" if lib == "vkml" else "torch")
            eq = r.get("equality", {}) if lib == "vkml" else {}
            print(f"{r['case']:<7}{lib:<7}{f(one.get('samples_per_s')):>12}{f(many.get('samples_per_s')):>12}"
                  f"{'-' if eff is None else f'{eff:.3f}':>12}  "
                  + (f"{'passed' if eq.get('passed') else 'FAILED'} (max {eq.get('max_excess', float('nan')):.3f} x the bound)" if eq else ""))
    print(f"samples per second (eager steps, exchange={a.exchange}); {doc['torch_status']}; wrote {out}")
    alone = doc.get("exchange_alone") or []
    if alone:
        print(f"the gradient exchange alone, {R} ranks (one rank's bytes / seconds per exchange, until the device has the "
              f"averages):")
        for row in alone:
            what = (f"{row['bytes_per_s'] / 1e6:,.0f} MB/s ({row['seconds'] * 1e3:.2f} ms)" if "bytes_per_s" in row
                    else "unavailable: " + row["error"][:120])
            print(f"  {row['mib']:>8g} MiB  {row['exchange']:<7}{what}")
    if a.jit:
        print(f"{'case':<7}{'jit 1 rank':>12}{f'jit {R} ranks':>13}{'efficiency':>12}{'step ms':>9}{'exchange ms':>13}"
              f"{'exch/step':>11}{'MB/s':>9}")
        for r in doc["cases"]:
            j1 = ((r.get("vkml") or {}).get("1") or {}).get("jit") or {}
            jR = ((r.get("vkml") or {}).get(str(R)) or {}).get("jit") or {}
            ex = jR.get("exchange") or {}
            eff = (r.get("efficiency") or {}).get("vkml_jit")
            step, xms, bps = jR.get("ms_per_step"), ex.get("exchange_ms_per_step"), ex.get("exchange_bytes_per_s")
            print(f"{r['case']:<7}{f(j1.get('samples_per_s')):>12}{f(jR.get('samples_per_s')):>13}"
                  f"{'-' if eff is None else f'{eff:.3f}':>12}{'-' if step is None else f'{step:.2f}':>9}"
                  f"{'-' if xms is None else f'{xms:.2f}':>13}{'-' if not (step and xms) else f'{xms / step:.2f}':>11}"
                  f"{'-' if not bps else f'{bps / 1e6:.0f}':>9}")
        print("jitted steps (vkml.jit; R ranks: the exchange a host point in every replay); exchange = "
              + ("the host point's readback, MPI all-reduce, average and upload" if a.exchange == "mpi" else
                 "the host points' time (shared memory: the two barriers; the copy and the sum run in the segments)")
              + "; MB/s = gradient bytes / exchange time")
    for n in doc["notes"]: print("note:", n)
    return doc


if __name__ == "__main__":
    main()
