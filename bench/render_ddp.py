"""The data-parallel run (bench/ddp.py's JSON) as a markdown section of bench/RESULTS.md.

    from render_ddp import render_ddp; print(render_ddp("bench/results"))
    python bench/render_ddp.py [RESULTS_DIR | FILE.json]     # print the section

Every figure comes from the JSON; nothing is typed here.
"""
import json, sys
from pathlib import Path

NAME = "ddp_h200x2.json"


def _table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def _prov(p):
    bits = [p.get("date", "?"), p.get("device", "?")]
    if p.get("driver"): bits.append(p["driver"])
    if p.get("commit"): bits.append(f"commit {p['commit']}")
    return "; ".join(bits) + (f"  \ncommand: `{p['command']}`" if p.get("command") else "")


def _sps(run, mode="eager"):
    d = (run or {}).get(mode)
    return f"{d['samples_per_s']:,.0f}" if isinstance(d, dict) and "samples_per_s" in d else "-"


def _ms(run, mode="eager"):
    d = (run or {}).get(mode)
    return f"{d['ms_per_step']:.2f}" if isinstance(d, dict) and "ms_per_step" in d else "-"


def _eff(x): return "-" if x is None else f"{x:.3f}"


def render_doc(d: dict) -> str:
    "The section for one JSON document of bench/ddp.py."
    R = d["ranks"][-1]
    goal = d.get("goal_efficiency", 0.85)
    spec = d.get("spec") or {}
    how = [f"exchange {spec['exchange']}"] if spec.get("exchange") else []
    if spec.get("bucket_cap_mb") not in (None, 25.0): how.append(f"buckets of {spec['bucket_cap_mb']:g} MiB")
    if "overlap" in spec: how.append("overlapped with backward" if spec["overlap"] else "all buckets at once")
    s = [f"## Data-parallel training, 1 and {R} ranks (vkml.distributed{' beside PyTorch DDP' if d.get('torch') else ''}"
         f"{': ' + ', '.join(how) if how else ''})", "", _prov(d["provenance"]), ""]
    if d.get("quick"): s += ["A `--quick` run: tiny sizes and few steps; a smoke test, not a measurement.", ""]
    ranks = d["provenance"].get("devices") or []
    if ranks:
        s += ["Devices: " + "; ".join(f"{r['ranks']} rank(s), rank {r['rank']}: {r['device']} ({r['name']})" for r in ranks)
              + (f". PyTorch: torch {d['torch']['version']}, NCCL {d['torch']['nccl']}, "
                 + ", ".join(f"rank {r['rank']} on {r['device']}" for r in d["torch"]["ranks"]) if d.get("torch") else "")
              + (f". MPI: {d['mpi']}" if d.get("mpi") else "") + ".", ""]
    s += [f"PyTorch: {d.get('torch_status', '?')}.", ""]
    for n in d.get("notes", []): s += [f"Note: {n}", ""]
    rows = []
    for c in d["cases"]:
        v, t, e = c.get("vkml") or {}, c.get("torch") or {}, c.get("efficiency") or {}
        rows.append((c["case"], "vkML eager", _sps(v.get("1")), _sps(v.get(str(R))), _ms(v.get("1")), _ms(v.get(str(R))),
                     _eff(e.get("vkml_eager"))))
        rows.append((c["case"], "vkML vkml.jit", _sps(v.get("1"), "jit"), _sps(v.get(str(R)), "jit"), _ms(v.get("1"), "jit"),
                     _ms(v.get(str(R)), "jit"), _eff(e.get("vkml_jit"))))
        if t: rows.append((c["case"], "PyTorch DDP (NCCL)", _sps(t.get("1")), _sps(t.get(str(R))), _ms(t.get("1")),
                           _ms(t.get(str(R))), _eff(e.get("torch"))))
    s += [f"Samples per second over all ranks (median of the rounds; each step ends with the loss read on the host; the "
          f"slowest rank's time); efficiency = {R}-rank throughput / ({R} x 1-rank throughput), goal >= {goal}.", "",
          _table(["case", "library", "1 rank samples/s", f"{R} ranks samples/s", "1 rank ms/step", f"{R} ranks ms/step",
                  "efficiency"], rows), ""]
    for c in d["cases"]:
        s += [f"**{c['case']}**: {c['what']}."]
        e = c.get("efficiency") or {}
        if "vkml_eager" in e:
            s[-1] += (f" Scaling efficiency of vkML's eager step {e['vkml_eager']:.3f}: goal {'met' if c.get('met') else 'not met'}.")
        if "vkml_vs_jit_1_rank" in e:
            s[-1] += f" Against one rank with vkml.jit: {e['vkml_vs_jit_1_rank']:.3f}."
        q = c.get("equality")
        if q and "error" in q: s[-1] += f" Equality check: FAILED ({q['error'][:200]})."
        elif q:
            s[-1] += (f" Equality after {q['steps']} steps{' of ' + q['optimizer'] if q.get('optimizer') else ''} against "
                      f"{q.get('reference') or 'one process'}: "
                      f"{'passed' if q['passed'] else 'FAILED'}, the largest difference {q['max_excess']:.3f} x the bound "
                      f"(1e-5 x sqrt({q['k']:,}) relative; {q['max_abs_diff']:.2e} absolute, in {q['worst_parameter']}); "
                      + (f"{q['values_over_bound']:,} of {q['values']:,} values over the bound; " if q.get("values_over_bound") else "")
                      + f"the ranks' parameters {'bit-identical' if q.get('ranks_identical') else 'DIFFER'}.")
        x = ((c.get("vkml") or {}).get(str(R)) or {}).get("exchange_ms_per_step")
        if x:
            kb = c["vkml"][str(R)].get("exchange_bytes_per_step", 0) / 1e3
            s[-1] += (f" Where a {R}-rank step's gradient averaging goes (ms per step): compute + readback "
                      f"{x['compute_readback_s']:.2f}, all-reduce {x['allreduce_s']:.2f}, upload {x['upload_s']:.2f} "
                      f"({kb:,.0f} kB in {c['vkml'][str(R)].get('buckets', '?')} bucket(s)).")
        jx = (((c.get("vkml") or {}).get(str(R)) or {}).get("jit") or {}).get("exchange") or {}
        if jx.get("replays"):
            step = c["vkml"][str(R)]["jit"]["ms_per_step"]
            s[-1] += (f" Under vkml.jit the exchange is a host point of every replay: {jx['exchange_ms_per_step']:.2f} ms "
                      f"per step ({jx['exchange_ms_per_step'] / step:.0%} of the jitted step; MPI {jx['mpi_ms_per_step']:.2f} ms; "
                      f"{jx['exchange_bytes_per_s'] / 1e6:,.0f} MB/s).")
        if c.get("jit_under_ddp") and c["jit_under_ddp"] != "supported":
            s[-1] += f" vkml.jit with {R} ranks: refused (`{c['jit_under_ddp'].split(':')[0]}`): the step runs eagerly."
        s += [""]
    failed = {k: r["error"] for k, r in d.get("runs", {}).items() if "error" in r}
    if failed: s += ["Runs that failed: " + "; ".join(f"{k}: `{v.splitlines()[0][:200]}`" for k, v in failed.items()), ""]
    return "\n".join(s)


def render_ddp(results_dir) -> str:
    "The markdown section for `results_dir`/ddp_h200x2.json (a path to a JSON file works too); '' when there is none."
    p = Path(results_dir)
    if p.is_dir(): p = p / NAME
    if not p.exists(): return ""
    return render_doc(json.loads(p.read_text()))


if __name__ == "__main__":
    print(render_ddp(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent / "results"))
