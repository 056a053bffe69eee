"""The tensor-core attention's workgroup shapes, side by side on one GPU (a measuring tool, not a test):
    python bench/attention_cm_sweep.py [--shapes 32,6,256,64 8,12,1024,64] [--configs '' 2x64 4x32]
For each (subgroups x block rows) build (`VKML_ATTENTION_CM`, here `kernels_nn.ATTENTION_CM_TRIAL`; '' is the shipped
one): GPU ms of the causal f16 forward and forward + backward (bench/attention.py's timing), each kernel's µs, and the
largest difference of its results from the shipped shape's (they differ only in summation order). The trial shapes
built are shaders/variants_nn.py's trial rows; another needs a row there, then `python shaders/build.py`. A shape whose
shared memory the device lacks is never chosen (kernels_nn.attention_cm_shared): the shipped kernels run instead."""
import argparse, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[1])); sys.path.insert(0, str(Path(__file__).resolve().parent))
import vkml, vkml.backends.vulkan, vkml.frontend.tensor
import vkml.backends.vulkan.kernels_nn as kn
import vkml.nn.functional as F
from vkml.frontend.autograd import grad
import attention as A

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["32,6,256,64", "8,12,1024,64"])
    ap.add_argument("--configs", nargs="+", default=["", "2x64", "4x32"])
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args(argv)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    for sh in a.shapes:
        shape = tuple(int(x) for x in sh.split(","))
        rng = np.random.default_rng(0)
        arrs = [rng.standard_normal(shape).astype(np.float16) for _ in range(4)]
        ref = None
        for cfg in a.configs:
            kn.ATTENTION_CM_TRIAL = cfg or None
            try:
                q, k, v = (vkml.tensor(x, device="vulkan", requires_grad=True) for x in arrs[:3])
                g = vkml.tensor(arrs[3], device="vulkan")
                o = fn(q, k, v)
                res = [o.numpy().astype(np.float32), *(t.numpy().astype(np.float32) for t in grad(o, (q, k, v), g))]
                diff = 0.0 if ref is None else max(float(np.abs(x - y).max()) for x, y in zip(res, ref))
                ref = ref or res
                row = A.vk_rows(shape, np.float16, a.reps, fn, "f")
                outs = [t for _ in range(a.reps) for t in grad(fn(q, k, v), (q, k, v), g)]
                with vkml.backends.vulkan.profile() as prof:   # µs a step of each kernel
                    vkml.frontend.tensor.realize(*outs); outs[-1].numpy()
                each = {n: round(e["total_us"] / a.reps, 1) for n, e in prof.items()}
                print(f"{sh} cfg={cfg or 'shipped'}: fwd {row['f_fwd_ms']:.3f} ms, fwd+bwd {row['f_fwd_bwd_ms']:.3f} ms, "
                      f"max diff {diff:.3g}, µs each {each}", flush=True)
            except vkml.VkmlError as e:   # (a trial shape the device refuses: too much shared memory)
                print(f"{sh} cfg={cfg}: failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
    kn.ATTENTION_CM_TRIAL = None

if __name__ == "__main__": main()
