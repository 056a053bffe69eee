"""lavapipe reads device memory directly; a discrete GPU (the H200) copies results back through a
readback buffer instead. `VKML_DISCRETE_PATHS=1` makes lavapipe take the GPU's paths, so CI checks
that a training step stays one submission there too (the H200 found the case this guards)."""
import os, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.vulkan
def test_runtime_demo_and_jit_suites_pass_on_the_discrete_gpu_paths(vulkan):
    env = dict(os.environ, VKML_DISCRETE_PATHS="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/test_vk_runtime.py", "tests/test_demo.py", "tests/test_autograd_vulkan.py", "tests/test_jit.py",
                        "tests/test_reliability.py", "tests/test_cuts.py", "tests/test_submit_parts.py", "tests/test_upload_copy.py"],   # (index checks read through recorded readbacks, as on the H200)
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
