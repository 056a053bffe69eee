"""The real-models run (bench/real_models.py's JSON) as a markdown section of bench/RESULTS.md.

    from render_real_models import render_real_models; print(render_real_models("bench/results"))
    python bench/render_real_models.py [RESULTS_DIR | FILE.json]     # print the section

Every figure comes from the JSON; nothing is typed here.
"""
import json, sys
from pathlib import Path

NAME = "real_models_h200.json"
PAIRS = {"eager": "eager ↔ eager", "jit_vs_graph": "vkml.jit ↔ CUDA graph", "amp": "amp ↔ amp float16",
         "amp_jit_vs_graph_f16": "amp + vkml.jit ↔ amp float16 CUDA graph"}
MODES = {"eager": ("eager", "eager"), "jit_vs_graph": ("jit", "graph"), "amp": ("amp", "amp_f16"),
         "amp_jit_vs_graph_f16": ("amp_jit", "graph_f16")}


def _table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def _prov(p):
    bits = [p.get("date", "?"), p.get("device", "?")]
    if p.get("driver"): bits.append(p["driver"])
    if p.get("torch"): bits.append(f"PyTorch {p['torch']} on {p.get('torch_device') or '?'}")
    if p.get("commit"): bits.append(f"commit {p['commit']}")
    return ("; ".join(bits) + (f"  \ncommand: `{p['command']}`" if p.get("command") else "")
            + (f"  \nnote: {p['note']}" if p.get("note") else ""))


def _ms(m): return f"{m['ms']:.2f}" if isinstance(m, dict) and "ms" in m else ("error" if isinstance(m, dict) and "error" in m else "–")
def _loss(v, t):
    "The two sides' last losses, which show whether they trained alike."
    f = lambda m: f"{m['loss_last']:.4f}" if isinstance(m, dict) and "loss_last" in m else "–"
    return f"{f(v)} / {f(t)}"
def _mb(m): return f"{m['peak_bytes'] / 2**20:.0f}" if isinstance(m, dict) and m.get("peak_bytes") else "–"


def _families(m, n=3):
    fams = (m or {}).get("gpu_us_per_step") or {}
    if fams and (m or {}).get("profile_trusted") is False: return "(profile longer than the step: not trusted)"
    return ", ".join(f"{k} {v / 1e3:.2f}" for k, v in list(fams.items())[:n]) or "–"


def render_section(d: dict) -> str:
    "The section for one real-models JSON."
    dev = d.get("provenance", {}).get("device", "")
    on = " on the H100" if "H100" in dev else ""
    cases = [r["case"] for r in d.get("results", [])]
    only = f": {', '.join(cases)}, a later run" if d.get("subset") else ""
    s = [f"## Real models beside PyTorch{on} (same GPU, same process){only}", "", _prov(d.get("provenance", {})), "",
         f"Training steps of whole models from the same starting weights, {d.get('steps', '?')} timed steps after "
         f"{d.get('warm', '?')} warm-up steps, each ending with the loss read on the host (`bench/real_models.py`). "
         "Ratio = PyTorch's ms ÷ vkML's (above 1: vkML is faster); peak = the largest device memory in use during the "
         "timed steps, MiB. Last loss = each side's loss at its last timed step: the eager and amp pairs start from the "
         "same weights and take the same steps, so a pair that trained alike agrees to about 3 digits; PyTorch's CUDA "
         "graphs take 3 more steps while capturing.", ""]
    rows, errors = [], []
    for r in d.get("results", []):
        if "error" in r: errors.append(f"- `{r['case']}`: {r['error']}"); continue
        for k, (v, t) in MODES.items():
            vm, tm = r["vkml"].get(v), r["torch"].get(t)
            ratio = r.get("ratios", {}).get(k)
            rows.append((r["case"], PAIRS[k], _ms(vm), _ms(tm), f"{ratio:.2f}" if ratio else "–", _mb(vm), _mb(tm), _loss(vm, tm)))
        for lib in ("vkml", "torch"):
            errors += [f"- `{r['case']}` {lib} {mode}: {m['error']}" for mode, m in r[lib].items() if "error" in m]
    s += [_table(["case", "modes", "vkML ms", "PyTorch ms", "ratio", "vkML peak", "PyTorch peak", "last loss, vkML / PyTorch"], rows), ""]
    if not d.get("peak_of_all_pools"):
        s += ["This file's vkML peaks are the largest memory pool's, not the device's: a jit step's capture has pools of "
              "its own, so its peak left out the weights and optimiser state (memory_stats counts every pool together "
              "since commit 10275c4; the eager peaks are whole). Measure again for the device's peak.", ""]
    detail = []
    for r in d.get("results", []):
        if "error" in r: continue
        detail += [(r["case"], "vkML " + mode, _ms(m), _families(m)) for mode, m in r["vkml"].items()]
        detail += [(r["case"], "PyTorch " + mode, _ms(m), _families(m)) for mode, m in r["torch"].items()]
    if detail:
        s += ["GPU time per step by kernel family, ms (the three largest; vkML's replayed steps are one recording, "
              "timed whole):", "", _table(["case", "mode", "ms per step", "GPU ms per step by family"], detail), ""]
    whats = [f"- `{r['case']}` ({r.get('params', 0):,} parameters): {r['what']}" for r in d.get("results", []) if "what" in r]
    if whats: s += ["Cases:", ""] + whats + [""]
    if errors: s += ["Failed modes (recorded, the run went on):", ""] + errors + [""]
    return "\n".join(s).rstrip()


def render_real_models(where, name=NAME) -> str:
    "The section for `where` (a results directory holding `name`, or a JSON file); '' when there is none."
    p = Path(where)
    if p.is_dir(): p = p / name
    return render_section(json.loads(p.read_text())) if p.exists() else ""


if __name__ == "__main__":
    print(render_real_models(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "results"))
