"""Shared pytest set-up for vkML: slow tests, Vulkan tests, and a default per-test time budget.

- `@pytest.mark.slow` tests run only with `--runslow` or `VKML_SLOW=1`.
- `@pytest.mark.vulkan` tests (or tests using the `vulkan` fixture) need a Vulkan device: without one
  they are skipped, or they FAIL when `VKML_REQUIRE_VULKAN=1` (CI sets it, so a broken driver is never
  mistaken for a green run).
- Every test gets a 300 s budget from pytest-timeout unless `--timeout` or a `timeout` mark says otherwise.
"""
import os, subprocess, sys, functools, tempfile
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
# The suite checks the kernels a GPU runs, on every device: lavapipe (a CPU device) would otherwise choose its own
# kernels (kernels_nn.cpu_untiled). tests/test_cpu_tiles.py checks lavapipe's own choices with "auto".
os.environ.setdefault("VKML_TILE_POLICY", "gpu")
DEFAULT_TIMEOUT = 300  # seconds per test; a notebook or a sweep that needs more is a bug or belongs behind --runslow


def env_flag(name: str) -> bool:
    "True when the environment variable `name` is set to something other than '', '0', 'false' or 'no'."
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run tests marked slow and notebook cells flagged `#| slow` (or set VKML_SLOW=1)")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long run, only with --runslow or VKML_SLOW=1")
    config.addinivalue_line("markers", "vulkan: needs a Vulkan device (skipped without one; fails with VKML_REQUIRE_VULKAN=1)")
    # Validation messages of the processes the tests start (notebooks, the demo, scripts) land in one file,
    # which the autouse fixture below reads as well; a nested pytest session keeps its parent's file.
    if env_flag("VKML_VALIDATION") and not os.environ.get("VKML_VALIDATION_LOG"):
        fd, path = tempfile.mkstemp(prefix="vkml-validation-", suffix=".log")
        os.close(fd)
        os.environ["VKML_VALIDATION_LOG"] = path
    # pytest-timeout reads its settings in its own pytest_configure, which runs after this one (tryfirst).
    try: ini = config.getini("timeout")
    except ValueError: return  # pytest-timeout is not installed
    if getattr(config.option, "timeout", None) is None and not ini and "PYTEST_TIMEOUT" not in os.environ:
        config.option.timeout = DEFAULT_TIMEOUT


def run_slow(config) -> bool:
    return config.getoption("--runslow") or env_flag("VKML_SLOW")


# A child process does the probing: a driver that crashes or hangs must not take the test session with it.
_PROBE = r"""
import sys
try:
    import vkml.backends.vulkan as vkv
    has_api = hasattr(vkv, "devices")
except Exception:
    has_api = False
if has_api:
    try:
        devs = list(vkv.devices())
    except Exception as e:
        print(f"vkml.backends.vulkan.devices() raised {type(e).__name__}: {e}"); sys.exit(0)
    if devs: print("OK", getattr(devs[0], "name", devs[0]))
    else: print("vkml.backends.vulkan.devices() found no Vulkan device")
    sys.exit(0)
try:
    import vulkan as vk
except Exception as e:
    print(f"cannot import the `vulkan` package ({type(e).__name__}: {e}); install libvulkan1"); sys.exit(0)
try:
    app = vk.VkApplicationInfo(pApplicationName="vkml-probe", apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))
    inst = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
    phys = vk.vkEnumeratePhysicalDevices(inst)
    names = [vk.vkGetPhysicalDeviceProperties(p).deviceName for p in phys]
    vk.vkDestroyInstance(inst, None)
except Exception as e:
    print(f"no Vulkan driver ({type(e).__name__}: {e}); install mesa-vulkan-drivers for lavapipe"); sys.exit(0)
print("OK", names[0]) if names else print("the Vulkan loader found no physical device")
"""


@functools.lru_cache(maxsize=None)
def vulkan_status() -> tuple:
    "(available, message): whether a Vulkan device can be used here, probed once per session in a subprocess."
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return False, "probing for a Vulkan device timed out after 120 s"
    out = (r.stdout.strip().splitlines() or [""])[-1]
    if r.returncode != 0:
        return False, f"the Vulkan probe crashed (exit {r.returncode}): {r.stderr.strip()[-500:]}"
    if out.startswith("OK"): return True, out[3:]
    return False, out or "no Vulkan device"


def require_vulkan():
    "Skip the calling test when no Vulkan device exists; fail instead under VKML_REQUIRE_VULKAN=1."
    ok, msg = vulkan_status()
    if ok: return
    if env_flag("VKML_REQUIRE_VULKAN"):
        pytest.fail(f"VKML_REQUIRE_VULKAN=1 but no Vulkan device: {msg}", pytrace=False)
    pytest.skip(f"no Vulkan device: {msg}")


def pytest_collection_modifyitems(config, items):
    if not run_slow(config):
        skip = pytest.mark.skip(reason="slow: run with --runslow or VKML_SLOW=1")
        for it in items:
            if "slow" in it.keywords: it.add_marker(skip)
    # The docs test reuses the notebooks that test_notebooks.py executed, so it runs after them.
    items.sort(key=lambda it: Path(str(it.fspath)).name == "test_docs.py")


def pytest_runtest_setup(item):
    if item.get_closest_marker("vulkan") is not None: require_vulkan()


def _log_size(log) -> int:
    try: return os.path.getsize(log)
    except OSError: return 0

@pytest.fixture(autouse=True)
def no_validation_messages():
    """With VKML_VALIDATION=1 the Khronos layer watches every Vulkan call: any message it reports fails the test,
    in this process or in one the test started (they append to VKML_VALIDATION_LOG)."""
    dev = sys.modules.get("vkml.backends.vulkan.device")
    if dev is not None: dev.clear_validation_messages()
    log = os.environ.get("VKML_VALIDATION_LOG")
    start = _log_size(log) if log else 0
    yield
    dev = sys.modules.get("vkml.backends.vulkan.device")
    msgs = []
    if dev is not None:
        msgs = list(dev.validation_messages())
        dev.clear_validation_messages()
    if log and _log_size(log) > start:
        with open(log, "rb") as f: f.seek(start); msgs += f.read().decode(errors="replace").splitlines()
    assert not msgs, "the validation layer reported:\n" + "\n".join(dict.fromkeys(msgs[:10]))


@pytest.fixture
def vulkan():
    "The device name 'vulkan' for a test that needs a Vulkan device (skips or fails as the `vulkan` mark does)."
    require_vulkan()
    return "vulkan"


@pytest.fixture(scope="session")
def executed_nbs(tmp_path_factory) -> Path:
    "Where test_notebooks.py leaves the executed notebooks, for test_docs.py to render without running them again."
    return tmp_path_factory.mktemp("executed_nbs")
