"""Where an eager training step's time goes: building the forward, backward's graph, scheduling, recording and
submitting, and waiting for the device (bench/real_models.py's cases, one process, no profiler in the timed steps):
    [VKML_SUBMIT_FIRST=0] python bench/eager_phases.py [--cases gpt cnn_bn resnet20] [--steps 10] [--small] [--mode eager|amp] [--out FILE]
An eager step (no vkml.jit) builds its graph in Python, schedules it (a plan seen before is recalled), records every
dispatch into command buffers, submitted in parts as they are recorded (ADR 0040; VKML_SUBMIT_FIRST=0: one submission
once all is recorded); the host then waits for the loss ("wait": what of the device's work is not yet done). Each case also
counts the graph nodes a step makes and the host's time per node (the step but its wait, over them: the issue's goal is
at most 5 us)."""
import argparse, collections, datetime, functools, json, os, platform, statistics, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1])); sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_models as rm
from vkml.engine import schedule as S
from vkml.backends.vulkan import backend as B, device as D, devices, default_index
import vkml.frontend.autograd as AG
import vkml.core.graph as G

PHASES = {"backward graph": (AG, "backward"), "schedule": (S.Schedule, "__init__"),
          "record and submit": (B._Running, "_run"), "wait": (D.Device, "wait")}

def instrument(spent: dict):
    "Wrap each phase's function to add its wall time to `spent` (the phases do not nest)."
    for key, (owner, name) in PHASES.items():
        f = getattr(owner, name)
        @functools.wraps(f)
        def g(*a, _f=f, _k=key, **kw):
            t0 = time.perf_counter()
            try: return _f(*a, **kw)
            finally: spent[_k] += time.perf_counter() - t0
        setattr(owner, name, g)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["gpt", "cnn_bn", "resnet20"]); ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--small", action="store_true"); ap.add_argument("--out")
    ap.add_argument("--mode", default="eager", choices=["eager", "amp"], help="amp: under autocast with a GradScaler")
    a = ap.parse_args(argv)
    spent = collections.defaultdict(float)
    instrument(spent)
    res = dict(date=datetime.date.today().isoformat(), device=devices()[default_index()].name, machine=platform.machine(),
               commit=os.environ.get("VKML_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                                      text=True).stdout.strip(), submit_first=B.SUBMIT_FIRST, mode=a.mode, cases={})
    for case in a.cases:
        spec = rm.case_specs(a.small)[case]
        weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
        data = spec["data"](4)
        _model, run = rm.vk_setup(spec, weights, a.mode)
        for i in range(4): run(data[i % 4])           # warm: kernels compiled, plans remembered
        spent.clear(); steps = []
        made = next(G._made)                          # graph nodes are numbered as they are made
        for i in range(a.steps):
            t0 = time.perf_counter(); run(data[i % 4]); steps.append(time.perf_counter() - t0)
        nodes = (next(G._made) - made - 1) / a.steps
        ms = {k: round(v / a.steps * 1e3, 2) for k, v in spent.items()}
        step = statistics.mean(steps) * 1e3
        ms["forward, optimizer and the rest"] = round(step - sum(ms.values()), 2)
        # the host's cost per graph node: the step's time but the wait for the device, over the nodes it made
        res["cases"][case] = dict(step_ms=round(step, 2), phases_ms=ms, nodes_per_step=round(nodes, 1),
                                  host_us_per_node=round((step - ms["wait"]) * 1e3 / nodes, 2))
        print(case, res["cases"][case], flush=True)
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1) + "\n")

if __name__ == "__main__": main()
