"""The one table of shader variants: `VARIANTS = [(name, file, defines), ...]`.

`shaders/build.py` compiles each row with `glslc --target-env=vulkan1.2 -O -D<k>=<v> ...` into
`vkml/spirv/<name>.spv`. Names follow the contract: `<kernel>_<dtype>`, with `_row` for the
workgroup-per-row reductions. (Elementwise kernels are generated from the elementwise table: see
`shaders/build.py --generated`.) The storage type
is picked by one define (T_F32 T_F16 T_F64 T_I32 T_I64 T_B8, see common.glsl). Rows of other kernel
families live in `variants_<family>.py` next to this file and are appended here.
"""
import importlib.util, pathlib

T = {"f32": "T_F32", "f16": "T_F16", "f64": "T_F64", "i32": "T_I32", "i64": "T_I64", "b8": "T_B8"}
ALL = ("f32", "f16", "f64", "i32", "i64", "b8")
NUMERIC = ("f32", "f16", "f64", "i32", "i64")
FLOATS = ("f32", "f16", "f64")


def _rows():
    rows = []
    for kname, file, dts in [("fill", "fill.comp", ALL), ("copy", "copy.comp", ALL),
                             ("reduce", "reduce.comp", ALL), ("argreduce", "argreduce.comp", NUMERIC),
                             ("cumsum", "cumsum.comp", ALL)]:
        for s in dts: rows.append((f"{kname}_{s}", file, {T[s]: "1"}))
    for kname, file, dts in [("reduce_row", "reduce.comp", ALL), ("argreduce_row", "argreduce.comp", NUMERIC)]:
        for s in dts: rows.append((f"{kname}_{s}", file, {T[s]: "1", "ROW": "1"}))
    for s in NUMERIC: rows.append((f"argreduce_cols_{s}", "argreduce.comp", {T[s]: "1", "COLS": "1"}))
    for s in ALL: rows.append((f"argsort_init_{s}", "argsort.comp", {T[s]: "1", "INIT": "1"}))
    rows += [("argsort_step", "argsort.comp", {"STEP": "1"}), ("argsort_out", "argsort.comp", {"OUT": "1"})]
    for s in ALL:
        rows.append((f"reduce_cols_{s}", "reduce.comp", {T[s]: "1", "COLS": "1"}))
        rows.append((f"reduce_cols_part_{s}", "reduce.comp", {T[s]: "1", "COLS": "1", "PART": "1"}))
        rows.append((f"cumsum_row_{s}", "cumsum.comp", {T[s]: "1", "ROW": "1"}))
    for s in ALL:   # the two passes of a split reduction (few, very long rows)
        rows.append((f"reduce_part_{s}", "reduce.comp", {T[s]: "1", "ROW": "1", "PART": "1"}))
        rows.append((f"reduce_final_{s}", "reduce.comp", {T[s]: "1", "ROW": "1", "FINAL": "1"}))
        rows.append((f"reduce_cols_final_{s}", "reduce.comp", {T[s]: "1", "COLS": "1", "FINAL": "1"}))
    for s in ("f32", "f16", "f64"):   # a split product's partial slabs, summed a thread per output (kernels_nn._sum_slabs)
        rows.append((f"reduce_slabs_{s}", "reduce.comp", {T[s]: "1", "SLABS": "1", "FINAL": "1"}))
    for s in ("f32", "f16", "i32", "i64"):   # 16-byte loads of 4 terms (rows) or 4 neighbouring outputs (cols), when aligned (kernels.VEC_DTYPES)
        rows.append((f"reduce_row_vec_{s}", "reduce.comp", {T[s]: "1", "ROW": "1", "VEC": "1"}))
        rows.append((f"reduce_part_vec_{s}", "reduce.comp", {T[s]: "1", "ROW": "1", "PART": "1", "VEC": "1"}))
        rows.append((f"reduce_cols_vec_{s}", "reduce.comp", {T[s]: "1", "COLS": "1", "VEC": "1"}))
        rows.append((f"reduce_cols_part_vec_{s}", "reduce.comp", {T[s]: "1", "COLS": "1", "PART": "1", "VEC": "1"}))
    return rows


VARIANTS = _rows()
VARIANTS_ELEMENTWISE = list(VARIANTS)


def _extra(family):
    "Rows of `variants_<family>.py` beside this file, if it exists (loaded by path: shaders/ is no package)."
    p = pathlib.Path(__file__).with_name(f"variants_{family}.py")
    if not p.exists(): return []
    spec = importlib.util.spec_from_file_location(f"_vkml_variants_{family}", p)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return list(getattr(mod, f"VARIANTS_{family.upper()}"))


for _p in sorted(pathlib.Path(__file__).parent.glob("variants_*.py")):   # every family's own rows
    VARIANTS += _extra(_p.stem[len("variants_"):])
assert len({r[0] for r in VARIANTS}) == len(VARIANTS), "duplicate variant names"

if __name__ == "__main__":
    for r in VARIANTS: print(*r)
