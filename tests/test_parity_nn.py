"""Vulkan against the CPU oracle for the nn kernels: matmul, conv2d, conv_transpose2d, im2col, col2im,
max/avg pooling, max-pool backward, gather, index_add.

Each case builds the same graph (graph ops through `apply`, views included) on "cpu" and on "vulkan".
Bounds (tests/oracle.py, the parity bound): a contraction over k terms may differ by
    atol + 1e-5 * sqrt(k) * sum|terms|               (f32; sum|terms| = the op applied to |inputs|)
and f16 results, rounded to f16 from an f32 accumulator on both sides, by one more f16 rounding:
    + 2^-10 * |cpu|.
Window maxima, unfold, gather and integer scatter-adds are exact; index_add and every kernel give the
same bits when realized twice (no atomics anywhere). Kept to about a minute on lavapipe.
"""
import re
import numpy as np
import pytest
from vkml.frontend.tensor import tensor, apply
from vkml.core.ops import Op, SHAPE_RULES
import vkml.core.dtypes as D
import oracle

pytestmark = pytest.mark.vulkan


# (the validation-message check is the autouse fixture in conftest.py)
RNG = np.random.default_rng(20261129)
F16_ULP = 2.0 ** -10
DEVS = ("cpu", "vulkan")


def rnd(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# views built in the graph (no copies on Vulkan: the kernels read them through strides)
def perm(t, p): return apply(Op.PERMUTE, t, arg=tuple(p))
def expand(t, shape): return apply(Op.EXPAND, t, shape=tuple(shape), dtype=t.dtype)
def sl(t, *s):
    "SLICE with python-slice-like (start, stop, step) per axis, normalised here."
    arg = []
    for (start, stop, step), n in zip(s, t.shape):
        if step < 0 and stop is None: stop = -1
        arg.append((start, n if stop is None else stop, step))
    return apply(Op.SLICE, t, arg=tuple(arg))


def both(build, *arrays):
    "`build(*tensors)` on each device: (cpu result, vulkan result)."
    return tuple(build(*[tensor(a, device=d) for a in arrays]).numpy() for d in DEVS)


def check_sum(build, arrays, k, abs_arrays=None):
    "vk against cpu within the contraction bound; sum|terms| is the cpu op on |inputs|."
    cpu, vk = both(build, *arrays)
    assert vk.shape == cpu.shape and vk.dtype == cpu.dtype, (vk.shape, cpu.shape, vk.dtype, cpu.dtype)
    if cpu.size == 0: return cpu, vk
    absin = abs_arrays if abs_arrays is not None else [np.abs(a) if a.dtype.kind == "f" else a for a in arrays]
    terms = build(*[tensor(a) for a in absin]).numpy().astype(np.float64)
    c = cpu.astype(np.float64)
    tol = 1e-6 + 1e-5 * np.sqrt(max(k, 1)) * terms
    if cpu.dtype == np.float16: tol = tol + F16_ULP * np.abs(c) + 6e-8
    oracle.assert_close(vk, cpu, bound=tol)
    return cpu, vk


def check_exact(build, *arrays):
    cpu, vk = both(build, *arrays)
    assert vk.shape == cpu.shape and vk.dtype == cpu.dtype
    np.testing.assert_array_equal(vk, cpu)   # NaNs compare equal here
    return cpu, vk



@pytest.mark.parametrize("parts", [2, 5, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_thread_per_output_adds_a_split_products_slabs_as_the_cols_kernel_does(parts, dtype, monkeypatch):
    "Up to 8 slabs, reduce_slabs (a thread per output, in order) gives the bits of reduce_cols_final (8 slices in order)."
    import vkml.backends.vulkan as vkv
    import vkml.backends.vulkan.kernels_nn as kn
    monkeypatch.setattr(kn, "split_k", lambda name, M, N, K, nb: parts)
    a, b = rnd(1, 96, 256, dtype=dtype), rnd(1, 256, 80, dtype=dtype)   # (tiled: split K on the z grid)
    a[0, 3, :8] = -0.0; b[0, :8, 5] = -0.0                          # (a zero product: the sign of 0 + -0 too)
    got = {}
    for most, summed in [(kn.SLAB_PARTS, "reduce_slabs_"), (0, "reduce_cols_final_")]:
        monkeypatch.setattr(kn, "SLAB_PARTS", most)
        with vkv.profile() as prof: got[summed] = check_sum(lambda x, y: apply(Op.MATMUL, x, y), [a, b], 256)[1]
        assert any(n.startswith(summed) for n in prof), sorted(prof)
    assert got["reduce_slabs_"].tobytes() == got["reduce_cols_final_"].tobytes()

FLOATS = [np.float32, np.float16]

# ------------------------------------------------------------------------------------------ matmul

MM_SHAPES = [(1, 1, 1, 1), (2, 3, 5, 7), (1, 0, 4, 3), (2, 4, 0, 3), (0, 2, 2, 2), (3, 65, 33, 129),
             (1, 1, 300, 1), (2, 70, 1, 67), (1, 40, 17, 30)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bmkn", MM_SHAPES)
def test_matmul(bmkn, dtype):
    B, M, K, N = bmkn
    check_sum(lambda a, b: apply(Op.MATMUL, a, b), [rnd(B, M, K, dtype=dtype), rnd(B, K, N, dtype=dtype)], K)


@pytest.mark.parametrize("variant", ["matmul_small", "matmul", "matmul128x64", "matmul64x128", "matmul128", "matmul16x64",
                                     "matmul32x64"])
def test_matmul_each_variant(variant, monkeypatch):
    "Every tile variant on ragged sizes (forced), each also with K split over its z grid."
    import vkml.backends.vulkan.kernels_nn as kn
    monkeypatch.setattr(kn, "FORCE_TILE", variant)
    assert kn.matmul_variant(130, 131, 1) == variant
    for B, M, K, N in [(2, 130, 37, 131), (1, 129, 16, 257), (1, 1, 3, 1), (2, 70, 20, 68)]:   # N % 4 == 0: vec4 stores of C
        for dt in FLOATS:
            check_sum(lambda a, b: apply(Op.MATMUL, a, b), [rnd(B, M, K, dtype=dt), rnd(B, K, N, dtype=dt)], K)
    if variant != "matmul_small":   # split K: chunks of 48 terms (3 slabs of 16, 6 of 8), an uneven last one
        monkeypatch.setattr(kn, "FORCE_TILE", None)
        monkeypatch.setattr(kn, "matmul_variant", lambda M, N, batch, K=0: variant)
        monkeypatch.setattr(kn, "split_k", lambda name, M, N, K, nb: -(-K // 48))
        for dt in FLOATS:
            for B, M, K, N in [(2, 70, 130, 67), (1, 5, 200, 9)]:
                check_sum(lambda a, b: apply(Op.MATMUL, a, b), [rnd(B, M, K, dtype=dt), rnd(B, K, N, dtype=dt)], K)


@pytest.mark.parametrize("variant", ["matmul", "matmul128x64", "matmul64x128", "matmul128"])
def test_matmul_16_byte_loads_each_layout(variant, monkeypatch):
    """The twins that read a slab 4 values at a time (`<tile>_v<a><b>`, forced on here: lavapipe keeps the plain tiles),
    on each pair of runs (A along k or m, B along n or k), batched, broadcast and with K split into chunks of 48;
    beside them operands that miss a condition (a ragged extent, an odd offset) take the plain tile."""
    import vkml.backends.vulkan.kernels_nn as kn
    import vkml.backends.vulkan as vkv
    monkeypatch.setattr(kn, "FORCE_TILE", variant)
    monkeypatch.setattr(kn, "VEC", "on")
    T = (0, 2, 1)
    mm = lambda a, b: apply(Op.MATMUL, a, b)
    cases = [  # (build, arrays, k, the runs, or "" for the plain tile)
        (mm, [rnd(2, 68, 36), rnd(2, 36, 132)], 36, "kn"),
        (lambda a, b: mm(perm(a, T), b), [rnd(2, 36, 68), rnd(2, 36, 132)], 36, "mn"),
        (lambda a, b: mm(a, perm(b, T)), [rnd(2, 68, 36), rnd(2, 132, 36)], 36, "kk"),
        (lambda a, b: mm(perm(a, T), perm(b, T)), [rnd(1, 40, 132), rnd(1, 68, 40)], 40, "mk"),
        (lambda a, b: mm(a, expand(b, (3, 36, 68))), [rnd(3, 33, 36), rnd(1, 36, 68)], 36, "kn"),   # broadcast B, ragged M
        (lambda a, b: mm(perm(a, T), b), [rnd(2, 36, 67), rnd(2, 36, 132)], 36, ""),                # M % 4 != 0 along A's run
        (lambda a, b: mm(a, perm(b, T)), [rnd(1, 68, 38), rnd(1, 132, 38)], 38, ""),                # K % 4 != 0
        (lambda a, b: mm(a[:, :, 1:], b), [rnd(1, 68, 37), rnd(1, 36, 132)], 36, ""),               # A's offset 1
    ]
    for dt in FLOATS:
        for build, arrays, k, runs in cases:
            with vkv.profile() as prof:
                check_sum(build, [x.astype(dt) for x in arrays], k)
            want = f"{variant}_v{runs}_f32" if runs and dt == np.float32 else f"{variant}_f"   # _f32 or _f16
            assert any(name.startswith(want) for name in prof), (want, sorted(prof))
    monkeypatch.setattr(kn, "FORCE_TILE", None)
    monkeypatch.setattr(kn, "DEEP", "off")   # (a GPU would take matmul128's deeper twin: test_deep_tiles checks that one)
    monkeypatch.setattr(kn, "matmul_variant", lambda M, N, batch, K=0: variant)
    monkeypatch.setattr(kn, "split_k", lambda name, M, N, K, nb: -(-K // 48))   # chunks of 48: a vector never straddles two
    for build, arrays, runs in [(mm, [rnd(1, 36, 200), rnd(1, 200, 68)], "kn"),
                                (lambda a, b: mm(perm(a, T), perm(b, T)), [rnd(1, 200, 36), rnd(1, 68, 200)], "mk")]:
        with vkv.profile() as prof:
            check_sum(build, arrays, 200)
        assert f"{variant}_v{runs}_f32" in prof and "reduce_slabs_f32" in prof, sorted(prof)   # (5 slabs: a thread each)


CM_VARIANTS = ["matmul_cm128x256s8", "matmul_cm128x128s8", "matmul_cm128x128s4", "matmul_cm64x64s4", "matmul_cm64x64s4d",
               "matmul_cm64x64s4k64"]


@pytest.mark.parametrize("variant", CM_VARIANTS)
def test_matmul_coopmat_emulated(variant, monkeypatch):
    "The tensor-core kernel's indexing, run on lavapipe with its fragments emulated: layouts, edges, batches, split K."
    import vkml.backends.vulkan.kernels_nn as kn
    import vkml.backends.vulkan as vkv
    monkeypatch.setattr(kn, "COOPMAT", "emulate")
    monkeypatch.setattr(kn, "FORCE_TILE", variant)
    f16 = np.float16
    T = (0, 2, 1)
    cases = [  # (build, arrays, k, the layout twin: A's run, B's run)
        (lambda a, b: apply(Op.MATMUL, a, b), [rnd(2, 130, 48, dtype=f16), rnd(2, 48, 72, dtype=f16)], 48, "kn"),          # ragged M
        (lambda a, b: apply(Op.MATMUL, perm(a, T), b), [rnd(1, 40, 136, dtype=f16), rnd(1, 40, 24, dtype=f16)], 40, "mn"),   # A m-contiguous
        (lambda a, b: apply(Op.MATMUL, a, perm(b, T)), [rnd(3, 33, 64, dtype=f16), rnd(3, 40, 64, dtype=f16)], 64, "kk"),    # B k-contiguous, ragged N
        (lambda a, b: apply(Op.MATMUL, perm(a, T), perm(b, T)), [rnd(1, 64, 40, dtype=f16), rnd(1, 72, 64, dtype=f16)], 64, "mk"),  # both
        (lambda a, b: apply(Op.MATMUL, a, expand(b, (2, 32, 40))), [rnd(2, 33, 32, dtype=f16), rnd(1, 32, 40, dtype=f16)], 32, "kn"),  # broadcast B
    ]
    for build, arrays, k, runs in cases:
        with vkv.profile() as prof: check_sum(build, arrays, k)
        assert f"{variant}_emu_v{runs}_f16" in prof, sorted(prof)
    if variant != "matmul_cm64x64s4": return   # (one block shape is enough for the split: it only moves C)
    # split K on the z grid (chunks of 32 terms: one slab each), partials in f32
    monkeypatch.setattr(kn, "split_k", lambda name, M, N, K, nb: 3)
    with vkv.profile() as prof:
        check_sum(lambda a, b: apply(Op.MATMUL, a, b), [rnd(1, 50, 96, dtype=f16), rnd(1, 96, 40, dtype=f16)], 96)
    assert f"{variant}_emu_vkn_f16_f32" in prof and "reduce_slabs_f16" in prof, sorted(prof)


def test_matmul_tiles_walk_a_grid_smaller_than_their_tiles(monkeypatch):
    """Past 65,535 tiles a dimension (MAX_GROUPS) a workgroup walks several tiles, batches and K chunks in turn; forced
    here with a grid of one workgroup. The tensor-core kernels stage C in the shared memory their next tile's slabs go
    to: a double-buffered one (`d`) must wait for every subgroup before storing them (fixed after stop 41); on a GPU with
    tensor cores the real kernels run, elsewhere their emulation (which waits for the workgroup at every fragment)."""
    import vkml.backends.vulkan as vkv
    import vkml.backends.vulkan.kernels_nn as kn
    has = vkv.devices()[vkv.default_index()].features.get("coopmat_f16")
    monkeypatch.setattr(kn, "MAX_GROUPS", 1)
    grids, dispatch = [], kn.matmul_dispatch
    def spy(*args, **kw):
        ds = dispatch(*args, **kw); grids.extend(d.groups for d in ds if "matmul" in d.shader); return ds
    monkeypatch.setattr(kn, "matmul_dispatch", spy)
    f16, mm = np.float16, (lambda a, b: apply(Op.MATMUL, a, b))
    cm = ["matmul_cm64x64s4", "matmul_cm64x64s4d"] + (["matmul_cm128x128s8d", "matmul_cm128x128s8"] if has else [])
    for name in ["matmul", "matmul128"] + cm:
        monkeypatch.setattr(kn, "FORCE_TILE", name)
        emulated = "_cm" in name and not has
        monkeypatch.setattr(kn, "COOPMAT", "emulate" if emulated else "auto" if "_cm" in name else "off")
        for dt in ([f16] if "_cm" in name else FLOATS):
            k = 32 if emulated else 96      # (lavapipe ends a shader's loops past 65,535 trips in all: short products)
            with vkv.profile() as prof:
                check_sum(mm, [rnd(2, 136, k, dtype=dt), rnd(2, k, 200, dtype=dt)], k)   # 3 x 4 tiles x 2 batches, one workgroup
            assert any(n.startswith(name + ("_emu" if "_cm" in name and not has else "")) for n in prof), sorted(prof)
    assert grids and all(g == (1, 1, 1) for g in grids), grids


def test_matmul_f16_tensor_cores_where_the_device_has_them():
    "Aligned f16 products: on a device with cooperative matrices the real tensor-core kernels (no emulation), elsewhere the plain one."
    import vkml.backends.vulkan as vkv
    import vkml.backends.vulkan.kernels_nn as kn
    has = vkv.devices()[vkv.default_index()].features.get("coopmat_f16")
    f16 = np.float16
    mm = lambda a, b: apply(Op.MATMUL, a, b)
    cases = [(mm, [rnd(1, 520, 256, dtype=f16), rnd(1, 256, 264, dtype=f16)], 256),          # ragged blocks
             (lambda a, b: apply(Op.MATMUL, perm(a, (0, 2, 1)), perm(b, (0, 2, 1))),          # both transposed
              [rnd(2, 96, 136, dtype=f16), rnd(2, 72, 96, dtype=f16)], 96),
             (mm, [rnd(1, 64, 4096, dtype=f16), rnd(1, 4096, 64, dtype=f16)], 4096)]          # few blocks: K split
    for build, arrays, k in cases:
        with vkv.profile() as prof: check_sum(build, arrays, k)
        cm = [n for n in prof if "_cm" in n]
        assert (bool(cm) and not any("_emu" in n for n in cm)) if has else not cm, sorted(prof)
    if has:   # every block shape, forced
        for name in list(kn.COOPMAT_TILES) + list(kn.COOPMAT_MORE):
            kn.FORCE_TILE = name
            try:
                with vkv.profile() as prof: check_sum(mm, [rnd(1, 200, 96, dtype=f16), rnd(1, 96, 136, dtype=f16)], 96)
            finally: kn.FORCE_TILE = None
            # a tensor-core tile's name carries its operands' layout (_v<a><b>, fixed when compiling)
            assert any(re.fullmatch(rf"{name}(_v[mk][kn])?_f16", n) for n in prof), sorted(prof)
        # the GPT's shapes, unforced: a weight gradient (Gᵀ X, A m-contiguous, K split) and a projection (X Wᵀ)
        T = (0, 2, 1)
        for build, arrays, k in [(lambda g, x: apply(Op.MATMUL, perm(g, T), x), [rnd(1, 2048, 384, dtype=f16), rnd(1, 2048, 1152, dtype=f16)], 2048),
                                 (lambda x, w: apply(Op.MATMUL, x, perm(w, T)), [rnd(1, 2048, 384, dtype=f16), rnd(1, 1152, 384, dtype=f16)], 384)]:
            with vkv.profile() as prof: check_sum(build, arrays, k)
            assert any("_cm" in n for n in prof), sorted(prof)


def test_coopmat_layout_fallback(monkeypatch):
    "Operands that are not whole 16-byte vectors (odd K, odd strides) take the plain kernel, and agree."
    import vkml.backends.vulkan.kernels_nn as kn
    import vkml.backends.vulkan as vkv
    monkeypatch.setattr(kn, "COOPMAT", "emulate")
    with vkv.profile() as prof:
        check_sum(lambda a, b: apply(Op.MATMUL, a, b), [rnd(1, 40, 37, dtype=np.float16), rnd(1, 37, 40, dtype=np.float16)], 37)
    assert not any("_cm" in n for n in prof), sorted(prof)
    with vkv.profile() as prof:   # f16 conv_transpose2d, lowered: its columns (f32) from the tensor-core kernel
        x, w = rnd(2, 16, 8, 8, dtype=np.float16), rnd(16, 8, 3, 3, dtype=np.float16)
        check_sum(lambda x, w: apply(Op.CONV_TRANSPOSE2D, x, w, arg=((1, 1), (1, 1), (0, 0), (1, 1), 1)), [x, w], 16 * 9)
    assert any("_cm" in n and "_emu_v" in n and n.endswith("_f16_f32") for n in prof), sorted(prof)


def test_matmul_tile_choice():
    "The biggest tile that fills the GPU; a split K where no tile does."
    import vkml.backends.vulkan.kernels_nn as kn
    assert kn.matmul_variant(4096, 4096, 1) == "matmul128"
    assert kn.matmul_variant(1024, 1024, 1) == "matmul128x64"      # 64 tiles of 128x128 would leave SMs idle
    assert kn.matmul_variant(64, 16384, 1) == "matmul64x128"       # 128-row tiles would be half empty
    assert kn.matmul_variant(20, 50, 1) == "matmul_small"
    assert kn.matmul_variant(16, 1024, 128) == "matmul16x64"        # a 16-channel convolution: 64-row tiles 3/4 empty
    assert kn.matmul_variant(32, 256, 128) == "matmul32x64" and kn.matmul_variant(24, 144, 1, 131072) == "matmul32x64"
    assert kn.matmul_variant(33, 4096, 8) == "matmul"
    # a skinny tile's workgroup has a quarter (16x64) or half (32x64) the threads: four or two times the K chunks
    assert kn.split_k("matmul16x64", 16, 144, 1 << 20, 1) == 4 * kn.split_k("matmul", 64, 192, 1 << 20, 1) == 320
    assert kn.split_k("matmul32x64", 32, 144, 1 << 20, 1) == 2 * kn.split_k("matmul", 64, 192, 1 << 20, 1)
    assert kn.split_k("matmul", 64, 576, 100352, 1) > 1 and kn.split_k("matmul128", 4096, 4096, 4096, 1) == 1


def test_matmul_split_tile_choice():
    """A long product with a few dozen 128x128 tiles (a weight gradient) runs them split along K: measured on the
    H200 (bench/results/matmul_skinny_h200.json) faster than any other tile, split or whole; fewer tiles do not."""
    import vkml.backends.vulkan.kernels_nn as kn
    assert kn.matmul_variant(384, 1152, 1, 8192) == "matmul128"     # 27 tiles, split 9 ways
    assert kn.matmul_variant(1536, 384, 1, 8192) == "matmul128"     # 36 tiles, split 7 ways
    assert kn.matmul_variant(384, 384, 1, 8192) == "matmul"         # 9 tiles: the 64x64 tile split 7 ways wins
    assert kn.matmul_variant(384, 1152, 1) == "matmul"              # K unknown: no split to count on
    assert kn.matmul_variant(512, 1024, 1, 1024) == kn.matmul_variant(512, 1024, 1)   # 64x64 fills: unchanged


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_strided(dtype):
    "Transposed A, batch-broadcast B (stride 0), reversed and stepped slices: read in place."
    a0, b0 = rnd(3, 45, 70, dtype=dtype), rnd(1, 45, 33, dtype=dtype)          # a0 is (B, K, M)
    check_sum(lambda a, b: apply(Op.MATMUL, perm(a, (0, 2, 1)), expand(b, (3, 45, 33))), [a0, b0], 45)
    a1, b1 = rnd(2, 9, 20, dtype=dtype), rnd(2, 40, 61, dtype=dtype)
    check_sum(lambda a, b: apply(Op.MATMUL, a, sl(b, (0, 2, 1), (39, None, -2), (5, 61, 3))), [a1, b1], 20)
    # both operands transposed, batch permuted to the middle
    a2, b2 = rnd(20, 4, 66, dtype=dtype), rnd(70, 4, 20, dtype=dtype)          # (K, B, M), (N, B, K)
    check_sum(lambda a, b: apply(Op.MATMUL, perm(a, (1, 2, 0)), perm(b, (1, 2, 0))), [a2, b2], 20)


def test_matmul_batch_fold():
    "More than 65,535 batches: the grid folds (z for tiles, a 1-D fold for small products)."
    a, b = rnd(70000, 2, 3), rnd(70000, 3, 2)
    check_sum(lambda a, b: apply(Op.MATMUL, a, b), [a, b], 3)


def test_matmul_nan_inf():
    a = rnd(1, 5, 6); b = rnd(1, 6, 4)
    a[0, 1, 2] = np.nan; a[0, 3, 0] = np.inf
    cpu, vk = both(lambda a, b: apply(Op.MATMUL, a, b), a, b)
    np.testing.assert_array_equal(np.isnan(vk), np.isnan(cpu))
    np.testing.assert_array_equal(np.isinf(vk), np.isinf(cpu))


# ------------------------------------------------------------------------------------------ conv2d

# (N, C, H, W, O, kh, kw, stride, padding, dilation, groups)
CONV_CASES = [(2, 4, 9, 9, 6, 3, 3, (1, 1), (1, 1), (1, 1), 2), (1, 3, 7, 8, 5, 2, 3, (2, 1), (0, 2), (2, 1), 1),
              (3, 6, 5, 5, 6, 1, 1, (1, 1), (0, 0), (1, 1), 3), (1, 1, 1, 1, 1, 1, 1, (1, 1), (0, 0), (1, 1), 1),
              (2, 8, 11, 10, 4, 3, 3, (2, 2), (1, 1), (1, 1), 1), (1, 2, 4, 4, 2, 5, 5, (1, 1), (2, 2), (1, 1), 1),
              (2, 4, 6, 6, 4, 3, 3, (1, 1), (1, 1), (1, 1), 4), (1, 16, 12, 12, 80, 3, 3, (1, 1), (1, 1), (1, 1), 1),
              (0, 2, 5, 5, 3, 3, 3, (1, 1), (1, 1), (1, 1), 1), (1, 2, 5, 6, 3, 1, 1, (2, 3), (0, 0), (1, 1), 1)]


def conv(x, w, arg): return apply(Op.CONV2D, x, w, arg=arg)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d(case, dtype):
    N, C, H, W, O, kh, kw, st, pd, dl, G = case
    arg = (st, pd, dl, G)
    check_sum(lambda x, w: conv(x, w, arg), [rnd(N, C, H, W, dtype=dtype), rnd(O, C // G, kh, kw, dtype=dtype)], C // G * kh * kw)


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv2d_strided(dtype):
    "A permuted, mirrored input and flipped weights (which take the weight-copy path)."
    x0, w0 = rnd(3, 2, 6, 7, dtype=dtype), rnd(4, 3, 3, 3, dtype=dtype)        # x0 is (C, N, H, W)
    build = lambda x, w: conv(sl(perm(x, (1, 0, 2, 3)), (0, 2, 1), (0, 3, 1), (0, 6, 1), (6, None, -1)),
                              sl(w, (0, 4, 1), (0, 3, 1), (2, None, -1), (2, None, -1)), ((1, 1), (1, 1), (1, 1), 1))
    check_sum(build, [x0, w0], 27)
    # a 1x1 convolution on a channels-last view (the direct matmul path with a strided input)
    x1, w1 = rnd(2, 5, 6, 4, dtype=dtype), rnd(3, 4, 1, 1, dtype=dtype)        # (N, H, W, C)
    check_sum(lambda x, w: conv(perm(x, (0, 3, 1, 2)), w, ((1, 1), (0, 0), (1, 1), 1)), [x1, w1], 4)


# implicit-GEMM cases: outputs big enough for a tile. (N, C, H, W, O, kh, kw, stride, padding, dilation, groups)
IMPLICIT_CASES = [(2, 16, 13, 11, 24, 3, 3, (1, 1), (1, 1), (1, 1), 1),   # C/g = 16: one tap per slab
                  (2, 6, 33, 15, 20, 3, 2, (2, 1), (1, 0), (2, 1), 2),    # C/g = 3: taps inside a slab; grouped
                  (1, 5, 40, 36, 9, 5, 5, (1, 2), (3, 2), (1, 1), 1)]    # padding wider than half the kernel


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", IMPLICIT_CASES)
def test_conv2d_implicit_gemm(case, dtype):
    "Convolutions gathered inside the matmul kernel (no im2col buffer), on plain and strided input views."
    import vkml.backends.vulkan as vkv
    N, C, H, W, O, kh, kw, st, pd, dl, G = case
    arg = (st, pd, dl, G)
    with vkv.profile() as prof:
        check_sum(lambda x, w: conv(x, w, arg), [rnd(N, C, H, W, dtype=dtype), rnd(O, C // G, kh, kw, dtype=dtype)], C // G * kh * kw)
    assert any(n.startswith("conv") for n in prof) and not any(n.startswith("im2col") for n in prof), sorted(prof)
    x0 = rnd(C, N, H, W + 3, dtype=dtype)   # a permuted, column-sliced, mirrored input view
    view = lambda x: sl(perm(x, (1, 0, 2, 3)), (0, N, 1), (0, C, 1), (0, H, 1), (W + 2, 1, -1))
    check_sum(lambda x, w: conv(view(x), w, arg), [x0, rnd(O, C // G, kh, kw, dtype=dtype)], C // G * kh * kw)


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv_transpose2d_stride1_implicit(dtype):
    "conv2d's input gradient (a stride-1 transposed convolution) on the implicit GEMM: padding, dilation, groups, output padding."
    import vkml.backends.vulkan as vkv
    for N, Cin, H, W, Cog, kh, kw, pd, op, dl, G in [(2, 16, 20, 18, 8, 3, 3, (1, 1), (0, 0), (1, 1), 1),
                                                      (1, 12, 30, 20, 5, 3, 2, (2, 0), (1, 0), (2, 1), 3)]:
        arg = ((1, 1), pd, op, dl, G)
        with vkv.profile() as prof:
            check_sum(lambda x, w: apply(Op.CONV_TRANSPOSE2D, x, w, arg=arg),
                      [rnd(N, Cin, H, W, dtype=dtype), rnd(Cin, Cog, kh, kw, dtype=dtype)], Cin // G * kh * kw)
        assert any(n.startswith("conv") for n in prof) and "col2im" not in " ".join(prof), sorted(prof)


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv2d_weight_implicit(dtype, monkeypatch):
    "conv2d's weight gradient gathered in the kernel: groups, stride, dilation, extra windows, a strided g, split K."
    import vkml.backends.vulkan as vkv
    import vkml.backends.vulkan.kernels_nn as kn
    wg = lambda arg: (lambda g, x: apply(Op.CONV2D_WEIGHT, g, x, arg=arg))
    for (N, O, Ho, Wo), (C, H, W), arg in [((2, 8, 7, 6), (4, 7, 6), ((3, 3), (1, 1), (1, 1), (1, 1), 1)),
                                           ((3, 6, 4, 5), (4, 9, 6), ((2, 3), (2, 1), (1, 1), (1, 1), 2)),
                                           ((1, 5, 3, 3), (3, 9, 9), ((2, 2), (1, 1), (0, 0), (3, 2), 1))]:   # 5 x 7 windows, g has 3 x 3
        with vkv.profile() as prof:
            check_sum(wg(arg), [rnd(N, O, Ho, Wo, dtype=dtype), rnd(N, C, H, W, dtype=dtype)], N * Ho * Wo)
        assert any(n.startswith("wgrad") for n in prof), sorted(prof)
    g0 = rnd(8, 2, 5, 5, dtype=dtype)   # g as a permuted view (O, N, ...): copied contiguous first
    check_sum(lambda g, x: apply(Op.CONV2D_WEIGHT, perm(g, (1, 0, 2, 3)), x, arg=((3, 3), (1, 1), (1, 1), (1, 1), 1)),
              [g0, rnd(2, 3, 5, 5, dtype=dtype)], 50)
    # K split over the z grid, partials summed: a few slabs by a thread per output, more by the cols kernel
    for parts, (H, W), summed in [(5, (9, 8), "reduce_slabs_"), (20, (17, 16), "reduce_cols_final_")]:
        monkeypatch.setattr(kn, "split_k", lambda name, M, N, K, nb: parts)
        with vkv.profile() as prof:
            check_sum(wg(((3, 3), (1, 1), (1, 1), (1, 1), 2)), [rnd(3, 4, H, W, dtype=dtype), rnd(3, 6, H, W, dtype=dtype)], 3 * H * W)
        assert summed + ("f32" if dtype == np.float32 else "f16") in prof, sorted(prof)


def test_conv2d_two_scratch_buffers_of_one_size():
    "The weight copy and the columns are two Scratch buffers of equal size: they must stay two buffers."
    x0, w0 = rnd(1, 3, 2, 2), rnd(4, 3, 3, 3)
    check_sum(lambda x, w: conv(x, sl(w, (0, 4, 1), (0, 3, 1), (2, None, -1), (0, 3, 1)), ((1, 1), (1, 1), (1, 1), 1)), [x0, w0], 27)


def test_conv2d_chunked(monkeypatch):
    "Columns over the scratch limit: images are unfolded and multiplied in chunks through one scratch."
    import vkml.backends.vulkan.kernels_nn as kn
    monkeypatch.setattr(kn, "COL_SCRATCH_BYTES", 2 * 3 * 9 * 36 * 4)              # two images per chunk
    check_sum(lambda x, w: conv(x, w, ((1, 1), (1, 1), (1, 1), 1)), [rnd(5, 3, 6, 6), rnd(4, 3, 3, 3)], 27)


# ---------------------------------------------------------------------------------- conv_transpose2d

# (N, Cin, H, W, Cout/g, kh, kw, stride, padding, output_padding, dilation, groups)
CT_CASES = [(2, 4, 5, 5, 3, 3, 3, (2, 2), (1, 1), (1, 1), (1, 1), 2), (1, 3, 4, 6, 2, 2, 3, (1, 3), (0, 1), (0, 2), (2, 1), 1),
            (1, 1, 1, 1, 1, 1, 1, (1, 1), (0, 0), (0, 0), (1, 1), 1), (2, 6, 3, 3, 1, 4, 4, (3, 2), (2, 0), (1, 0), (1, 2), 3),
            (1, 8, 7, 7, 8, 3, 3, (1, 1), (1, 1), (0, 0), (1, 1), 1)]


@pytest.fixture(params=["direct", "lowered"])
def ct_path(request, monkeypatch):
    "Run conv_transpose2d through the direct gather kernel or through matmul + col2im."
    import vkml.backends.vulkan.kernels_nn as kn
    monkeypatch.setattr(kn, "CT_LOWER_MIN_K", 10**9 if request.param == "direct" else 0)
    return request.param


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CT_CASES)
def test_conv_transpose2d(case, dtype, ct_path):
    N, Cin, H, W, Cog, kh, kw, st, pd, op, dl, G = case
    arg = (st, pd, op, dl, G)
    check_sum(lambda x, w: apply(Op.CONV_TRANSPOSE2D, x, w, arg=arg),
              [rnd(N, Cin, H, W, dtype=dtype), rnd(Cin, Cog, kh, kw, dtype=dtype)], Cin // G * kh * kw)


def test_conv_transpose2d_strided(ct_path):
    x0, w0 = rnd(4, 2, 5, 5), rnd(4, 3, 3, 3)                                     # x0 is (C, N, H, W)
    build = lambda x, w: apply(Op.CONV_TRANSPOSE2D, perm(x, (1, 0, 2, 3)), sl(w, (0, 4, 1), (0, 3, 1), (2, None, -1), (0, 3, 1)),
                               arg=((2, 2), (1, 1), (1, 1), (1, 1), 1))
    check_sum(build, [x0, w0], 36)
    # output_padding >= stride (allowed when dilation is larger): the column blocks are still H x W
    x1, w1 = rnd(1, 4, 3, 4), rnd(4, 2, 3, 2)
    check_sum(lambda x, w: apply(Op.CONV_TRANSPOSE2D, x, w, arg=((1, 1), (0, 0), (1, 1), (2, 2), 2)), [x1, w1], 12)


def test_conv_transpose2d_chunked(monkeypatch):
    import vkml.backends.vulkan.kernels_nn as kn
    monkeypatch.setattr(kn, "CT_LOWER_MIN_K", 0)
    monkeypatch.setattr(kn, "COL_SCRATCH_BYTES", 2 * 3 * 9 * 25 * 4)              # two images per chunk
    check_sum(lambda x, w: apply(Op.CONV_TRANSPOSE2D, x, w, arg=((2, 2), (1, 1), (1, 1), (1, 1), 1)),
              [rnd(5, 4, 5, 5), rnd(4, 3, 3, 3)], 36)


# ------------------------------------------------------------------------------------ im2col / col2im

# (N, C, H, W, kernel, dilation, padding, stride)
UNFOLD_CASES = [(2, 3, 7, 6, (3, 2), (1, 2), (1, 0), (2, 1)), (1, 1, 1, 1, (1, 1), (1, 1), (0, 0), (1, 1)),
                (1, 2, 5, 5, (2, 2), (1, 1), (1, 1), (3, 3)), (2, 2, 6, 5, (3, 3), (2, 1), (2, 1), (1, 2))]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", UNFOLD_CASES)
def test_im2col_col2im(case, dtype):
    N, C, H, W, k, d, p, s = case
    cpu, _ = check_exact(lambda x: apply(Op.IM2COL, x, arg=(k, d, p, s)), rnd(N, C, H, W, dtype=dtype))
    check_exact(lambda x: apply(Op.IM2COL, perm(x, (0, 1, 3, 2)), arg=(k, d, p, s)), rnd(N, C, W, H, dtype=dtype))
    check_sum(lambda c: apply(Op.COL2IM, c, arg=((H, W), k, d, p, s)), [rnd(*cpu.shape, dtype=dtype)], k[0] * k[1])


def test_col2im_strided():
    c0 = rnd(2, 12, 8)                                                           # (N, L, C*kh*kw), permuted below
    check_sum(lambda c: apply(Op.COL2IM, perm(c, (0, 2, 1)), arg=((4, 5), (2, 2), (1, 1), (0, 0), (1, 1))), [c0], 4)


# ---------------------------------------------------------------------------------------- pooling

# (N, C, H, W, kernel, stride, padding, dilation, ceil_mode)
POOL_CASES = [(2, 3, 7, 7, (3, 3), (2, 2), (1, 1), (1, 1), False), (1, 2, 8, 9, (2, 3), (2, 2), (1, 1), (2, 1), True),
              (1, 1, 5, 5, (3, 3), (3, 3), (0, 0), (1, 1), True), (1, 1, 1, 1, (1, 1), (1, 1), (0, 0), (1, 1), False),
              (2, 2, 6, 7, (2, 2), (1, 1), (0, 1), (1, 1), True), (1, 1, 10, 10, (3, 2), (3, 2), (1, 1), (2, 3), True),
              (0, 2, 4, 4, (2, 2), (2, 2), (0, 0), (1, 1), False),
              # windows apart (a thread per window, maxpool2d_backward_cells): the demo's, gaps between windows with
              # padding and ceil_mode, leftover rows and columns past the last window
              (2, 3, 8, 8, (2, 2), (2, 2), (0, 0), (1, 1), False), (1, 2, 9, 7, (2, 2), (3, 3), (1, 1), (1, 1), True),
              (1, 1, 7, 5, (2, 3), (2, 3), (1, 1), (1, 1), False), (2, 1, 9, 10, (2, 2), (4, 3), (0, 0), (2, 1), False)]


def pool_input(shape, dtype):
    x = RNG.integers(-3, 4, shape).astype(dtype)    # few distinct values: many ties
    if x.size > 5: x.flat[5] = np.nan; x.flat[-1] = -np.inf
    return x


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", POOL_CASES)
def test_maxpool2d_and_backward(case, dtype):
    N, C, H, W, k, s, p, d, ceil = case
    arg = (k, s, p, d, ceil)
    x = pool_input((N, C, H, W), dtype)
    cpu, _ = check_exact(lambda x: apply(Op.MAXPOOL2D, x, arg=arg), x)
    g = rnd(*cpu.shape, dtype=dtype)
    # sum|terms| of dx is the backward of |g|: the same routing, absolute values
    check_sum(lambda g, x: apply(Op.MAXPOOL2D_BACKWARD, g, x, arg=arg), [g, x], k[0] * k[1], abs_arrays=[np.abs(g), x])


@pytest.mark.vulkan
def test_windows_apart_take_a_thread_per_window():
    from vkml.backends.vulkan import profile
    x = tensor(pool_input((2, 3, 8, 8), np.float32), device="vulkan")
    for arg, kernel in ((((2, 2), (2, 2), (0, 0), (1, 1), False), "maxpool2d_backward_cells_f32"),
                        (((3, 3), (2, 2), (1, 1), (1, 1), False), "maxpool2d_backward_f32")):   # overlapping: the gather
        g = tensor(np.ones(SHAPE_RULES[Op.MAXPOOL2D](arg, x)[0], np.float32), device="vulkan")
        with profile() as prof: apply(Op.MAXPOOL2D_BACKWARD, g, x, arg=arg).numpy()
        assert [k for k in prof if k.startswith("maxpool")] == [kernel]


def test_maxpool2d_strided():
    x0 = pool_input((7, 2, 6, 3), np.float32)                                    # (H, N, W, C)
    arg = ((2, 2), (2, 1), (1, 0), (1, 1), True)
    view = lambda x: perm(x, (1, 3, 0, 2))
    cpu, _ = check_exact(lambda x: apply(Op.MAXPOOL2D, view(x), arg=arg), x0)
    g0 = rnd(cpu.shape[3], *cpu.shape[:3])                                        # g stored (OW, N, C, OH)
    check_sum(lambda g, x: apply(Op.MAXPOOL2D_BACKWARD, perm(g, (1, 2, 3, 0)), view(x), arg=arg), [g0, x0], 4,
              abs_arrays=[np.abs(g0), x0])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("cip", [True, False])
@pytest.mark.parametrize("case", [c for c in POOL_CASES if c[7] == (1, 1)])
def test_avgpool2d(case, cip, dtype):
    N, C, H, W, k, s, p, _, ceil = case
    arg = (k, s, p, ceil, cip)
    check_sum(lambda x: apply(Op.AVGPOOL2D, x, arg=arg), [rnd(N, C, H, W, dtype=dtype)], k[0] * k[1])
    check_sum(lambda x: apply(Op.AVGPOOL2D, perm(x, (0, 1, 3, 2)), arg=arg), [rnd(N, C, W, H, dtype=dtype)], k[0] * k[1])


# ------------------------------------------------------------------------------ gather / index_add

ALL = [np.float32, np.float16, np.int32, np.int64, np.bool_]
NUMERIC = [np.float32, np.float16, np.int32, np.int64]


def values(shape, dtype):
    v = RNG.standard_normal(shape) * 50
    return (v > 0) if dtype == np.bool_ else v.astype(dtype)


# (x shape, idx shape, axis): idx may be smaller than x in the other dims (torch.gather)
GATHER_CASES = [((6,), (9,), 0), ((4, 5), (3, 7), 1), ((4, 5), (6, 2), 0), ((3, 4, 5), (2, 3, 4), 2),
                ((2, 3, 4, 5), (2, 2, 4, 3), 1), ((2, 3, 4, 5), (1, 3, 2, 5), 3), ((3, 4), (3, 0), 1), ((1,), (1,), 0)]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("case", GATHER_CASES)
def test_gather(case, dtype):
    xs, ishape, axis = case
    idx = RNG.integers(0, xs[axis], ishape).astype(np.int64)
    cpu, vk = check_exact(lambda x, i: apply(Op.GATHER, x, i, arg=axis), values(xs, dtype), idx)
    assert vk.shape == ishape


def test_gather_strided():
    x0 = values((5, 4, 6), np.float32)                                           # viewed as (6, 4, 5) reversed
    i0 = RNG.integers(0, 4, (4, 3, 5)).astype(np.int64)                           # viewed as (3, 4, 5)... transposed
    check_exact(lambda x, i: apply(Op.GATHER, sl(perm(x, (2, 1, 0)), (5, None, -1), (0, 4, 1), (0, 5, 1)),
                                   perm(i, (1, 0, 2)), arg=1), x0, i0)
    # a broadcast (stride-0) index
    check_exact(lambda x, i: apply(Op.GATHER, x, expand(i, (4, 6)), arg=1), values((4, 6), np.int64), RNG.integers(0, 6, (1, 6)).astype(np.int64))


# (dst shape, src/idx shape, axis)
SCATTER_CASES = [((7,), (20,), 0), ((5, 6), (4, 5), 1), ((5, 6), (9, 6), 0), ((3, 4, 5), (3, 2, 5), 1),
                 ((2, 3, 4, 5), (2, 3, 8, 4), 2), ((4, 3), (4, 0), 1), ((1,), (3,), 0)]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("case", SCATTER_CASES)
def test_index_add(case, dtype):
    ds, ss, axis = case
    idx = RNG.integers(0, ds[axis], ss).astype(np.int64)      # many duplicates
    build = lambda d, i, s: apply(Op.INDEX_ADD, d, i, s, arg=axis)
    args = [values(ds, dtype), idx, values(ss, dtype)]
    if np.dtype(dtype).kind == "i":
        check_exact(build, *args)
    else:
        cnt = np.bincount(idx.reshape(-1), minlength=1).max(initial=1) + 1
        check_sum(build, args, int(cnt), abs_arrays=[np.abs(args[0]), idx, np.abs(args[2])])
    again = [build(*[tensor(a, device="vulkan") for a in args]).numpy() for _ in range(2)]
    assert again[0].tobytes() == again[1].tobytes()


def test_index_add_strided():
    d0, s0 = values((6, 5), np.float32), values((4, 7), np.float32)               # src viewed transposed
    i0 = RNG.integers(0, 6, (7, 4)).astype(np.int64)
    build = lambda d, i, s: apply(Op.INDEX_ADD, sl(d, (5, None, -1), (0, 5, 1)), i, perm(s, (1, 0)), arg=0)
    check_sum(build, [d0, i0, s0], 8, abs_arrays=[np.abs(d0), i0, np.abs(s0)])


# an index broadcast along the columns (an embedding's backward): index_add_rows.comp, each entry added once
ROWS_CASES = [((65, 40), 300, False), ((7, 3, 5), 50, False), ((130, 70), 1000, True), ((3, 1), 9, False)]


def _rows_build(shape, n, transposed):
    "INDEX_ADD(dst (V, ...), idx (n,) broadcast over the columns, src (n, ...)), src read through a transpose when asked."
    def build(d, i, s):
        i = expand(apply(Op.RESHAPE, i, shape=(n,) + (1,) * (len(shape) - 1), dtype=i.dtype), (n, *shape[1:]))
        return apply(Op.INDEX_ADD, d, i, perm(s, (1, 0)) if transposed else s, arg=0)
    return build


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", ROWS_CASES)
@pytest.mark.parametrize("parts", [1, 3])
def test_index_add_rows(case, dtype, parts, monkeypatch):
    "One chunk gives the oracle's bits in f32 (each (row, column) adds its entries in index order); chunks, the bound."
    import vkml.backends.vulkan.kernels_nn as kn
    from vkml.backends.vulkan import profile
    monkeypatch.setattr(kn, "ROWS_PARTS", parts)
    shape, n, transposed = case
    idx = RNG.integers(0, shape[0], n).astype(np.int64)
    src = values((shape[1], n) if transposed else (n, *shape[1:]), dtype)
    args, build = [values(shape, dtype), idx, src], _rows_build(shape, n, transposed)
    with profile() as prof: vk = build(*[tensor(a, device="vulkan") for a in args]).numpy()
    assert any(k.startswith("index_add_rows" + ("_part" if parts > 1 else "")) for k in prof), sorted(prof)
    cpu = build(*[tensor(a) for a in args]).numpy()
    if dtype == np.float32 and parts == 1: np.testing.assert_array_equal(vk, cpu)
    cnt = np.bincount(idx, minlength=1).max() + 1
    check_sum(build, args, int(cnt), abs_arrays=[np.abs(args[0]), idx, np.abs(args[2])])
    again = build(*[tensor(a, device="vulkan") for a in args]).numpy()
    assert again.tobytes() == vk.tobytes()


@pytest.mark.parametrize("parts", [1, 2])
def test_index_add_rows_out_of_range_index(parts, monkeypatch):
    "An index computed on the device and out of range matches no row, and the realize raises IndexOutOfRangeError."
    import vkml.backends.vulkan.kernels_nn as kn
    monkeypatch.setattr(kn, "ROWS_PARTS", parts)
    t = lambda a: tensor(a, device="vulkan")
    idx = apply(Op.ADD, t(np.array([0, 1, 2, 3], np.int64)), t(np.array([0, 0, 5, 0], np.int64)))   # 7: past 5 rows
    with pytest.raises(D.IndexOutOfRangeError, match="index 7"):
        _rows_build((5, 4), 4, False)(t(np.zeros((5, 4), np.float32)), idx, t(np.ones((4, 4), np.float32))).numpy()


def test_embedding_backward_adds_each_entry_once():
    "nn.Embedding's weight gradient takes index_add_rows, not the scan, and agrees with the oracle."
    import vkml
    from vkml.backends.vulkan import profile
    ids, g0 = RNG.integers(0, 50, (4, 30)), values((4, 30, 16), np.float32)
    res = {}
    for d in DEVS:
        emb = vkml.nn.Embedding(50, 16)
        emb.weight = vkml.nn.Parameter(tensor(np.linspace(-1, 1, 800, dtype=np.float32).reshape(50, 16), device=d))
        g = tensor(g0, device=d)
        (emb(tensor(ids, device=d)) * g).sum().backward()
        with profile() as prof: res[d] = emb.weight.grad.numpy()
        if d == "vulkan": assert any(k.startswith("index_add_rows") for k in prof) and "index_add_f32" not in prof, sorted(prof)
    oracle.assert_close(res["vulkan"], res["cpu"], rtol=1e-5, atol=1e-5, k=int(np.bincount(ids.ravel()).max()))


def test_index_add_int_exact_large():
    "Integer scatter-add with heavy collisions: exact, wrap-around included for int32."
    dst = np.zeros(3, np.int32); idx = RNG.integers(0, 3, 5000).astype(np.int64)
    src = np.full(5000, 2**30, np.int32)
    check_exact(lambda d, i, s: apply(Op.INDEX_ADD, d, i, s, arg=0), dst, idx, src)


@pytest.mark.parametrize("op", ["gather", "index_add"])
def test_out_of_range_index_is_harmless(op):
    "An index the host failed to reject never reads or writes out of bounds: a typed error or in-bounds values."
    x = values((4, 5), np.float32); bad = np.array([[0, 9, -3, 4]] * 4, np.int64)
    t = lambda a: tensor(a, device="vulkan")
    try:
        if op == "gather": out = apply(Op.GATHER, t(x), t(bad), arg=1).numpy()
        else: out = apply(Op.INDEX_ADD, t(x), t(bad), t(values((4, 4), np.float32)), arg=1).numpy()
    except D.IndexOutOfRangeError:
        return
    assert out.shape == (4, 4) if op == "gather" else out.shape == (4, 5)
    if op == "gather": assert np.isin(out, x).all()   # clamped into range: values of x only


# ------------------------------------------------------------------------------------ determinism

def test_same_bits_twice():
    "Every nn kernel is deterministic: the same graph realized twice gives the same bytes."
    x, w, wt, a, b = rnd(2, 4, 9, 9), rnd(6, 2, 3, 3), rnd(4, 3, 3, 3), rnd(2, 70, 90), rnd(2, 90, 80)
    cols, g = rnd(2, 8, 16), rnd(2, 4, 9, 9)
    dev = lambda a: tensor(a, device="vulkan")
    graphs = [lambda: apply(Op.MATMUL, dev(a), dev(b)),
              lambda: apply(Op.CONV2D, dev(x), dev(w), arg=((1, 1), (1, 1), (1, 1), 2)),
              lambda: apply(Op.CONV_TRANSPOSE2D, dev(x), dev(wt), arg=((2, 2), (1, 1), (1, 1), (1, 1), 1)),
              lambda: apply(Op.COL2IM, dev(cols), arg=((5, 5), (2, 2), (1, 1), (0, 0), (1, 1))),
              lambda: apply(Op.MAXPOOL2D_BACKWARD, dev(g), dev(x), arg=((3, 3), (1, 1), (1, 1), (1, 1), False))]
    for build in graphs:
        first, second = build().numpy(), build().numpy()
        assert first.tobytes() == second.tobytes()


@pytest.mark.parametrize("channels,tile", [(16, "16x64"), (32, "32x64")])
def test_a_narrow_convolution_runs_on_skinny_tiles(channels, tile):
    """A convolution of 16 or 32 output channels (ResNet-20's first two stages) took the 64x64 tile, three quarters or
    half of it empty, forward, input gradient and weight gradient alike: it now takes the skinny tile of its rows."""
    import vkml, vkml.nn.functional as F
    import vkml.backends.vulkan as vkv
    x0, w0, g0 = rnd(4, 8, 12, 12), rnd(channels, 8, 3, 3), rnd(4, channels, 12, 12)
    out = {}
    for dev in ("cpu", "vulkan"):
        x = vkml.tensor(x0, device=dev, requires_grad=True); w = vkml.tensor(w0, device=dev, requires_grad=True)
        with vkv.profile() as prof:
            y = F.conv2d(x, w, padding=1)
            (y * vkml.tensor(g0, device=dev)).sum().backward()
            out[dev] = [t.numpy() for t in (y, x.grad, w.grad)]
        if dev == "vulkan": assert f"conv{tile}_f32" in prof and f"wgrad{tile}_f32" in prof, sorted(prof)
    for a, b, k in zip(out["vulkan"], out["cpu"], (8 * 9, channels * 9, 4 * 144)):
        np.testing.assert_allclose(a, b, rtol=1e-5 * np.sqrt(k), atol=1e-5 * np.sqrt(k))
