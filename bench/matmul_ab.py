"""An f32 tile variant against the shipped one: built from shaders/matmul.comp on this machine, registered in place of
the shipped kernel (`register_shader`), checked against numpy, then timed beside PyTorch (TF32 off). One variant a process
(a pipeline is made once); alternate them in the shell to compare:

    for v in base frag wide widefrag base frag; do python bench/matmul_ab.py $v --out _ab; done

On a GPU the variant replaces `matmul128d` (the tile the large f32 products take); on lavapipe, `matmul128` with 8-deep
slabs (forced, with 16-byte loads), for the parity check alone. Variants (matmul.comp's defines):
    base      the shipped kernel
    frag      FRAG2: the fragments double-buffered in registers, the same 128 x 128 tile (same sums in the same order)
    wide      a 128 x 256 tile, 8 x 16 outputs a thread, 8-deep slabs (25 KiB of shared memory)
    widefrag  both
A wider tile than the host's plan is still right: the kernel derives its tiles from its own BN and skips the workgroups
past them. Timings never go in tests; the figures go to --out as JSON.
"""
import argparse, json, os, sys, tempfile
from pathlib import Path
import numpy as np
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "shaders")); sys.path.insert(0, str(ROOT / "bench"))
import vkml.backends.vulkan as vkv
import vkml.backends.vulkan.kernels_nn as kn
from vkml.backends.vulkan.pipelines import register_shader
from vkml.frontend.tensor import tensor, apply
from vkml.core.ops import Op

VARIANTS = {"base": None,
            "frag": dict(BM=128, BN=128, BK=16, TM=8, TN=8, FRAG2=1),
            "wide": dict(BM=128, BN=256, BK=8, TM=8, TN=16),
            "widefrag": dict(BM=128, BN=256, BK=8, TM=8, TN=16, FRAG2=1)}


def install(variant: str, tile: str, bk: int | None) -> list:
    "Compile `variant` in its four layouts and register each as `<tile>_v<runs>_f32`; the names whose words changed."
    from build import compile_variant
    from variants_nn import VEC_RUNS     # (the shipped tiles' layouts: A along k or m, B along n or k)
    from vkml.backends.vulkan.pipelines import load_spirv
    d = VARIANTS[variant]
    if d is None: return []
    changed = []
    d = {**d, **({"BK": bk} if bk else {})}
    with tempfile.TemporaryDirectory() as tmp:
        for runs in (ra + rb for ra in "km" for rb in "nk"):
            name = f"{tile}_v{runs}_f32"
            defs = {"T_F32": "1", **{k: str(v) for k, v in d.items()}, "VEC_A": VEC_RUNS[runs[0]], "VEC_B": VEC_RUNS[runs[1]]}
            words = compile_variant(name, "matmul.comp", defs, Path(tmp)).read_bytes()
            if words != load_spirv(name): changed.append(name)
            register_shader(name, words)
    return changed


def parity(rng) -> int:
    "Products over shapes and the four layouts against numpy in float64: the count outside the √k-scaled bound."
    bad = 0
    for M, K, N in [(256, 256, 256), (130, 70, 260), (1000, 384, 1152), (512, 1536, 384), (257, 33, 129)]:
        for ta in (False, True):
            for tb in (False, True):
                a = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
                b = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
                ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
                va, vb = tensor(a, device="vulkan"), tensor(b, device="vulkan")
                got = ((va.T if ta else va) @ (vb.T if tb else vb)).numpy()
                err = np.abs(got - ref).max() / (np.abs(ref).max() * np.sqrt(K))
                if not err < 1e-5:
                    bad += 1
                    print(f"  parity {M}x{K}x{N} a.T={ta} b.T={tb}: {err:.2e} outside 1e-5")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variant", choices=list(VARIANTS))
    ap.add_argument("--out", default=None, help="a folder: the figures go to <out>/matmul_ab_<variant>_<pid>.json")
    args = ap.parse_args()
    dev = vkv.get_device(vkv.default_index())
    gpu = dev.info.type != "cpu"
    if gpu: replaced = install(args.variant, "matmul128d", None)
    else:
        kn.FORCE_TILE, kn.VEC = "matmul128", "on"
        replaced = install(args.variant, "matmul128", 8)
    rng = np.random.default_rng(0)
    with vkv.profile() as prof: bad = parity(rng)
    rows = {}
    if gpu:
        from bench_kernels import vk_time, torch_time, _torch
        torch, _ = _torch()
        for M, K, N in [(4096, 4096, 4096), (8192, 384, 1152), (8192, 384, 1536), (8192, 1536, 384)]:
            a = tensor(rng.standard_normal((1, M, K)).astype(np.float32), device="vulkan")
            b = tensor(rng.standard_normal((1, K, N)).astype(np.float32), device="vulkan")
            us, names = vk_time(lambda a=a, b=b: [apply(Op.MATMUL, a, b)], 7)
            t_us = None
            if torch is not None:
                ta, tb = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
                t_us = torch_time(torch, lambda ta=ta, tb=tb: ta @ tb, 7)
            rows[f"{M}x{K}x{N}"] = dict(vkml_us=us, torch_us=t_us, shaders=names)
            print(f"{args.variant:<9} {M}x{K}x{N}: {us:8.1f} us, {2.0 * M * N * K / us / 1e6:5.1f} TFLOP/s {names}"
                  + (f"; PyTorch {t_us:8.1f} us, ratio {t_us / us:.3f}" if t_us else ""))
    print(f"{args.variant}: {bad} products outside the parity bound on {dev.info.name}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"matmul_ab_{args.variant}_{os.getpid()}.json").write_text(json.dumps(
            dict(variant=args.variant, defines=VARIANTS[args.variant], device=dev.info.name, parity_failures=bad,
                 replaced=replaced, parity_shaders=sorted(k for k in prof if k.startswith("matmul")),
                 commit=os.environ.get("VKML_COMMIT"), rows=rows), indent=1) + "\n")
    sys.exit(1 if bad else 0)


if __name__ == "__main__": main()
