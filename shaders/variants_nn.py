"""Shader variants of the nn kernels: matmul, convolution helpers, pooling, gather, index_add.

`VARIANTS_NN` rows are `(name, file, defines)`; `shaders/variants.py` imports and appends them, and
`shaders/build.py` compiles each row with `glslc --target-env=vulkan1.2 -O -D<k>=<v> ...` into
`vkml/spirv/<name>.spv`. The storage type is chosen by one define (T_F32, T_F16, T_I32, T_I64,
T_B8; see nn_common.glsl), the kernel of a multi-kernel file by another.
"""

_T = {"f32": "T_F32", "f16": "T_F16", "i32": "T_I32", "i64": "T_I64", "b8": "T_B8"}
FLOAT_SFX = ("f32", "f16")

# matmul tile shapes: name -> (BM, BN, BK, TM, TN); threads = (BM/TM) * (BN/TN) = 256 for both.
MATMUL_TILES = {"matmul": (64, 64, 16, 4, 4), "matmul128": (128, 128, 16, 8, 8)}


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
    for s in FLOAT_SFX:   # small products: one 4x4 register block per thread, no shared memory
        rows.append((f"matmul_small_{s}", "matmul.comp", {_T[s]: "1", "SMALL": "1", "TM": "4", "TN": "4"}))
    for kname, file, kind in [("im2col", "conv.comp", "IM2COL"), ("col2im", "conv.comp", "COL2IM"),
                              ("conv_transpose2d", "conv.comp", "CONV_TRANSPOSE2D"),
                              ("maxpool2d", "pool.comp", "MAXPOOL2D"), ("avgpool2d", "pool.comp", "AVGPOOL2D"),
                              ("maxpool2d_backward", "pool.comp", "MAXPOOL2D_BACKWARD")]:
        for s in FLOAT_SFX:
            rows.append((f"{kname}_{s}", file, {_T[s]: "1", kind: "1"}))
    for s in ("f32", "f16", "i32", "i64", "b8"):
        rows.append((f"gather_{s}", "gather.comp", {_T[s]: "1"}))
    for s in ("f32", "f16", "i32", "i64"):
        rows.append((f"index_add_{s}", "index_add.comp", {_T[s]: "1"}))
    rows.append(("check_index_i64", "check_index.comp", {"T_I64": "1"}))
    return rows


VARIANTS_NN = _rows()

if __name__ == "__main__":
    for r in VARIANTS_NN: print(*r)
