"""Which tile, split along K or not, for the products that give a big GPU few tiles: the weight gradients
(X^T @ dY) and vocabulary head of nanoGPT's shape, and the MLP benchmark's products. Every tile is timed
with and without the split along K that `split_k` would choose, each policy in a fresh process, beside
PyTorch (TF32 off):
    python bench/matmul_skinny.py [--out FILE]"""
import json, subprocess, sys, datetime

# (M, K, N, what): C (M x N) = A (M x K) @ B (K x N); A is a transposed view, as in a weight gradient
SHAPES = [(384, 8192, 1152, "gpt qkv dW"), (384, 8192, 384, "gpt proj dW"), (384, 8192, 1536, "gpt fc dW"),
          (1536, 8192, 384, "gpt mlp-proj dW"), (384, 8192, 65, "gpt head dW"), (8192, 384, 65, "gpt head"),
          (784, 512, 1024, "mlp dW1"), (1024, 512, 1024, "mlp dW2"), (512, 1024, 1024, "mlp h2"),
          (512, 784, 1024, "mlp h1")]
TILES = ["matmul128", "matmul128x64", "matmul64x128", "matmul"]
if "--small" in sys.argv: SHAPES = [(48, 1024, 144, "small dW")]


def child(tile, split):
    import numpy as np, vkml
    import vkml.backends.vulkan.kernels_nn as K
    from vkml.backends.vulkan import profile
    K._pick = lambda tiles, M, N, batch, fallback, K=0: tile   # float32 only: the tensor-core tiles never come here
    if not split: K.split_k = lambda *a, **k: 1
    out = {}
    for M, KK, N, what in SHAPES:
        rng = np.random.default_rng(0)
        a = vkml.tensor(rng.standard_normal((KK, M), dtype=np.float32), device="vulkan").t()
        b = vkml.tensor(rng.standard_normal((KK, N), dtype=np.float32), device="vulkan")
        try:
            for _ in range(3): (a @ b).numpy()
            with profile() as p:
                for _ in range(10): (a @ b).realize()
            out[what] = round(sum(v["total_us"] for v in p.values()) / 10, 1)
        except Exception as e: out[what] = repr(e)[:120]
    print(json.dumps(out))

def torch_times():
    import torch
    if not torch.cuda.is_available(): return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    res = {}
    for M, KK, N, what in SHAPES:
        a = torch.randn(KK, M, device="cuda").t(); b = torch.randn(KK, N, device="cuda")
        for _ in range(3): a @ b
        torch.cuda.synchronize(); e0, e1 = torch.cuda.Event(True), torch.cuda.Event(True)
        e0.record()
        for _ in range(20): a @ b
        e1.record(); torch.cuda.synchronize()
        res[what] = round(e0.elapsed_time(e1) / 20 * 1e3, 1)
    return res

def default_choice():
    import vkml.backends.vulkan.kernels_nn as K
    return {what: [K.matmul_variant(M, N, 1, KK), K.split_k(K.matmul_variant(M, N, 1, KK), M, N, KK, 1)] for M, KK, N, what in SHAPES}

if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "child": child(sys.argv[2], sys.argv[3] == "split"); sys.exit()
    result = dict(date=datetime.date.today().isoformat(), shapes=SHAPES, us={}, chosen=default_choice())
    for tile in TILES:
        for split in ("split", "whole"):
            r = subprocess.run([sys.executable, __file__, "child", tile, split] + sys.argv[1:], capture_output=True, text=True, timeout=300)
            result["us"][f"{tile}/{split}"] = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else r.stderr[-600:]
            print(tile, split, result["us"][f"{tile}/{split}"], flush=True)
    try: result["torch_us"] = torch_times()
    except Exception as e: result["torch_us"] = repr(e)
    print("torch", result["torch_us"]); print("chosen", result["chosen"])
    if "--out" in sys.argv: open(sys.argv[sys.argv.index("--out") + 1], "w").write(json.dumps(result, indent=1))
