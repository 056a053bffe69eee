"""A pytest run's log as the JSON that bench/render_results.py renders (used by the bench/h200_*.sh scripts):
    python3 bench/tests_json.py OUTDIR EXIT_CODE SECONDS NAME [--layer DEB] [--oom FILE]
reads OUTDIR/tests.log, OUTDIR/gpu.txt and $TESTS (the command) and writes OUTDIR/NAME. With --layer the
run was under the validation layer: its messages are counted and the out-of-memory check's outcome joined."""
import argparse, datetime, json, os, re

ap = argparse.ArgumentParser()
ap.add_argument("out"); ap.add_argument("rc", type=int); ap.add_argument("seconds", type=int); ap.add_argument("name")
ap.add_argument("--layer", default=None); ap.add_argument("--oom", default=None)
a = ap.parse_args()
log = open(f"{a.out}/tests.log").read().splitlines()
summary = next((l for l in reversed(log) if re.search(r"\d+ (passed|failed)", l)), log[-1] if log else "")
counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
r = dict(date=datetime.date.today().isoformat(), device=open(f"{a.out}/gpu.txt").read().strip(),
         commit=os.environ.get("VKML_COMMIT", "unknown"), command=os.environ["TESTS"])
if a.layer is not None: r["validation_layer"] = os.path.basename(a.layer) or None
r.update(exit_code=a.rc, seconds=a.seconds, summary=summary.strip("= "), **counts)
if a.layer is not None: r["validation_messages"] = sum("validation layer" in l.lower() for l in log)
r["failures"] = [l for l in log if l.startswith("FAILED") or l.startswith("ERROR")][:50]
if a.layer is None: r["skips"] = [l for l in log if l.startswith("SKIPPED")]
else: r["oom_ok"] = json.load(open(a.oom)).get("ok") if a.oom and os.path.exists(a.oom) else None
json.dump(r, open(f"{a.out}/{a.name}", "w"), indent=1)
