"""Time the demo's training on each device and write the figures the limitations page renders.

    python bench/demo_timing.py --devices cpu vulkan --out bench/results/demo_<machine>.json

One record per device: seconds of training, steps, seconds per step, final test accuracy. Timings
never go into tests; the limitations page reads the committed JSON ("when a GPU wins").
"""
import argparse, datetime, json, os, platform, subprocess, sys, tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vkml, vkml.demo


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", nargs="+", default=["cpu", "vulkan"])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    results = []
    for dev in a.devices:
        with tempfile.TemporaryDirectory() as d:
            r = vkml.demo.main(["--device", dev, "--epochs", str(a.epochs), "--model", a.model, "--out", d, "--no-progress"])
        steps = len(r["hist"]["step_loss"])
        rec = dict(device=dev, model=a.model, epochs=a.epochs, train_s=r["train_s"], setup_s=r["setup_s"],
                   test_acc=r["test_acc"], steps=steps, step_s=r["train_s"] / steps)
        results.append(rec)
        print(json.dumps(rec))
    name = "unknown"
    try: name = vkml.backends.vulkan.devices()[vkml.backends.vulkan.default_index()].name
    except Exception: pass
    try: commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
    except Exception: commit = "unknown"
    doc = dict(date=datetime.date.today().isoformat(), device=name, host=platform.node(), commit=os.environ.get("VKML_COMMIT", commit),
               command=" ".join(["python", "bench/demo_timing.py"] + sys.argv[1:]), results=results)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
