"""vkml.linalg against independent references (scipy.linalg, written without vkML) and PyTorch's documented
semantics, quoted where they decide a case: shapes and modes, batches up to rank 4, float32 and float64,
the errors, the gradients' closed forms, and the refusal on Vulkan."""
import math
import numpy as np
import pytest
import scipy.linalg as sl

import vkml
import vkml.linalg as LA
from vkml.core.dtypes import float32, float64, float16, DTypeError, ShapeError, BackendError, LinAlgError
from vkml.core.operands import ArgumentError
from vkml.frontend.tensor import tensor, apply
from vkml.core.ops import Op

TESTED_OPERATORS = {"linalg.cholesky", "linalg.det", "linalg.slogdet", "linalg.inv", "linalg.solve", "linalg.eigh",
                    "linalg.qr", "linalg.svd", "logdet"}
RNG = np.random.default_rng(0)
TOL = {float64: dict(rtol=1e-10, atol=1e-12), float32: dict(rtol=2e-5, atol=2e-6)}   # f32: computed in f64, rounded once


def spd(*shape, seed=0):
    "Symmetric positive-definite matrices of `shape` (..., n, n), well conditioned."
    a = np.random.default_rng(seed).standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def per_matrix(f, a):
    "f applied to every matrix of a batch (the reference: scipy works one matrix at a time)."
    flat = a.reshape(-1, *a.shape[-2:])
    return np.stack([f(m) for m in flat]).reshape(a.shape[:-2] + np.shape(f(flat[0])))


def close(got, want, dt):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, **TOL[dt])


# --- cholesky ------------------------------------------------------------------------------------------
# torch.linalg.cholesky(A, *, upper=False): "A = L L^H where L is a lower triangular matrix with real
# positive diagonal"; "upper: whether to return an upper triangular matrix. The tensor returned with
# upper=True is the conjugate transpose of the tensor returned when upper=False."

@pytest.mark.parametrize("dt", [float64, float32], ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 2, 3, 3)])
def test_cholesky(dt, shape):
    a = spd(*shape)
    L = LA.cholesky(tensor(a, dtype=dt)).numpy()
    assert L.dtype == dt.np
    close(L, per_matrix(lambda m: sl.cholesky(m, lower=True), a), dt)
    close(LA.cholesky(tensor(a, dtype=dt), upper=True).numpy(), np.swapaxes(L.astype(np.float64), -1, -2), dt)


def test_cholesky_not_positive_definite():
    # PyTorch: "torch.linalg.LinAlgError: linalg.cholesky: The factorization could not be completed because
    # the input is not positive-definite (the leading minor of order 2 is not positive-definite)."
    a = np.stack([np.eye(3), np.array([[1.0, 0, 0], [0, -1, 0], [0, 0, 1]])])
    with pytest.raises(LinAlgError, match=r"batch element \(1,\).*order 2"):
        LA.cholesky(tensor(a)).numpy()
    assert issubclass(LinAlgError, RuntimeError)          # torch.linalg.LinAlgError is a RuntimeError


# --- inv, det, slogdet, logdet -------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [float64, float32], ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (2, 2, 2, 2)])
def test_inv_det_slogdet(dt, shape):
    a = RNG.standard_normal(shape) + 2 * np.eye(shape[-1])
    close(LA.inv(tensor(a, dtype=dt)).numpy(), per_matrix(sl.inv, a), dt)
    close(LA.det(tensor(a, dtype=dt)).numpy(), per_matrix(sl.det, a), dt)
    sign, logabs = LA.slogdet(tensor(a, dtype=dt))
    ref = per_matrix(sl.det, a)
    np.testing.assert_array_equal(sign.numpy(), np.sign(ref))
    close(logabs.numpy(), np.log(np.abs(ref)), dt)


def test_inv_of_a_singular_matrix_raises():
    # PyTorch: "torch.linalg.LinAlgError: linalg.inv: The diagonal element 2 is zero, the inversion could not be
    # completed because the input matrix is singular."
    with pytest.raises(LinAlgError, match="singular"):
        LA.inv(tensor([[1.0, 2.0], [2.0, 4.0]])).numpy()
    with pytest.raises(LinAlgError, match="singular"):
        LA.solve(tensor([[1.0, 2.0], [2.0, 4.0]]), tensor([1.0, 1.0])).numpy()


def test_slogdet_and_logdet_of_singular_and_negative():
    # torch.linalg.slogdet: "For real A, sign is -1, 0 or 1 ... if det is zero, logabsdet = -inf and sign = 0".
    # torch.logdet: "It returns -inf if the input has a determinant of zero, and NaN if it has a negative determinant."
    sing, neg = [[1.0, 2.0], [2.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]
    s, l = LA.slogdet(tensor(sing))
    assert s.item() == 0 and l.item() == -math.inf
    assert vkml.logdet(tensor(sing)).item() == -math.inf and math.isnan(vkml.logdet(tensor(neg)).item())
    assert vkml.logdet is LA.logdet
    x = tensor(spd(3, 3), requires_grad=True)
    s, l = LA.slogdet(x)
    assert not s.requires_grad and l.requires_grad      # the sign is not differentiable (PyTorch marks it so)


def test_det_of_an_empty_matrix_is_one():
    assert LA.det(vkml.zeros((0, 0))).item() == 1.0


# --- solve -----------------------------------------------------------------------------------------------
# torch.linalg.solve(A, B, *, left=True): "Letting * be zero or more batch dimensions, if A has shape (*, n, n)
# and B has shape (*, n) (a batch of vectors) or shape (*, n, k) ... this function returns X of shape (*, n) or
# (*, n, k) respectively." "This function supports batches of A and B ... broadcasting." "left: whether to
# solve the system AX=B or XA = B." B is a batch of vectors when it is 1-D or its shape is A.shape[:-1].

def test_solve_vectors_matrices_broadcast_and_left():
    a = RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    b_vec, b_batchvec = RNG.standard_normal(3), RNG.standard_normal((2, 3))
    b_mat, b_bcast = RNG.standard_normal((3, 4)), RNG.standard_normal((5, 1, 3, 2))
    A = tensor(a)
    close(LA.solve(A, tensor(b_vec)).numpy(), np.stack([sl.solve(m, b_vec) for m in a]), float64)
    close(LA.solve(A, tensor(b_batchvec)).numpy(), np.stack([sl.solve(m, v) for m, v in zip(a, b_batchvec)]), float64)
    close(LA.solve(A, tensor(b_mat)).numpy(), np.stack([sl.solve(m, b_mat) for m in a]), float64)
    got = LA.solve(A, tensor(b_bcast)).numpy()
    assert got.shape == (5, 2, 3, 2)
    close(got, np.stack([[sl.solve(a[j], b_bcast[i, 0]) for j in range(2)] for i in range(5)]), float64)
    x = LA.solve(A, tensor(b_mat.T.copy()), left=False).numpy()      # X A = B
    close(np.einsum("bij,bjk->bik", x, a), np.broadcast_to(b_mat.T, (2, 4, 3)), float64)
    with pytest.raises(ShapeError, match="must be"): LA.solve(A, tensor(RNG.standard_normal((2, 4))))
    with pytest.raises(DTypeError, match="never promotes"): LA.solve(A, tensor(b_vec.astype(np.float32)))


# --- eigh, qr, svd ---------------------------------------------------------------------------------------
# torch.linalg.eigh(A, UPLO='L'): "eigenvalues ... in ascending order"; "UPLO ('L', 'U', optional): controls
# whether to use the upper or lower triangular part of A in the computations."

@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("dt", [float64, float32], ids=lambda d: d.name)
def test_eigh_reads_one_triangle(uplo, dt):
    a = RNG.standard_normal((2, 4, 4))                     # not symmetric: only the named triangle counts
    lam, v = LA.eigh(tensor(a, dtype=dt), UPLO=uplo)
    ref = per_matrix(lambda m: sl.eigh(m, lower=uplo == "L", eigvals_only=True), a)
    close(lam.numpy(), ref, dt)
    tri = np.tril(a) if uplo == "L" else np.triu(a)
    sym = tri + np.swapaxes(tri, -1, -2) - np.eye(4) * np.diagonal(a, axis1=-2, axis2=-1)[..., None, :]
    V = v.numpy().astype(np.float64)
    close(np.einsum("bij,bj,bkj->bik", V, lam.numpy().astype(np.float64), V), sym, dt)
    close(np.einsum("bji,bjk->bik", V, V), np.broadcast_to(np.eye(4), (2, 4, 4)), dt)


# torch.linalg.qr(A, mode='reduced'): "mode='reduced' (default): Returns (Q, R) of shapes (*, m, k), (*, k, n)
# respectively, where k = min(m, n). mode='complete': Returns (Q, R) of shapes (*, m, m), (*, m, n)
# respectively. mode='r': Computes only the reduced R. Returns (Q, R) with Q empty and R of shape (*, k, n)."

@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (2, 1, 4, 2)])
def test_qr_modes(shape):
    a = RNG.standard_normal(shape)
    m, n = shape[-2:]
    k = min(m, n)
    for mode, qs, rs in [("reduced", (m, k), (k, n)), ("complete", (m, m), (m, n))]:
        Q, R = LA.qr(tensor(a), mode=mode)
        assert Q.shape == shape[:-2] + qs and R.shape == shape[:-2] + rs
        q, r = Q.numpy(), R.numpy()
        close(q @ r, a, float64)
        close(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(qs[1]), shape[:-2] + (qs[1], qs[1])), float64)
        assert np.allclose(np.tril(r, -1), 0)
        ref = per_matrix(lambda x: sl.qr(x, mode="economic" if mode == "reduced" else "full")[1], a)
        close(np.abs(r), np.abs(ref), float64)               # the same R up to the signs of its rows
    Q, R = LA.qr(tensor(a), mode="r")
    assert Q.shape == (0,) and R.shape == shape[:-2] + (k, n)


# torch.linalg.svd(A, full_matrices=True): "full_matrices=True (default): U (*, m, m), S (*, k), Vh (*, n, n);
# full_matrices=False: U (*, m, k), Vh (*, k, n)"; "The returned singular values ... sorted in descending order."

@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 2, 3, 4)])
@pytest.mark.parametrize("dt", [float64, float32], ids=lambda d: d.name)
def test_svd(shape, dt):
    a = RNG.standard_normal(shape)
    m, n = shape[-2:]
    k = min(m, n)
    U, S, Vh = LA.svd(tensor(a, dtype=dt))
    assert (U.shape, S.shape, Vh.shape) == (shape[:-2] + (m, m), shape[:-2] + (k,), shape[:-2] + (n, n))
    close(S.numpy(), per_matrix(sl.svdvals, a), dt)
    assert (np.diff(S.numpy(), axis=-1) <= 0).all()
    u, s, vh = (t.numpy().astype(np.float64) for t in LA.svd(tensor(a, dtype=dt), full_matrices=False))
    close((u * s[..., None, :]) @ vh, a, dt)


# --- gradients: closed forms ---------------------------------------------------------------------------

def test_gradients_against_closed_forms():
    a = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
    ainv_t = np.linalg.inv(a).T
    for f, want in [(lambda x: vkml.logdet(x @ x.transpose(0, 1)), 2 * np.linalg.inv(a @ a.T) @ a),   # d logdet(AAᵀ) = 2(AAᵀ)⁻¹A
                    (LA.det, np.linalg.det(a) * ainv_t),                                         # Jacobi's formula
                    (lambda x: LA.slogdet(x).logabsdet, ainv_t),
                    (lambda x: LA.inv(x).sum(), -(ainv_t @ np.ones((3, 3)) @ ainv_t))]:
        x = tensor(a, requires_grad=True)
        f(x).backward()
        close(x.grad.numpy(), want, float64)
    s = spd(3, 3)
    x = tensor(s, requires_grad=True)
    LA.eigh(x).eigenvalues.sum().backward()                  # Σλ = trace: the gradient is I
    close(x.grad.numpy(), np.eye(3), float64)
    x = tensor(a, requires_grad=True)
    LA.svd(x, full_matrices=False).S.sum().backward()        # nuclear norm: the gradient is U Vᵀ
    u, _, vt = np.linalg.svd(a)
    close(x.grad.numpy(), u @ vt, float64)


# --- refusals ---------------------------------------------------------------------------------------------

def test_bad_input_is_refused_with_typed_errors():
    with pytest.raises(DTypeError, match="float()"): LA.inv(vkml.ones((2, 2), dtype=float16))
    with pytest.raises(DTypeError): LA.det(vkml.ones((2, 2), dtype=vkml.int64))
    with pytest.raises(ShapeError, match="square"): LA.cholesky(vkml.ones((2, 3)))
    with pytest.raises(ShapeError): LA.svd(vkml.ones(3))
    with pytest.raises(ArgumentError, match="out="): LA.inv(vkml.ones((2, 2)), out=vkml.ones((2, 2)))
    with pytest.raises(ArgumentError, match="UPLO"): LA.eigh(vkml.ones((2, 2)), UPLO="X")
    with pytest.raises(ArgumentError, match="mode"): LA.qr(vkml.ones((2, 2)), mode="full")
    with pytest.raises(vkml.RankError): LA.inv(vkml.zeros((1, 1, 1, 1, 1)))            # rank <= 4, as everywhere


@pytest.mark.vulkan
def test_vulkan_is_refused_naming_the_transfer(vulkan):
    a = tensor(spd(3, 3), device="vulkan")
    for f in (LA.cholesky, LA.inv, LA.det, LA.slogdet, vkml.logdet, LA.eigh, LA.qr, LA.svd,
              lambda x: LA.solve(x, x)):
        with pytest.raises(BackendError, match=r"\.to\('cpu'\)"): f(a)
    # a linalg node built on Vulkan by other means: the backend refuses it before recording anything
    with pytest.raises(BackendError, match=r"no kernel for INV.*\.to\('cpu'\)"):
        apply(Op.INV, a).numpy()
    # and a float64 max-pool, which has no float64 kernel there
    with pytest.raises(BackendError, match="MAXPOOL2D in float64"):
        vkml.nn.functional.max_pool2d(tensor(np.zeros((1, 1, 4, 4)), device="vulkan"), 2).numpy()
