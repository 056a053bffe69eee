"""The special family (vkml.special: the rows of nbs/03_elementwise.ipynb's special functions, integer math and
PyTorch's names over them, nbs/18a_special.ipynb) against PyTorch's own results, recorded in
tests/fixtures/torch_special.npz by tests/fixtures/make_torch_special.py (the tests FAIL while it is missing):
forward on the CPU (float64) and on Vulkan (float32), the gradients PyTorch computes (float64 on the CPU, float32 on
Vulkan), gradcheck in float64, and the typed errors. Every row of the operator table whose function is in
vkml.special has a case here (a new row without PyTorch's values fails)."""
import json
from pathlib import Path
import numpy as np
import pytest

import vkml
import vkml.special as SP
import vkml.frontend.registry as R
from vkml.frontend.gradcheck import gradcheck
import oracle

NPZ = Path(__file__).resolve().parent / "fixtures" / "torch_special.npz"
DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]
_CACHE = {}


def npz() -> dict:
    "The npz's arrays by name; a missing npz FAILS the test that asks (the comparison must run)."
    if not NPZ.exists():
        pytest.fail(f"{NPZ} is missing: run tests/fixtures/make_torch_special.py where torch is installed and commit the npz",
                    pytrace=False)
    if not _CACHE:
        with np.load(NPZ) as z: _CACHE.update({k: z[k] for k in z.files})
    return _CACHE


CASES = json.loads(str(np.load(NPZ)["meta/cases"])) if NPZ.exists() else {}
FAMILY = R.names(module="vkml.special")
TESTED_OPERATORS = set(CASES) & set(FAMILY)
"The operators of the table this file checks against PyTorch."
NO_GRAD_YET = {"polygamma", "special.polygamma", "special.zeta"}   # through ZETA, whose rule is not yet written
GRADS = [n for n, c in CASES.items() if c["grad"] and n not in NO_GRAD_YET]


def inputs(name, device, dtype, requires_grad=False) -> list:
    d, ts, j = npz(), [], 0
    while f"{name}/in{j}" in d:
        a = d[f"{name}/in{j}"]
        t = vkml.tensor(a.astype(dtype) if a.dtype.kind == "f" else a, device=device)
        ts.append(t.requires_grad_() if requires_grad and a.dtype.kind == "f" else t)
        j += 1
    return ts


def run(name, ts):
    return R.OPERATORS[name].fn(*CASES[name]["lead"], *ts, **CASES[name]["kwargs"])


def test_every_operator_of_the_family_has_a_torch_case():
    assert FAMILY and set(FAMILY) == set(CASES), f"add to tests/fixtures/make_torch_special.py and run it: {sorted(set(FAMILY) - set(CASES))}"
    assert str(npz()["meta/torch_version"]).startswith("2.")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_torch(name, device):
    "float64 on the CPU within float64's bound, float32 on Vulkan within float32's (integers exactly)."
    dtype = np.float64 if device == "cpu" else np.float32
    want = npz()[f"{name}/out"]
    with np.errstate(all="ignore"): outs = run(name, inputs(name, device, dtype))
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    for k, extra in enumerate(outs[1:], 1):                                    # frexp's exponent
        oracle.assert_close(extra.numpy(), npz()[f"{name}/out{k}"], what=f"{name} out{k} on {device}")
    got = outs[0].numpy()
    oracle.assert_close(got, want, dtype=dtype if got.dtype.kind == "f" else None, what=f"{name} on {device}",   # (float_power:
                        same_dtype=want.dtype.kind != "f")                                          # float64 of float32 inputs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", GRADS)
def test_gradients_match_torch(name, device):
    "The gradients of sum(w·f(inputs)): float64 on the CPU, float32 on Vulkan."
    dtype = np.float64 if device == "cpu" else np.float32
    ts = inputs(name, device, dtype, requires_grad=True)
    d = npz()
    y = run(name, ts)
    y = y[0] if isinstance(y, tuple) else y
    (y * vkml.tensor(d[f"{name}/w"].astype(y.dtype.np), device=device)).sum().backward()
    tol = dict(rtol=1e-7, atol=1e-9) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    floats = [t for t in ts if t.dtype.is_float]
    for j, t in enumerate(floats):
        if f"{name}/grad{j}" in d:
            oracle.assert_close(t.grad.numpy(), d[f"{name}/grad{j}"], what=f"{name} grad{j} on {device}", same_dtype=False, **tol)


@pytest.mark.parametrize("name", GRADS)
def test_gradcheck(name):
    "Central differences in float64 against the rows' gradient rules (the first two rows of each input)."
    ins = [a[:2] if a.ndim == 2 else a for a in (npz()[f"{name}/in{j}"] for j in range(len(CASES[name]["domains"])))]
    assert gradcheck(lambda *ts: (lambda y: y[0] if isinstance(y, tuple) else y)(run(name, ts)), ins)


def test_a_wrong_value_is_caught():
    "The comparison can fail: ndtr against PyTorch's log_ndtr."
    got = SP.ndtr(inputs("special.log_ndtr", "cpu", np.float64)[0]).numpy()
    with pytest.raises(AssertionError): oracle.assert_close(got, npz()["special.log_ndtr/out"])


def test_typed_errors():
    x = vkml.tensor(np.array([1.0, 2.0]))
    with pytest.raises(vkml.DTypeError, match="int64"): SP.entr(vkml.tensor(np.array([1, 2])))     # a float row
    with pytest.raises(vkml.DTypeError, match="float"): SP.gcd(x, x)                                # an integer row
    with pytest.raises(vkml.ArgumentError, match="at least one vkml Tensor"): SP.xlog1py(1.0, 2.0)
    with pytest.raises(vkml.DTypeError, match="vkml Tensor"): SP.erfcx(np.array([1.0]))
    with pytest.raises(vkml.ShapeError): SP.heaviside(x, vkml.tensor(np.array([1.0, 2.0, 3.0])))


@pytest.mark.vulkan
def test_the_rows_fuse_on_vulkan():
    "A chain of the family's rows is one generated kernel: the result equals the CPU's."
    a = np.linspace(-3, 3, 12)
    build = lambda t: SP.log_ndtr(SP.i0e(t) * 2.0 - 1.0) + SP.erfcx(t) * SP.sinc(t)
    cpu, vk = oracle.on_devices(build, a.astype(np.float32))
    oracle.assert_close(vk, cpu, what="fused special chain")


@pytest.mark.parametrize("name", sorted(NO_GRAD_YET))
def test_zeta_gradient_is_a_typed_error(name):
    "PyTorch differentiates ζ in q (and polygamma through it); vkML says it cannot yet, by name."
    ts = inputs(name, "cpu", np.float64, requires_grad=True)
    with pytest.raises(vkml.GradError, match="cannot differentiate through ZETA"):
        run(name, ts).sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_chebyshev_closed_forms(device):
    "Past n = 8 (4 to 6 for the shifted forms) and inside (-1, 1) the Chebyshev families are cos(n·acos x)...: against "
    "SciPy's values in float64, away from the polynomials' zeros (where cos(n·acos x) is ill-conditioned, PyTorch's too)."
    from scipy import special as S
    x, n = np.linspace(-0.95, 0.95, 39), 13
    for name, ref in (("chebyshev_polynomial_t", S.eval_chebyt(n, x)), ("chebyshev_polynomial_u", S.eval_chebyu(n, x)),
                      ("chebyshev_polynomial_v", S.eval_chebyt(2 * n + 1, np.sqrt((1 + x) / 2)) / np.sqrt((1 + x) / 2)),
                      ("shifted_chebyshev_polynomial_t", S.eval_chebyt(n, x))):
        arg = (x + 1) / 2 if name.startswith("shifted") else x
        got = getattr(SP, name)(vkml.tensor(arg, device=device), float(n)).numpy()
        far = np.abs(ref) > 0.05 * np.abs(ref).max()
        oracle.assert_close(got[far], ref[far], what=f"{name} on {device}")
