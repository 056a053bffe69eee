"""What each vkML mode of the real-model benchmark leaves in device memory, and why: the step's peak, the bytes in use
once the mode's model, optimiser and step are gone, and for memory still in use, what holds it (the chain of
referrers above each live allocation). For peaks that differ between modes or machines (bench/real_models.py runs
every mode in one process, so memory a mode leaves behind counts in the next one's peak).

    python bench/memory_modes.py --cases cnn_bn gpt --out FILE     # the benchmark's sizes (a GPU)
    python bench/memory_modes.py --small                           # tiny sizes (lavapipe, seconds)
"""
import argparse, gc, json, sys, types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vkml
import real_models as R
from vkml.backends.vulkan.memory import Alloc

MiB = 2 ** 20


def holders(obj, depth=4, seen=None) -> list:
    "The chain of referrers above `obj`, as type names (frames and the caller's own lists left out)."
    seen = set() if seen is None else seen
    out = []
    for r in gc.get_referrers(obj):
        if id(r) in seen or isinstance(r, types.FrameType): continue
        seen.add(id(r))
        d = type(r).__name__
        if isinstance(r, dict): d += f" keys={[str(k)[:20] for k in list(r.keys())[:4]]}"
        elif isinstance(r, (list, tuple)): d += f" len={len(r)}"
        out.append([d] + (holders(r, depth - 1, seen) if depth > 1 else []))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["cnn_bn", "gpt"], choices=["gpt", "cnn_bn", "resnet20"])
    ap.add_argument("--modes", nargs="+", default=list(R.VK_MODES), choices=R.VK_MODES)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    specs, rows = R.case_specs(a.small), []
    for case in a.cases:
        spec = specs[case]
        weights, data = R.init_weights(spec["build"](R.Lib("vkml"))), spec["data"](4)
        for mode in a.modes:
            gc.collect()
            start = vkml.memory_stats()["bytes_in_use"]
            r = R.vk_mode(spec, weights, data, mode, a.steps, 3, 0)
            gc.collect()
            after = vkml.memory_stats()["bytes_in_use"]
            live = [o for o in gc.get_objects() if isinstance(o, Alloc)]
            row = dict(case=case, mode=mode, start=start, peak=r["peak_bytes"], after=after, live_allocations=len(live),
                       held_by=holders(live[0]) if live and after > start else None)
            rows.append(row)
            print(f"{case:8s} {mode:8s} in use at start {start / MiB:9.1f}  peak {r['peak_bytes'] / MiB:9.1f}  "
                  f"after {after / MiB:9.1f} MiB  live allocations {len(live)}", flush=True)
            if row["held_by"]: print(json.dumps(row["held_by"], indent=1)[:3000], flush=True)
    if a.out:
        from vs_torch import provenance
        Path(a.out).write_text(json.dumps(dict(provenance=dict(provenance(sys.argv[1:] if argv is None else argv),
                                                               command=" ".join(["python", "bench/memory_modes.py"] + (sys.argv[1:] if argv is None else argv))),
                                               rows=rows), indent=1))


if __name__ == "__main__":
    main()
