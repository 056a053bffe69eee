"""The real-models goals (ratio = PyTorch's time ÷ vkML's, same GPU, same process), each row computed from the
committed bench/results/*.json of each GPU; a row with no file for a GPU says so. Used by render_results.py:
    python bench/render_goals.py    # print the section
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vkml.lab.goals import GPUS, goal_rows, missed_notes            # the rows, computed in nbs/43_performance.ipynb


def render_goals() -> str:
    rows = goal_rows()
    if not any(c for *_, cells in rows for c in cells.values()): return ""
    head = ["row", "goal"] + [f"{g.upper()}" for g in GPUS]
    lines = ["## The real-models goals, from the committed results", "",
             ("Each cell is computed from that GPU's committed JSON (its date and commit beside it): ratio = PyTorch's "
             "time ÷ vkML's, same GPU, same process; the memory row is vkML's peak ÷ PyTorch's; the host's µs per node is an eager step's time "
             "but its wait for the device, over the graph nodes the step makes (`bench/eager_phases.py`). A GPU with "
             "no file for a row shows –. The rows are computed by `vkml.lab.goals` (nbs/43_performance.ipynb, which plots them)."), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, goal, at_least, cells in rows:
        def cell(c):
            if c is None: return "–"
            v, met, detail, when = c
            return f"**{v:.2f}** {'met' if met else 'missed'} ({detail}; {when})"
        lines.append("| " + " | ".join([name, ("≥ " if at_least else "≤ ") + f"{goal}"] + [cell(cells[g]) for g in GPUS]) + " |")
    met = {g: sum(1 for *_, c in rows if c[g] and c[g][1]) for g in GPUS}
    lines += ["", "Met: " + "; ".join(f"{g.upper()} {met[g]} of {sum(1 for *_, c in rows if c[g])} measured" for g in GPUS), ""]
    notes = missed_notes(rows)
    if notes:
        lines += [("What limits each row that misses, the evidence (files under `bench/results/`) and what was tried "
                   "(`vkml.lab.goals.WHY_MISSED`; nbs/43_performance.ipynb fails when a missed row has no note):"), ""]
        for name, gpus, why in notes:
            if why is None: lines.append(f"- **{name}** (missed on {', '.join(g.upper() for g in gpus)}): not analysed yet."); continue
            ev = ", ".join(f"`{f}`" for f in why["evidence"])
            lines.append(f"- **{name}** (missed on {', '.join(g.upper() for g in gpus)}): {why['limit']} Evidence: {ev}. "
                         f"Tried: {why['tried']}")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__": print(render_goals())
