"""Fuzzing against the CPU oracle (the harness: vkml.lab.fuzz, nbs/52_fuzz.ipynb).

Random programs of public operators over random shapes (empty and broadcast ones included), dtypes,
devices and hostile values run on the CPU oracle and on the Vulkan device: every case agrees within
the parity bounds or raises a VkmlError (a device may also refuse what it cannot do) — never another
exception, a hang (pytest-timeout), a validation-layer message or a different answer.

Profiles (`VKML_FUZZ_PROFILE`):
- `ci` (the default): `CI_CHUNKS` chunks of `CHUNK` programs each (10,000 in all), each chunk with its
  own fixed seed, so a run is reproducible; about a minute on lavapipe.
- `long`: chunks with fresh seeds until `VKML_FUZZ_MINUTES` (default 60) have passed, longer programs,
  more hostile values and more fusion; run it on demand:
  `VKML_FUZZ_PROFILE=long VKML_VALIDATION=1 .venv/bin/python -m pytest tests/test_fuzz.py -k long --timeout 0`.

A failing case prints its program; paste `program.to_json()` into `vkml.lab.fuzz.REGRESSIONS` (the notebook)
and it is replayed by `test_regressions` from then on. The planted-bug tests check that the CI profile
finds a wrong stride in a kernel and a missing index check.

Mutation programs (the CI profile): `MUTATION_CI` programs (2,000) of lazy reads, in-place writes, optimiser
steps, state dicts and jit replays, each checked against the same program realized eagerly (PyTorch's
semantics); every one must agree. A failing chunk prints each kind of failure with a shrunk program;
`python -m vkml.lab.fuzz --mutation --n 200 --seed S` runs them from the command line. The planted-bug test
checks that they find a missing ordering of readers before a write.
"""
import os, random, sys, time
import numpy as np
import pytest
from hypothesis import given, settings, seed, HealthCheck, Phase
import vkml
import vkml.lab.fuzz as fz

pytestmark = pytest.mark.vulkan
PROFILE = os.environ.get("VKML_FUZZ_PROFILE", "ci")
RAN = {"cases": 0, "mutations": 0}


def _settings(n, shrink=True):
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=n, deadline=None, database=None, derandomize=False, phases=phases,
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=True)


def fuzz(n, chunk_seed, shrink=True, **kw):
    "Run `n` programs from seed `chunk_seed`; the outcome counts."
    counts = {}
    @_settings(n, shrink)
    @seed(chunk_seed)
    @given(fz.programs(**kw))
    def prop(prog):
        from vkml.backends.vulkan.device import validation_messages, clear_validation_messages
        kind = fz.check(prog)
        counts[kind] = counts.get(kind, 0) + 1
        msgs = list(validation_messages())
        if msgs:
            clear_validation_messages()
            raise fz.Mismatch(f"the validation layer reported: {msgs[0][:500]}\n{prog}")
    prop()
    return counts


@pytest.mark.skipif(PROFILE != "ci", reason="the CI profile")
@pytest.mark.parametrize("chunk", range(fz.CI_CHUNKS))
def test_fuzz_ci(chunk):
    counts = fuzz(fz.CHUNK, fz.CI_SEED + chunk)
    RAN["cases"] += sum(counts.values())
    assert sum(counts.values()) == fz.CHUNK, counts
    assert counts.get("value", 0) > fz.CHUNK // 4, counts     # most programs compute something


@pytest.mark.skipif(PROFILE != "ci", reason="the CI profile")
def test_fuzz_ci_ran_ten_thousand_cases():
    "Runs after the chunks (same file, later in order): the profile ran what it promises."
    if RAN["cases"] == 0: pytest.skip("run with the chunks (`-k fuzz_ci`)")
    assert RAN["cases"] >= 10_000 == fz.CI_CHUNKS * fz.CHUNK


@pytest.mark.skipif(PROFILE != "long", reason="the long profile: VKML_FUZZ_PROFILE=long")
@pytest.mark.timeout(60 * float(os.environ.get("VKML_FUZZ_MINUTES", "60")) + 600)   # (the 300 s default cut it short)
def test_fuzz_long():
    end = time.monotonic() + 60 * float(os.environ.get("VKML_FUZZ_MINUTES", "60"))
    rng, total = random.Random(), 0
    while time.monotonic() < end:
        s = rng.randrange(2**32)
        print(f"chunk seed {s}", flush=True)
        total += sum(fuzz(2000, s, max_steps=5, hostile=0.3, fuse=0.5).values())
    print(f"{total} cases")


@pytest.mark.parametrize("i", range(len(fz.REGRESSIONS)))
def test_regressions(i):
    "Programs the fuzzer once failed on, replayed (fused and unfused)."
    prog = fz.Program.from_json(fz.REGRESSIONS[i])
    fz.check(prog)
    prog.fuse = not prog.fuse
    fz.check(prog)


# ---------------------------------------------------------------- planted bugs the CI profile must find
def _finds(n=fz.CHUNK * fz.CI_CHUNKS) -> str:
    "The first failure in the CI profile's programs (no shrinking), or ''."
    for chunk in range(fz.CI_CHUNKS):
        try: fuzz(fz.CHUNK, fz.CI_SEED + chunk, shrink=False)
        except (fz.Mismatch, AssertionError) as e: return str(e)
        n -= fz.CHUNK
        if n <= 0: break
    return ""


@pytest.fixture
def fresh_plans():
    """A planted bug patches an internal function: the plans remembered before it (and the launch words their kernels
    keep) must not hide it, and the plans made under it must not outlive it (a later test would read the wrong words)."""
    from vkml.engine import schedule
    schedule._plans.clear()
    yield
    schedule._plans.clear()


@pytest.mark.usefixtures("fresh_plans")
def test_fuzz_finds_a_planted_wrong_stride(monkeypatch):
    "A generated kernel that reads a strided operand with two strides swapped gives wrong answers: found."
    from vkml.backends.vulkan import codegen
    real = codegen.operand_words
    def wrong(view, shape):
        w = real(view, shape)
        return w if w[0] != 2 else (*w[:4], w[5], w[4])     # swap the last two strides
    monkeypatch.setattr(codegen, "operand_words", wrong)
    found = _finds()
    assert "differ" in found, found[:500]


@pytest.mark.usefixtures("fresh_plans")
def test_fuzz_finds_a_planted_missing_index_check(monkeypatch):
    """Indices computed on the device, checked by no one (the flags are never read): the clamped answer is found
    (as the device returning a value where the oracle raises, or, when the program's bad index lives on the
    device in the oracle's run, the other way round)."""
    from vkml.backends.vulkan import recorder as dispatch
    from vkml.backends.vulkan.device import get_device
    real = dispatch.Recorder._done
    def done(self, qpool, names, profiles, keep, flags, serial):
        self.rt.watch.discard(serial)
        return real(self, qpool, names, profiles, keep, [], serial)
    monkeypatch.setattr(dispatch.Recorder, "_done", done)
    found = _finds()
    assert ("returned a value" in found or "where the oracle computes" in found) and "IndexOutOfRangeError" in found, found[:500]


# ---------------------------------------------------------------- mutation programs
MUTATION_CHUNKS = 4


@pytest.mark.skipif(PROFILE != "ci", reason="the CI profile")
@pytest.mark.parametrize("chunk", range(MUTATION_CHUNKS))
def test_mutation_ci(chunk):
    "Every mutation program reads what its eager reference reads, and raises where it raises."
    n = fz.MUTATION_CI // MUTATION_CHUNKS
    counts, failures = fz.mutations(n, fz.MUTATION_SEED + chunk * n)
    RAN["mutations"] += sum(counts.values())
    assert not failures, (f"{counts['failed']} of {n} mutation programs differ from the eager reference "
                          f"({dict(counts)}):\n" + fz.report(failures, shrunk=3))
    assert counts["value"] > n // 2, counts     # most programs run to their end


@pytest.mark.skipif(PROFILE != "ci", reason="the CI profile")
def test_mutation_ci_ran_two_thousand_programs():
    "Runs after the chunks: the profile ran what it promises."
    if RAN["mutations"] == 0: pytest.skip("run with the chunks (`-k mutation_ci`)")
    assert RAN["mutations"] >= 2_000 == fz.MUTATION_CI


def test_mutation_finds_a_planted_missing_write_barrier(monkeypatch):
    """The schedule no longer orders the readers of an ASSIGN's target memory before it (`order` becomes the plain
    topological sort): some CI program then fails, or fails differently, than it does with the ordering (today
    many fail without the fault too: found means a different failure, once the core is fixed a failure)."""
    S = sys.modules["vkml.engine.schedule"]
    real, plain = S.order, lambda outputs, memory_of=None: S._unrealized(outputs)
    monkeypatch.setenv("VKML_PLAN_CACHE", "0")      # (no plan made under the fault outlives it)
    def outcome(s):
        try: return fz.check_mutation(fz.mutation(s))
        except fz.MutationMismatch as e: return str(e)
    for s in range(fz.MUTATION_SEED, fz.MUTATION_SEED + fz.MUTATION_CI):
        before = outcome(s)
        monkeypatch.setattr(S, "order", plain)
        after = outcome(s)
        monkeypatch.setattr(S, "order", real)
        if after != before and outcome(s) == before: break     # (and not a program whose outcome varies anyway)
    assert after != before and after not in ("value", "error"), f"program {s}: {after[:500]}"
