"""bench/matmul_ab.py's f32 tile variants (an experiment for the GPU: no shipped kernel uses them yet) are right: each is
built from shaders/matmul.comp, put in place of the shipped tile, and agrees with numpy over shapes and the four layouts.
On lavapipe it replaces `matmul128` (8-deep slabs). Timings are never checked."""
import json, os, subprocess, sys
from pathlib import Path
import pytest

pytestmark = pytest.mark.vulkan
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("variant", ["frag", "wide", "widefrag"])
def test_a_tile_variant_agrees_with_numpy(variant, tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "matmul_ab.py"), variant, "--out", str(tmp_path)],
                       check=False, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (f,) = tmp_path.glob(f"matmul_ab_{variant}_*.json")
    got = json.loads(f.read_text())
    assert got["parity_failures"] == 0
    # the variant itself ran: its four layouts differ from the shipped words, and products took each of them (the
    # shapes whose runs are not multiples of 4 take the tile without 16-byte loads, which stays the shipped one)
    assert len(got["replaced"]) == 4 and set(got["replaced"]) <= set(got["parity_shaders"]), got
