"""Shader variants of the nn kernels: matmul, convolution helpers, pooling, gather, index_add.

`VARIANTS_NN` rows are `(name, file, defines)`; `shaders/variants.py` imports and appends them, and
`shaders/build.py` compiles each row with `glslc --target-env=vulkan1.2 -O -D<k>=<v> ...` into
`vkml/spirv/<name>.spv`. The storage type is chosen by one define (T_F32, T_F16, T_F64, T_I32,
T_I64, T_B8; see nn_common.glsl), the kernel of a multi-kernel file by another. float64 has every
kernel but pooling's, and one matmul tile (64x64 with BK = 8: its shared slabs stay at 8 KiB).
"""

_T = {"f32": "T_F32", "f16": "T_F16", "f64": "T_F64", "i32": "T_I32", "i64": "T_I64", "b8": "T_B8"}
FLOAT_SFX = ("f32", "f16")
F64_SFX = ("f32", "f16", "f64")   # the float kernels that have a float64 variant too

# matmul tile shapes: name -> (BM, BN, BK, TM, TN); threads = (BM/TM) * (BN/TN) = 256 for both.
MATMUL_TILES = {"matmul": (64, 64, 16, 4, 4), "matmul128": (128, 128, 16, 8, 8)}
MATMUL_F64 = (64, 64, 8, 4, 4)   # matmul_f64: the 64x64 tile, half the K step (doubles fill shared memory twice as fast)


def _rows():
    rows = []
    for kname, (bm, bn, bk, tm, tn) in MATMUL_TILES.items():
        for s in FLOAT_SFX:
            rows.append((f"{kname}_{s}", "matmul.comp",
                         {_T[s]: "1", "BM": str(bm), "BN": str(bn), "BK": str(bk), "TM": str(tm), "TN": str(tn)}))
    # f16 operands, f32 result (conv_transpose2d's columns stay unrounded until col2im)
    for kname, (bm, bn, bk, tm, tn) in MATMUL_TILES.items():
        rows.append((f"{kname}_f16_f32", "matmul.comp",
                     {"T_F16": "1", "C_F32": "1", "BM": str(bm), "BN": str(bn), "BK": str(bk), "TM": str(tm), "TN": str(tn)}))
    rows.append(("matmul_small_f16_f32", "matmul.comp", {"T_F16": "1", "C_F32": "1", "SMALL": "1", "TM": "4", "TN": "4"}))
    rows.append(("col2im_f32_f16", "conv.comp", {"T_F16": "1", "X_F32": "1", "COL2IM": "1"}))
    bm, bn, bk, tm, tn = MATMUL_F64
    rows.append(("matmul_f64", "matmul.comp", {"T_F64": "1", "BM": str(bm), "BN": str(bn), "BK": str(bk), "TM": str(tm), "TN": str(tn)}))
    for s in F64_SFX:   # small products: one 4x4 register block per thread, no shared memory
        rows.append((f"matmul_small_{s}", "matmul.comp", {_T[s]: "1", "SMALL": "1", "TM": "4", "TN": "4"}))
    for kname, file, kind, sfxs in [("im2col", "conv.comp", "IM2COL", F64_SFX), ("col2im", "conv.comp", "COL2IM", F64_SFX),
                                    ("conv_transpose2d", "conv.comp", "CONV_TRANSPOSE2D", F64_SFX),
                                    ("maxpool2d", "pool.comp", "MAXPOOL2D", FLOAT_SFX), ("avgpool2d", "pool.comp", "AVGPOOL2D", FLOAT_SFX),
                                    ("maxpool2d_backward", "pool.comp", "MAXPOOL2D_BACKWARD", FLOAT_SFX)]:
        for s in sfxs:
            rows.append((f"{kname}_{s}", file, {_T[s]: "1", kind: "1"}))
    for s in ("f32", "f16", "f64", "i32", "i64", "b8"):
        rows.append((f"gather_{s}", "gather.comp", {_T[s]: "1"}))
    for s in ("f32", "f16", "f64", "i32", "i64"):
        rows.append((f"index_add_{s}", "index_add.comp", {_T[s]: "1"}))
    return rows


VARIANTS_NN = _rows()

if __name__ == "__main__":
    for r in VARIANTS_NN: print(*r)
