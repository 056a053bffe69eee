"""bench/RESULTS.md is rendered from the committed bench/results/*.json: a figure typed into it by hand fails here."""
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_results_md_is_rendered_from_the_json_files():
    r = subprocess.run([sys.executable, "bench/render_results.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
