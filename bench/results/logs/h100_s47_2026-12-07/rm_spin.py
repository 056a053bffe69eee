"Run bench/real_models.py with the host's fence polling on a GPU set to SPIN seconds (an A/B of the wait policy)."
import os, sys, runpy
sys.path.insert(0, '.')
import vkml.backends.vulkan.device as D
D.Device.GPU_SPIN_S = float(os.environ["SPIN"])
sys.argv = ["bench/real_models.py"] + sys.argv[1:]
runpy.run_path("bench/real_models.py", run_name="__main__")
