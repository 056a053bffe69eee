"""The real-models goals (ratio = PyTorch's time ÷ vkML's, same GPU, same process), each row computed from the
committed bench/results/*.json of each GPU; a row with no file for a GPU says so. Used by render_results.py:
    python bench/render_goals.py    # print the section
"""
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
GPUS = ("h200", "h100")


def load(name):
    "A committed result file's JSON, or None (render_results.py uses this one too)."
    p = RESULTS / name
    return json.loads(p.read_text()) if p.exists() else None


def _latest(*names):
    "The newest (by its date) of the files that exist."
    got = [d for d in map(load, names) if d]
    return max(got, key=lambda d: str(d.get("provenance", d).get("date", ""))) if got else None


def _when(d) -> str:
    p = d.get("provenance", d)
    return f"{p.get('date', '?')}, {p.get('commit', '?')}"


def _real(gpu):
    d = load(f"real_models_{gpu}.json")
    return (d, {r["case"]: r for r in d["results"]}) if d else (None, None)


def _step(gpu, case, vk_mode, torch_mode):
    "PyTorch's ms ÷ vkML's for one real model."
    d, rs = _real(gpu)
    if not rs or case not in rs: return None
    r = rs[case]
    vk, pt = r["vkml"].get(vk_mode), r["torch"].get(torch_mode)
    if not vk or not pt: return None
    return pt["ms"] / vk["ms"], f"{vk['ms']:.2f} ms against {pt['ms']:.2f}", _when(d)


def _eager(gpu):
    "The smallest of the eager steps' ratios (the real models', and the MLP's from the step-path bench)."
    d, rs = _real(gpu)
    v = load(f"vs_torch_next_{gpu}.json")
    got = {c: r["torch"]["eager"]["ms"] / r["vkml"]["eager"]["ms"] for c, r in (rs or {}).items() if "eager" in r["vkml"]}
    got.update({r["case"]: r["ratio"] for r in (v or {}).get("results", []) if r["case"] == "mlp_eager"})
    if not got: return None
    return min(got.values()), ", ".join(f"{c} {x:.2f}" for c, x in got.items()), "; ".join(_when(x) for x in (d, v) if x)


def _kernel(gpu, case):
    d = load(f"kernels_{gpu}.json")
    c = next((c for c in (d or {}).get("cases", []) if c["case"] == case), None)
    if not c: return None
    return c["ratio"], f"{c['vkml_us']:.0f} µs against {c['torch_us']:.0f}", _when(d)


def _attention(gpu):
    "The smallest fwd+bwd ratio over the shapes, per dtype."
    d = _latest(f"attention_{gpu}.json", f"attention_cm_{gpu}.json")
    if not d: return None
    by = {}
    for r in d["rows"]:
        if r.get("causal"): by[r["dtype"]] = min(by.get(r["dtype"], 9e9), r["ratio_fwd_bwd"])
    return min(by.values()), ", ".join(f"{k} {v:.2f}" for k, v in by.items()), _when(d)


def _memory(gpu):
    "The largest peak of a vkml.jit step ÷ PyTorch's eager step's, over the real models."
    d, rs = _real(gpu)
    if not rs: return None
    got = {c: r["vkml"]["jit"]["peak_bytes"] / r["torch"]["eager"]["peak_bytes"] for c, r in rs.items() if "jit" in r["vkml"]}
    return max(got.values()), ", ".join(f"{c} {x:.2f}" for c, x in got.items()), _when(d)


def _per_node(gpu):
    "The host's µs per graph node of an eager step (the step but its wait, over the nodes it makes), the largest."
    d = load(f"eager_phases_{gpu}.json")
    got = {c: r["host_us_per_node"] for c, r in (d or {}).get("cases", {}).items() if "host_us_per_node" in r}
    if not got: return None
    return max(got.values()), ", ".join(f"{c} {x:.1f} µs × {d['cases'][c]['nodes_per_step']:.0f} nodes" for c, x in got.items()), _when(d)


ROWS = [  # (row, goal, at least?, how)
    ("GPT step f32, jit", 1.0, True, lambda g: _step(g, "gpt", "jit", "eager")),
    ("GPT step mixed precision, jit, against PyTorch's bf16 autocast", 0.8, True, lambda g: _step(g, "gpt", "amp_jit", "amp_bf16")),
    ("BatchNorm CNN step f32, jit", 1.0, True, lambda g: _step(g, "cnn_bn", "jit", "eager")),
    ("eager steps (the smallest)", 0.5, True, _eager),
    ("host µs per graph node of an eager step (the largest)", 5.0, False, _per_node),
    ("f32 GEMM 4096³", 0.8, True, lambda g: _kernel(g, "matmul float32 4096^3")),
    ("f16 GEMM 4096³", 0.5, True, lambda g: _kernel(g, "matmul float16 4096^3")),
    ("conv f32 fwd+bwd", 0.8, True, lambda g: _kernel(g, "conv2d fwd+bwd float32 64->64 56x56 batch 32")),
    ("causal attention fwd+bwd (the lowest over shapes, per dtype)", 0.7, True, _attention),
    ("peak memory of a jit step ÷ PyTorch's eager step (the largest)", 1.0, False, _memory),
]


def goal_rows():
    "[(row, goal, {gpu: (value, met, detail, when) or None})]"
    out = []
    for name, goal, at_least, how in ROWS:
        cells = {}
        for g in GPUS:
            got = how(g)
            cells[g] = None if got is None else (got[0], got[0] >= goal if at_least else got[0] <= goal, got[1], got[2])
        out.append((name, ("≥ " if at_least else "≤ ") + f"{goal}", cells))
    return out


def render_goals() -> str:
    rows = goal_rows()
    if not any(c for _, _, cells in rows for c in cells.values()): return ""
    head = ["row", "goal"] + [f"{g.upper()}" for g in GPUS]
    lines = ["## The real-models goals, from the committed results", "",
             ("Each cell is computed from that GPU's committed JSON (its date and commit beside it): ratio = PyTorch's "
             "time ÷ vkML's, same GPU, same process; the memory row is vkML's peak ÷ PyTorch's; the host's µs per node is an eager step's time but its wait for the "
             "device, over the graph nodes the step makes (`bench/eager_phases.py`). A GPU with no file "
             "for a row shows –."), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, goal, cells in rows:
        def cell(c):
            if c is None: return "–"
            v, met, detail, when = c
            return f"**{v:.2f}** {'met' if met else 'missed'} ({detail}; {when})"
        lines.append("| " + " | ".join([name, goal] + [cell(cells[g]) for g in GPUS]) + " |")
    met = {g: sum(1 for _, _, c in rows if c[g] and c[g][1]) for g in GPUS}
    lines += ["", "Met: " + "; ".join(f"{g.upper()} {met[g]} of {sum(1 for _, _, c in rows if c[g])} measured" for g in GPUS), ""]
    return "\n".join(lines)


if __name__ == "__main__": print(render_goals())
