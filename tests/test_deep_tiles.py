"""matmul128's twin with slabs twice as deep (`matmul128d`, and its conv/wgrad forms): chosen only where the device's
shared memory holds it (the H200's 48 KiB; lavapipe's 32 KiB does not), and on whichever kernel this device takes, big
products, convolutions and their weight gradients agree with the CPU (here lavapipe checks the fallback; on a GPU with
the memory the same tests check the twin: `python -m pytest tests/test_deep_tiles.py` on the H200)."""
import importlib.util, math, re
from types import SimpleNamespace as NS

import numpy as np
import pytest

import vkml
import vkml.backends.vulkan.kernels_nn as K
import vkml.nn.functional as F
from conftest import ROOT
from vkml.backends.vulkan import profile
from vkml.core.dtypes import float16, float32, float64
from vkml.core.graph import get_backend

DEV = "vulkan:0"
NEED = K.DEEP_TILES["matmul128"][2]


def on(shared: int):
    "A stand-in tensor on a device with `shared` bytes of shared memory per workgroup."
    return NS(alloc=NS(pool=NS(dev=NS(info=NS(limits={"maxComputeSharedMemorySize": shared})))))


def test_the_twin_is_chosen_only_where_the_shared_memory_holds_it(monkeypatch):
    assert K.deepen("matmul128", float32, on(48 * 1024)) == "matmul128d"
    assert K.deepen("matmul128", float16, on(48 * 1024)) == "matmul128d"
    assert K.deepen("matmul128", float32, on(32 * 1024)) == "matmul128"      # lavapipe
    assert K.deepen("matmul128", float32) == "matmul128"                      # stand-ins: no device, no twin
    assert K.deepen("matmul", float32, on(48 * 1024)) == "matmul"             # only matmul128 has one
    assert K.deepen("matmul128", float64, on(48 * 1024)) == "matmul128"       # float64 has its own tile
    monkeypatch.setattr(K, "DEEP", "off")
    assert K.deepen("matmul128", float32, on(48 * 1024)) == "matmul128"
    assert K.tile_dims("matmul128d") == (128, 128, 16) and K.tile_dims("matmul128") == (128, 128, 8)


def test_the_shared_memory_counted_is_what_the_shader_declares():
    "matmul.comp's two double-buffered slabs of vec4 (f16 and f32 accumulate in f32), padded by one vec4 a row."
    src = (ROOT / "shaders" / "matmul.comp").read_text()
    decls = re.findall(r"^shared FACC4 (\w+)\[2\]\[BK\]\[(B[MN]) / 4 \+ 1\];", src, re.M)
    assert sorted(d[1] for d in decls) == ["BM", "BN"] and len(re.findall(r"^\s*shared ", src, re.M)) == 2
    bm, bn, bk = K.tile_dims("matmul128d")
    assert NEED == sum(2 * bk * (b // 4 + 1) * 16 for b in (bm, bn))
    spec = importlib.util.spec_from_file_location("variants_nn", ROOT / "shaders" / "variants_nn.py")
    variants = importlib.util.module_from_spec(spec); spec.loader.exec_module(variants)
    assert variants.MATMUL_DEEP["matmul128d"][:3] == (bm, bn, bk)


def deep_here() -> bool:
    return get_backend(DEV).device.info.limits["maxComputeSharedMemorySize"] >= NEED


def ran(fn) -> set:
    "The shader names `fn()` dispatched."
    with profile() as p: fn()
    return set(p)


def close(got, want, k: int, rel: float):
    "Within `rel` x sqrt(k) of the largest value (the parity bound of a sum of k products)."
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=0, atol=rel * math.sqrt(k) * np.abs(want).max())


@pytest.mark.vulkan
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_big_product_agrees_with_the_cpu_on_the_kernel_this_device_takes(dtype, monkeypatch):
    monkeypatch.setattr(K, "COOPMAT", "off")          # (float16 would take the tensor cores where the device has them)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(dtype) for s in ((1536, 256), (256, 1536)))   # 144 tiles of 128 x 128
    out = {}
    names = ran(lambda: out.setdefault("c", (vkml.tensor(a, device=DEV) @ vkml.tensor(b, device=DEV)).numpy()))
    sfx = "f32" if dtype == "float32" else "f16"
    vec = "_vkn" if dtype == "float32" and not K.cpu_policy(get_backend(DEV).device.info.type) else ""   # 16-byte loads: GPUs
    assert f"matmul128{'d' if deep_here() else ''}{vec}_{sfx}" in names, names
    close(out["c"], a.astype(np.float64) @ b.astype(np.float64), 256, 1e-5 if dtype == "float32" else 1e-3)


def product_in_layout(runs: str, dtype, seed: int):
    """(1536 x 256) @ (256 x 1536) on the device, A stored transposed where runs[0] is 'm', B where runs[1] is 'k' (144
    blocks of 128 x 128: fewer would idle a big GPU's multiprocessors, and 64 x 64 blocks are taken below 120).
    Returns the shaders it ran, its result and the float64 product."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((1536, 256)).astype(dtype), rng.standard_normal((256, 1536)).astype(dtype)
    ta = vkml.tensor(a if runs[0] == "k" else np.ascontiguousarray(a.T), device=DEV)
    tb = vkml.tensor(b if runs[1] == "n" else np.ascontiguousarray(b.T), device=DEV)
    out = {}
    names = ran(lambda: out.setdefault("c", ((ta if runs[0] == "k" else ta.T) @ (tb if runs[1] == "n" else tb.T)).numpy()))
    return names, out["c"], a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.vulkan
@pytest.mark.parametrize("runs", ["kn", "kk", "mn", "mk"])
def test_each_layout_of_16_byte_loads_agrees_with_the_cpu_on_the_tile_this_device_takes(runs, monkeypatch):
    "The big tile's twins with 16-byte loads (matmul128d_v.. where the shared memory holds it), each pair of runs."
    monkeypatch.setattr(K, "VEC", "on")
    names, got, want = product_in_layout(runs, np.float32, 2)
    assert f"matmul128{'d' if deep_here() else ''}_v{runs}_f32" in names, names
    close(got, want, 256, 1e-5)


def conv_grads(dev, x, w, g):
    "conv2d(x, w) (padding 1) and the gradient of sum(conv2d(x, w) * g) by w."
    xt, wt = vkml.tensor(x, device=dev), vkml.tensor(w, device=dev, requires_grad=True)
    y = F.conv2d(xt, wt, padding=1)
    (y * vkml.tensor(g, device=dev)).sum().backward()
    return y.numpy(), wt.grad.numpy()


@pytest.mark.vulkan
@pytest.mark.parametrize("what", ["forward", "weight_gradient"])
def test_a_convolution_and_its_weight_gradient_agree_with_the_cpu_on_the_kernels_this_device_takes(what):
    rng = np.random.default_rng(1)
    # shapes whose outputs a big GPU fills with tiles of 128 x 128: the forward 8 images x 2 x 8 tiles, the weight
    # gradient (512 x 512·9) 4 x 36 tiles
    n, c, o, hw = (8, 16, 256, 32) if what == "forward" else (1, 512, 512, 8)
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((o, c, 3, 3)) * 0.1).astype(np.float32)
    g = rng.standard_normal((n, o, hw, hw)).astype(np.float32)
    out = {}
    names = ran(lambda: out.setdefault("vk", conv_grads(DEV, x, w, g)))
    kernel = "conv128" if what == "forward" else "wgrad128"
    assert f"{kernel}{'d' if deep_here() else ''}_f32" in names, names
    ref = conv_grads("cpu", x, w, g)
    if what == "forward": close(out["vk"][0], ref[0], c * 9, 1e-5)
    else: close(out["vk"][1], ref[1], n * hw * hw, 1e-5)


def with_coopmat(shared: int):
    "A stand-in tensor on a device with tensor cores (f16 cooperative matrices) and `shared` bytes of shared memory."
    return NS(alloc=NS(pool=NS(dev=NS(info=NS(limits={"maxComputeSharedMemorySize": shared}, features={"coopmat_f16": True})))))


def test_the_tensor_core_blocks_take_slabs_64_deep_only_where_the_shared_memory_holds_them():
    A, B = (0, 0, 0, 4096, 1), (0, 0, 0, 4096, 1)   # both row-major
    assert K.coopmat_variant(float16, 4096, 4096, 4096, 1, A, B, with_coopmat(48 * 1024)) == "matmul_cm128x128s8k64"
    assert K.coopmat_variant(float16, 4096, 4096, 4096, 1, A, B, with_coopmat(32 * 1024)) == "matmul_cm128x256s8"
    assert K.coopmat_variant(float16, 256, 256, 64, 1, A, B, with_coopmat(48 * 1024)) == "matmul_cm64x64s4"
    # the shared memory counted is matmul_cm.comp's: two slabs of max(BM (BK + PAD), BK (BM + PAD)) halves, PAD = 8
    src = (ROOT / "shaders" / "matmul_cm.comp").read_text()
    assert "#define PAD 8" in src and "#define ASH (max(BM * (BK + PAD), BK * (BM + PAD)) / 8)" in src
    bm, bn, bk = K.tile_dims("matmul_cm128x128s8k64")
    assert bm == bn and K.CM_DEEP["matmul_cm128x128s8"][1] == 2 * max(bm * (bk + 8), bk * (bm + 8)) * 2


@pytest.mark.vulkan
@pytest.mark.parametrize("runs", ["kn", "kk", "mn", "mk"])
def test_a_big_f16_product_agrees_with_the_cpu_on_the_tensor_core_tile_this_device_takes(runs):
    "Where the device has tensor cores, each layout of the 64-deep block (lavapipe: the plain f16 tile, checked the same)."
    names, got, want = product_in_layout(runs, np.float16, 3)
    info = get_backend(DEV).device.info
    if info.features.get("coopmat_f16") and info.limits["maxComputeSharedMemorySize"] >= K.CM_DEEP["matmul_cm128x128s8"][1]:
        assert f"matmul_cm128x128s8k64_v{runs}_f16" in names, names
    close(got, want, 256, 1e-3)
