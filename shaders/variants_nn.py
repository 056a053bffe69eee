"""Shader variants of the nn kernels: matmul, convolution helpers, pooling, gather, index_add, scatter.

`VARIANTS_NN` rows are `(name, file, defines)`; `shaders/variants.py` imports and appends them, and
`shaders/build.py` compiles each row with `glslc --target-env=vulkan1.2 -O -D<k>=<v> ...` into
`vkml/spirv/<name>.spv`. The storage type is chosen by one define (T_F32, T_F16, T_F64, T_I32,
T_I64, T_B8; see nn_common.glsl), the kernel of a multi-kernel file by another. float64 has every
kernel but pooling's, and one tile for matmul and the implicit-GEMM convolutions (64x64 with BK = 8:
its double-buffered slabs of dvec4 take 17 KiB of shared memory).
"""

_T = {"f32": "T_F32", "f16": "T_F16", "f64": "T_F64", "i32": "T_I32", "i64": "T_I64", "b8": "T_B8"}
FLOAT_SFX = ("f32", "f16")
F64_SFX = ("f32", "f16", "f64")   # the float kernels that have a float64 variant too

# matmul tile shapes: name -> (BM, BN, BK, TM, TN); threads = (BM/TM) * (BN/TN) (256 but the skinny tiles'). Shared
# memory (double-buffered, f32, one vec4 of padding per row): 2*BK*(BM+4 + BN+4)*4 bytes, at most
# lavapipe's 32 KiB. kernels_nn.MATMUL_TILES must list the same shapes.
MATMUL_TILES = {"matmul": (64, 64, 16, 4, 4), "matmul128x64": (128, 64, 16, 8, 4), "matmul64x128": (64, 128, 16, 4, 8),
                "matmul128": (128, 128, 8, 8, 8),
                # skinny tiles for products of at most 32 rows (a convolution of 16 or 32 channels): 64 and 128 threads
                "matmul16x64": (16, 64, 16, 4, 4), "matmul32x64": (32, 64, 16, 4, 4)}
# matmul128 with slabs twice as deep, for devices with the shared memory (2 x 2 x 16 x 33 x 16 B = 33,792: the H200's
# 48 KiB, not lavapipe's 32 KiB; measured: bench/results/matmul_bk16_h200.json). Chosen by kernels_nn.deepen from
# the device's maxComputeSharedMemorySize, never on lavapipe.
MATMUL_DEEP = {"matmul128d": (128, 128, 16, 8, 8)}
# 16-byte loads (matmul.comp with VEC_A and VEC_B): the GPU's f32 tiles, one variant per pair of runs, named
# <tile>_v<a><b>_f32 with a in k (A row-major) or m (A transposed), b in n (B row-major) or k (B transposed).
# kernels_nn.VEC_TILES and kernels_nn.vectorised say the same.
VEC_TILES = ("matmul", "matmul128x64", "matmul64x128", "matmul128", "matmul128d")
VEC_RUNS = {"k": "VEC_K", "m": "VEC_MN", "n": "VEC_MN"}
# small products (matmul.comp with SMALL): name -> (TM, TN, WG), a TM x TN block per thread in workgroups of WG.
# The CPU twin loads fewer words per multiply-add (lavapipe's cost; bench/results/lavapipe_small.json).
# kernels_nn.SMALL_BLOCKS must list the same.
SMALL_BLOCKS = {"matmul_small": (4, 4, 64), "matmul_small_cpu": (8, 16, 8), "matmul_small_cpu16": (16, 16, 8)}

# f16 matmul on tensor cores (matmul_cm.comp, GL_KHR_cooperative_matrix): name -> (BM, BN, BK, SGM, SGN),
# a workgroup of SGM x SGN subgroups of 32. Compiled by glslang >= 13 (`COOPMAT` in the defines tells
# build.py); each also ships as `<name>_emu_*`, the same kernel with the fragments emulated in plain
# GLSL (compiled by glslc), which lavapipe runs in the tests. Shared memory: at most 30 KiB.
# A trailing "d": double-buffered slabs (DBUF); the 128x128 one needs 40 KiB, more than lavapipe's 32, so it
# has no emulated twin: its indexing is the 64x64 one's, which lavapipe runs.
# Each tile ships in four layouts, <name>_v<a><b>_<sfx> (a: k, A row-major, or m, transposed; b: n, B row-major, or k,
# transposed), fixed when compiling. "k64": slabs 64 deep (36 KiB, not lavapipe's 32: no emulated twin; the 64x64 "k64"
# twin runs the same indexing there).
COOPMAT_TILES = {"matmul_cm128x256s8": (128, 256, 32, 2, 4), "matmul_cm128x128s8": (128, 128, 32, 2, 4),
                 "matmul_cm128x128s8k64": (128, 128, 64, 2, 4), "matmul_cm64x64s4k64": (64, 64, 64, 2, 2),
                 "matmul_cm128x128s4": (128, 128, 32, 2, 2), "matmul_cm64x64s4": (64, 64, 32, 2, 2),
                 "matmul_cm128x128s8d": (128, 128, 32, 2, 4), "matmul_cm64x64s4d": (64, 64, 32, 2, 2)}
NO_EMULATION = {"matmul_cm128x128s8d", "matmul_cm128x128s8k64"}
CM_LAYOUTS = {"kn": ("0", "0"), "kk": ("0", "1"), "mn": ("1", "0"), "mk": ("1", "1")}   # runs -> (AT, BT)
# fused attention (attention.comp): the kernel of each mode, and the head dims a variant holds in registers
ATTENTION_MODES = {"ATTENTION": "fwd", "STATS": "stats", "DQ": "dq", "DK": "dk", "DV": "dv"}
ATTENTION_DMAX = (32, 64, 128)
# fused attention on tensor cores (attention_cm.comp, f16, head dims <= 64): (SG, BC), a workgroup of SG subgroups owning
# SG*16 rows, walking the other side BC rows a block; `attention_cm_<mode>_f16` and its emulated twin `attention_cm_emu_...`
ATTENTION_CM = (2, 32)
ATTENTION_CM_MODES = {"ATTENTION": "fwd", "STATS": "stats", "DQ": "dq", "DKV": "dkv"}   # (dk and dv: one kernel)
MATMUL_F64 = (64, 64, 8, 4, 4)   # float64's one tile (matmul_f64, conv_f64, wgrad_f64): kernels_nn.F64_TILES says the same


def _rows():
    rows = []
    for kname, (bm, bn, bk, sgm, sgn) in COOPMAT_TILES.items():
        d = {"T_F16": "1", "BM": str(bm), "BN": str(bn), "BK": str(bk), "SGM": str(sgm), "SGN": str(sgn),
             **({"DBUF": "1"} if kname.endswith("d") else {})}
        for sfx, extra in (("f16", {}), ("f16_f32", {"C_F32": "1"})):
            for runs, (at, bt) in CM_LAYOUTS.items():
                lay = {"AT": at, "BT": bt}
                rows.append((f"{kname}_v{runs}_{sfx}", "matmul_cm.comp", {**d, **extra, **lay, "COOPMAT": "1"}))
                if kname not in NO_EMULATION:
                    rows.append((f"{kname}_emu_v{runs}_{sfx}", "matmul_cm.comp", {**d, **extra, **lay, "EMULATE": "1"}))
    for kname, (bm, bn, bk, tm, tn) in {**MATMUL_TILES, **MATMUL_DEEP}.items():
        for s in FLOAT_SFX:
            rows.append((f"{kname}_{s}", "matmul.comp",
                         {_T[s]: "1", "BM": str(bm), "BN": str(bn), "BK": str(bk), "TM": str(tm), "TN": str(tn)}))
    for kname in VEC_TILES:
        bm, bn, bk, tm, tn = {**MATMUL_TILES, **MATMUL_DEEP}[kname]
        for ra in "km":
            for rb in "nk":
                rows.append((f"{kname}_v{ra}{rb}_f32", "matmul.comp", {"T_F32": "1", "BM": str(bm), "BN": str(bn), "BK": str(bk),
                             "TM": str(tm), "TN": str(tn), "VEC_A": VEC_RUNS[ra], "VEC_B": VEC_RUNS[rb]}))
    # convolutions as implicit GEMM (matmul.comp with IMPLICIT): conv, conv128x64, ... per tile shape
    for kname, (bm, bn, bk, tm, tn) in {**MATMUL_TILES, **MATMUL_DEEP}.items():
        for s in FLOAT_SFX:
            rows.append((f"conv{kname[len('matmul'):]}_{s}", "matmul.comp",
                         {_T[s]: "1", "IMPLICIT": "1", "BM": str(bm), "BN": str(bn), "BK": str(bk), "TM": str(tm), "TN": str(tn)}))
    # convolution weight gradients (matmul.comp with WGRAD): wgrad, wgrad128x64, ...; f16_f32 for split-K partials
    for kname, (bm, bn, bk, tm, tn) in {**MATMUL_TILES, **MATMUL_DEEP}.items():
        for s, extra in (("f32", {"T_F32": "1"}), ("f16", {"T_F16": "1"}), ("f16_f32", {"T_F16": "1", "C_F32": "1"})):
            rows.append((f"wgrad{kname[len('matmul'):]}_{s}", "matmul.comp",
                         {**extra, "WGRAD": "1", "BM": str(bm), "BN": str(bn), "BK": str(bk), "TM": str(tm), "TN": str(tn)}))
    # f16 operands, f32 result (conv_transpose2d's columns stay unrounded until col2im)
    for kname, (bm, bn, bk, tm, tn) in {**MATMUL_TILES, **MATMUL_DEEP}.items():
        rows.append((f"{kname}_f16_f32", "matmul.comp",
                     {"T_F16": "1", "C_F32": "1", "BM": str(bm), "BN": str(bn), "BK": str(bk), "TM": str(tm), "TN": str(tn)}))
    for kname, (tm, tn, wg) in SMALL_BLOCKS.items():   # small products' blocks, f16 operands with an f32 result
        rows.append((f"{kname}_f16_f32", "matmul.comp", {"T_F16": "1", "C_F32": "1", "SMALL": "1", "TM": str(tm), "TN": str(tn), "WG": str(wg)}))
    rows.append(("col2im_f32_f16", "conv.comp", {"T_F16": "1", "X_F32": "1", "COL2IM": "1"}))
    bm, bn, bk, tm, tn = MATMUL_F64
    for kname, extra in (("matmul", {}), ("conv", {"IMPLICIT": "1"}), ("wgrad", {"WGRAD": "1"})):
        rows.append((f"{kname}_f64", "matmul.comp", {"T_F64": "1", **extra, "BM": str(bm), "BN": str(bn), "BK": str(bk), "TM": str(tm), "TN": str(tn)}))
    for kname, (tm, tn, wg) in SMALL_BLOCKS.items():   # small products: one TM x TN register block per thread, no shared memory
        for s in F64_SFX:
            rows.append((f"{kname}_{s}", "matmul.comp", {_T[s]: "1", "SMALL": "1", "TM": str(tm), "TN": str(tn), "WG": str(wg)}))
    for kname, file, kind, sfxs in [("im2col", "conv.comp", "IM2COL", F64_SFX), ("col2im", "conv.comp", "COL2IM", F64_SFX),
                                    ("conv_transpose2d", "conv.comp", "CONV_TRANSPOSE2D", F64_SFX),
                                    ("maxpool2d", "pool.comp", "MAXPOOL2D", FLOAT_SFX), ("avgpool2d", "pool.comp", "AVGPOOL2D", FLOAT_SFX),
                                    ("maxpool2d_backward", "pool.comp", "MAXPOOL2D_BACKWARD", FLOAT_SFX)]:
        for s in sfxs:
            rows.append((f"{kname}_{s}", file, {_T[s]: "1", kind: "1"}))
    for s in F64_SFX:     # im2col on a CPU device: a thread per row, not per element
        rows.append((f"im2col_rows_{s}", "conv.comp", {_T[s]: "1", "IM2COL": "1", "ROWS": "1"}))
    for s in FLOAT_SFX:   # max-pool backward over windows that do not overlap: a thread per window, not per pixel
        rows.append((f"maxpool2d_backward_cells_{s}", "pool.comp", {_T[s]: "1", "MAXPOOL2D_BACKWARD": "1", "CELLS": "1"}))
    for s in ("f32", "f16", "f64", "i32", "i64", "b8"):
        rows.append((f"gather_{s}", "gather.comp", {_T[s]: "1"}))
    for s in ("f32", "f16", "f64", "i32", "i64"):
        rows.append((f"index_add_{s}", "index_add.comp", {_T[s]: "1"}))
    for s in ("f32", "f16"):   # an index broadcast along the columns (an embedding's backward): each entry added once
        rows.append((f"index_add_rows_{s}", "index_add_rows.comp", {_T[s]: "1"}))
        rows.append((f"index_add_rows_part_{s}", "index_add_rows.comp", {_T[s]: "1", "PART": "1"}))
    for s in ("f32", "f16", "f64", "i32", "i64", "b8"):
        rows.append((f"scatter_{s}", "index_add.comp", {_T[s]: "1", "SET": "1"}))
    rows.append(("check_index_i64", "check_index.comp", {"T_I64": "1"}))
    for mode, kname in ATTENTION_MODES.items():   # fused attention: one variant per largest head dim
        for dmax in ATTENTION_DMAX:
            for s in FLOAT_SFX:
                rows.append((f"attention_{kname}{dmax}_{s}", "attention.comp", {_T[s]: "1", mode: "1", "DMAX": str(dmax)}))
    sg, bc = ATTENTION_CM
    for mode, kname in ATTENTION_CM_MODES.items():
        d = {"T_F16": "1", mode: "1", "SG": str(sg), "BC": str(bc)}
        rows.append((f"attention_cm_{kname}_f16", "attention_cm.comp", {**d, "COOPMAT": "1"}))
        rows.append((f"attention_cm_emu_{kname}_f16", "attention_cm.comp", {**d, "EMULATE": "1"}))
        for sg2, bc2 in ((2, 64), (4, 32)):   # trial shapes, for bench/attention_cm_sweep.py (VKML_ATTENTION_CM="<SG>x<BC>")
            rows.append((f"attention_cm{sg2}x{bc2}_{kname}_f16", "attention_cm.comp", {**d, "SG": str(sg2), "BC": str(bc2), "COOPMAT": "1"}))
    return rows


VARIANTS_NN = _rows()

if __name__ == "__main__":
    for r in VARIANTS_NN: print(*r)
