"""The shipped SPIR-V: push-constant blocks fit in 128 bytes, every module matches its sources, and the
variant table and vkml/spirv/ agree. No Vulkan device needed; the rebuild needs glslc."""
import importlib.util, json, re, shutil, struct, subprocess
import numpy as np
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
SPIRV, SHADERS = ROOT / "vkml" / "spirv", ROOT / "shaders"
MAX_PUSH = 128  # bytes every Vulkan device guarantees (lavapipe's limit)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod

build = _load("_vkml_shader_build", SHADERS / "build.py")
VARIANTS = build.load_variants()
needs_glslc = pytest.mark.skipif(shutil.which("glslc") is None, reason="glslc is not installed")

# --- a pure-Python SPIR-V reader: just enough to size the push-constant block and shared memory ----
OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_VECTOR, OP_TYPE_MATRIX = 21, 22, 23, 24
OP_TYPE_ARRAY, OP_TYPE_STRUCT, OP_TYPE_POINTER, OP_CONSTANT = 28, 30, 32, 43
OP_VARIABLE, OP_DECORATE, OP_MEMBER_DECORATE = 59, 71, 72
SC_PUSH_CONSTANT, DEC_ARRAY_STRIDE, DEC_OFFSET = 9, 6, 35


SC_WORKGROUP, LAVAPIPE_SHARED = 4, 32768   # shared memory: lavapipe's maxComputeSharedMemorySize


def _variable_sizes(spv: bytes, storage_class: int) -> list:
    """Bytes of each variable of `storage_class` in a SPIR-V module: laid out by its Offset / ArrayStride decorations
    where it has them (push constants), else naturally (shared memory)."""
    words = struct.unpack(f"<{len(spv) // 4}I", spv)
    assert words[0] == 0x07230203, "not a SPIR-V module (or not little-endian)"
    types, consts, offsets, strides, found = {}, {}, {}, {}, []
    i = 5                                   # the header is 5 words
    while i < len(words):
        count, op = words[i] >> 16, words[i] & 0xFFFF
        a = words[i + 1:i + count]
        if op in (OP_TYPE_INT, OP_TYPE_FLOAT): types[a[0]] = ("scalar", a[1] // 8)
        elif op in (OP_TYPE_VECTOR, OP_TYPE_MATRIX): types[a[0]] = ("vector", a[1], a[2])
        elif op == OP_TYPE_ARRAY: types[a[0]] = ("array", a[1], a[2])
        elif op == OP_TYPE_STRUCT: types[a[0]] = ("struct", a[1:])
        elif op == OP_TYPE_POINTER: types[a[0]] = ("pointer", a[1], a[2])
        elif op == OP_CONSTANT: consts[a[1]] = a[2]
        elif op == OP_DECORATE and a[1] == DEC_ARRAY_STRIDE: strides[a[0]] = a[2]
        elif op == OP_MEMBER_DECORATE and a[2] == DEC_OFFSET: offsets[(a[0], a[1])] = a[3]
        elif op == OP_VARIABLE and a[2] == storage_class: found.append(a[0])
        i += count

    def size(t):
        kind, *rest = types[t]
        if kind == "scalar": return rest[0]
        if kind == "vector": return rest[1] * size(rest[0])
        if kind == "array": return consts[rest[1]] * strides.get(t, size(rest[0]))
        if kind == "struct":
            members = list(enumerate(rest[0]))
            if any((t, m) in offsets for m, _ in members): return max((offsets[(t, m)] + size(mt) for m, mt in members), default=0)
            return sum(size(mt) for _, mt in members)
        raise ValueError(f"unexpected type {kind} in a variable")

    sizes = []
    for ptr in found:
        kind, sc, pointee = types[ptr]
        assert kind == "pointer" and sc == storage_class
        sizes.append(size(pointee))
    return sizes


def push_constant_size(spv: bytes) -> int:
    "Bytes of the push-constant block of a SPIR-V module (0 when it has none)."
    return max(_variable_sizes(spv, SC_PUSH_CONSTANT), default=0)


def shared_memory_size(spv: bytes) -> int:
    "Bytes of a module's shared (Workgroup) variables, each laid out naturally."
    return sum(_variable_sizes(spv, SC_WORKGROUP))


def test_shared_memory_is_what_the_host_checks():
    """Every module fits lavapipe's 32 KiB of shared memory, except the deep twins, which the host chooses only where the
    device has what they take (kernels_nn.DEEP_TILES, CM_DEEP: their figures must cover the modules), and the
    GPU-only tiles (NO_EMULATION); the tensor-core attention takes exactly what kernels_nn.attention_cm_shared says."""
    import vkml.backends.vulkan.kernels_nn as kn
    deep = kn.DEEP_TILES["matmul128"][2]
    cm_deep = {twin: need for twin, need in kn.CM_DEEP.values()}
    for name, *_ in VARIANTS:
        n = shared_memory_size((SPIRV / f"{name}.spv").read_bytes())
        if name.startswith("attention_cm"):   # the shipped shape and its twin, or a trial shape (<SG>x<BC>)
            sg, bc, mode = re.match(r"attention_cm(?:_emu|(\d+)x(\d+))?_([a-z]+)_f16$", name).groups()
            shape = (int(sg), int(bc)) if sg else kn.ATTENTION_CM
            assert n == kn.attention_cm_shared(mode, *shape), name
            if sg: continue   # a trial shape runs only where the device has its memory (kernels_nn.attention_cm)
        if n <= LAVAPIPE_SHARED: continue
        tile = re.split(r"_v[km][nk]_|_f(?:16|32)", name)[0]
        if re.match(r"(matmul|conv|wgrad)128d$", tile): assert n <= deep, (name, n, deep)
        elif tile in cm_deep: assert n <= cm_deep[tile], (name, n)
        else: assert tile in kn.NO_EMULATION, f"{name}: {n} bytes of shared memory, more than lavapipe's {LAVAPIPE_SHARED}"


@pytest.mark.parametrize("name", sorted(v[0] for v in VARIANTS))
def test_push_constants_fit(name):
    n = push_constant_size((SPIRV / f"{name}.spv").read_bytes())
    assert 0 < n <= MAX_PUSH, f"{name}: push-constant block of {n} bytes (limit {MAX_PUSH})"


def test_generated_kernels_push_one_word():
    "Every shipped generated kernel takes one push-constant word (where its arguments start in the argument buffer)."
    gen = sorted(SPIRV.glob("gen_*.spv"))
    assert len(gen) > 100
    for p in gen: assert push_constant_size(p.read_bytes()) == 4, p.name


@needs_glslc
def test_fused_kernels_push_one_word_too(tmp_path):
    "A fused kernel of many ops compiled at run time is checked like every module: one word of push constants."
    import vkml
    from vkml.backends.vulkan import codegen
    from vkml.engine.schedule import schedule
    a = vkml.tensor(np.ones((3, 4), np.float32)); b = vkml.tensor(np.ones(4, np.float32))
    y = ((a * 2 + b).exp() - a).relu().sigmoid()
    k = schedule(y, fuse=True).dispatching[0]
    assert len(k.nodes) >= 6
    for form in ("scalar", "vec4"):
        code = codegen.compile_glsl(codegen.write_glsl(codegen.describe(k).desc, form))
        assert push_constant_size(code) == 4


_BIG = """#version 450
layout(local_size_x = 1) in;
layout(push_constant) uniform PC { uint n; vec4 v[8]; uint tail; } pc;
layout(std430, binding = 0) buffer B { uint b[]; };
void main() { b[0] = pc.n + uint(pc.v[7].w) + pc.tail; }
"""

@needs_glslc
def test_reader_sees_an_oversized_block(tmp_path):
    "The reader on a block glslc accepts but Vulkan may not: 4 + 12 pad + 8*16 + 4 = 148 bytes."
    src = tmp_path / "big.comp"; src.write_text(_BIG)
    subprocess.run(["glslc", "--target-env=vulkan1.2", "-O", str(src), "-o", str(tmp_path / "big.spv")], check=True)
    n = push_constant_size((tmp_path / "big.spv").read_bytes())
    assert n == 148 and n > MAX_PUSH


def test_reader_matches_the_contract_layout():
    "fill's block is 4 words: n, v[2], z_off; copy's 29."
    assert push_constant_size((SPIRV / "fill_f32.spv").read_bytes()) == 4 * 4
    assert push_constant_size((SPIRV / "copy_f32.spv").read_bytes()) == 29 * 4


def test_variant_table_matches_spirv_dir():
    names = [v[0] for v in VARIANTS]
    assert len(names) == len(set(names)), "duplicate variant names"
    shipped = {p.stem for p in SPIRV.glob("*.spv") if not p.stem.startswith("gen_")}
    assert not set(names) - shipped, f"missing: {sorted(set(names) - shipped)}"
    assert not shipped - set(names), f"stray .spv files: {sorted(shipped - set(names))}"
    manifest = json.loads((SPIRV / "manifest.json").read_text())
    assert set(manifest) == set(names)


def test_manifest_hashes_match_sources():
    "The manifest's hashes (source + includes + defines + flags) match the shaders as they are now."
    assert build.check() == []


@needs_glslc
def test_shipped_spirv_is_what_the_sources_compile_to(tmp_path):
    "Recompile every variant and compare bytes (glslc's output is deterministic)."
    build.build(force=True, outdir=tmp_path, verbose=False)
    names = [n for n, _, _ in VARIANTS] + list(build.generated())
    differ = [n for n in names if (tmp_path / f"{n}.spv").read_bytes() != (SPIRV / f"{n}.spv").read_bytes()]
    assert not differ, f"stale SPIR-V (run python shaders/build.py): {differ}"


def _codes(file, prefix):
    return {m[0]: int(m[1]) for m in re.findall(rf"#define {prefix}_(\w+) (\d+)", (SHADERS / file).read_text())}


def test_op_codes_agree_with_the_shaders():
    "The host's op-code tables and the shaders' #defines are one table written twice: they must agree."
    k = pytest.importorskip("vkml.backends.vulkan.kernels")
    assert k.REDUCE_CODE == _codes("reduce.comp", "R")


def _sample_dispatches():
    "One dispatch of every host kernel of vkml.backends.vulkan.kernels, built on stand-in tensors."
    k = pytest.importorskip("vkml.backends.vulkan.kernels")
    from vkml.frontend.tensor import Node
    from vkml.core.ops import Op
    from vkml.core.dtypes import float32, float16, int64, bool_, View
    F = k.FakeTensor
    N = lambda op, arg, shape, dt=float32: Node(op, (), arg, shape, dt, "vulkan")
    x, xt = F((4, 3)), F((3, 4), view=View((3, 4), (1, 3), 0))
    ds = []
    ds += k.fill_dispatch(F((4, 3)), 1.5)
    ds += k.pad_kernel(N(Op.PAD, (((1, 1), (0, 2)), 0.0), (6, 5)), F((6, 5)), x)
    ds += k.concat_kernel(N(Op.CONCAT, 0, (8, 3)), F((8, 3)), x, x)
    ds += k.slice_backward_kernel(N(Op.SLICE_BACKWARD, ((0, 4, 2), (0, 3, 1)), (4, 3)), F((4, 3)), F((2, 3)))
    ds += k.reduce_kernel(N(Op.SUM, ((1,), False), (4,)), F((4,)), x)
    ds += k.reduce_kernel(N(Op.MAX, ((1,), False), (4,)), F((4,)), F((4, 1000)))
    ds += k.reduce_kernel(N(Op.MEAN, ((0,), False), ()), F(()), F((10**6,)))   # the two split passes
    ds += k.argreduce_kernel(N(Op.ARGMAX, (1, False), (4,), int64), F((4,), int64), x)
    ds += k.argreduce_kernel(N(Op.ARGMAX, (1, False), (4,), int64), F((4,), int64), F((4, 1000)))
    ds += k.cumsum_kernel(N(Op.CUMSUM, 1, (4, 3)), F((4, 3)), x)
    ds += k.cumsum_kernel(N(Op.CUMSUM, 1, (4, 300)), F((4, 300)), F((4, 300)))
    ds += k.reduce_kernel(N(Op.SUM, ((0,), False), (64,)), F((64,)), F((100, 64)))
    ds += k.reduce_kernel(N(Op.SUM, ((0,), False), (64,)), F((64,)), F((10**5, 64)))   # split cols (vec)
    ds += k.reduce_kernel(N(Op.SUM, ((0,), False), (63,)), F((63,)), F((100, 63)))     # cols, not 4-aligned
    ds += k.reduce_kernel(N(Op.SUM, ((0,), False), (63,)), F((63,)), F((10**5, 63)))   # split cols
    ds += k.reduce_kernel(N(Op.SUM, ((1,), False), (4,)), F((4,)), F((4, 1001)))       # rows, not 4-aligned
    ds += k.reduce_kernel(N(Op.SUM, ((0,), False), ()), F(()), F((10**6,), view=View((10**6,), (2,), 0)))   # split rows, strided
    ds += k.argreduce_kernel(N(Op.ARGMAX, (0, False), (64,), int64), F((64,), int64), F((1000, 64)))
    ds += k.argsort_kernel(N(Op.ARGSORT, (1, True), (4, 5), int64), F((4, 5), int64), F((4, 5)))
    return ds


def test_argsort_declares_the_binding_it_writes():
    """Regression: argsort's last dispatch writes its output, binding 1, and said binding 0 (the default): the barrier
    planner saw no write, and a gather of the positions (topk) read them with no barrier (a sync hazard the
    validation layer reported on the discrete paths, in the GPT demo's sampler)."""
    ds = [d for d in _sample_dispatches() if d.shader.startswith("argsort")]
    assert [d.shader for d in (ds[0], ds[-1])] == ["argsort_init_f32", "argsort_out"]
    assert ds[0].writes == (0,) and all(d.writes == (0,) for d in ds if d.shader == "argsort_step")
    assert ds[-1].writes == (1,)


def test_host_push_words_match_the_shader_blocks():
    "Every host kernel sends exactly as many words as its shader's push-constant block holds."
    ds = _sample_dispatches()
    family = lambda name: re.sub(r"(_(f32|f16|i32|i64|b8|v4))+$", "", name)
    assert {family(d.shader) for d in ds} >= {"fill", "copy",
        "reduce", "reduce_row", "reduce_cols", "reduce_part", "reduce_cols_part", "reduce_final", "argreduce", "argreduce_row", "cumsum", "cumsum_row",
        "reduce_row_vec", "reduce_cols_vec", "reduce_part_vec", "reduce_cols_part_vec", "reduce_cols_final", "argreduce_cols"}
    for d in ds:
        assert all(0 <= w < 2**32 for w in d.push), d
        assert len(d.push) * 4 == push_constant_size((SPIRV / f"{d.shader}.spv").read_bytes()), d.shader


def test_a_missing_compiler_leaves_no_temporary(tmp_path, monkeypatch):
    "Regression: without glslang a cooperative-matrix variant raised after its temporary was made, leaving a .tmp in vkml/spirv."
    def missing(): raise RuntimeError("no glslang")
    monkeypatch.setattr(build, "glslang", missing)
    name, file, defines = next(r for r in VARIANTS if "COOPMAT" in r[2])
    with pytest.raises(RuntimeError, match="no glslang"): build.compile_variant(name, file, defines, outdir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_generated_kernels_do_not_depend_on_the_machines_numpy_power():
    """The shipped generated kernels are named by the hash of their GLSL, so a constant computed at import must be the
    same double on every machine. numpy's float64 power takes a vector library on some CPUs and libm on others (last
    bits differ): with every result of np.power nudged by one ulp, the generated sources must not change. (ψ's series
    near its root was summed with np.power, and a fresh clone on an AMD machine failed the SPIR-V check.)"""
    import sys
    code = ("import numpy as np\n"
            "if NUDGE:\n"
            "    real = np.power\n"
            "    np.power = lambda *a, **k: np.nextafter(real(*a, **k), np.inf)\n"
            "from vkml.backends.vulkan.codegen import prebuilt_sources\n"
            "print(' '.join(sorted(prebuilt_sources())))\n")
    names = [subprocess.run([sys.executable, "-c", f"NUDGE = {n}\n" + code], capture_output=True, text=True, check=True).stdout
             for n in (False, True)]
    assert names[0] and names[0] == names[1]
