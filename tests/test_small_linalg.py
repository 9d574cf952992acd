"""The closed-form 3×3 linear algebra of the value checks (`jaxrigid._linalg`) against LAPACK."""

import jax.numpy as jnp
import numpy as np

from jaxrigid import _linalg
from jaxrigid.models.base import spd3_checks


def _random_symmetric(rng, n, repeated):
    """`n` symmetric matrices with eigenvalues over six decades, some with repeated ones."""
    Q, _ = np.linalg.qr(rng.normal(size=(n, 3, 3)))
    lam = rng.normal(size=(n, 3)) * 10.0 ** rng.uniform(-3, 3, size=(n, 1))
    if repeated:
        lam[:, 1] = lam[:, 0]
    A = Q @ (lam[:, :, None] * np.swapaxes(Q, -1, -2))
    return 0.5 * (A + np.swapaxes(A, -1, -2)), lam


def test_eigvalsh3_matches_lapack_to_its_conditioning():
    """Distinct eigenvalues: the trigonometric roots take arccos of a number that approaches ±1
    quadratically as two eigenvalues approach each other, so its rounding is amplified by
    `p/gap` (`p` the eigenvalues' spread, `gap` the smallest difference): the error relative
    to the largest |λ| is ≤ 16·eps·(1 + p/gap). Measured ≤ 3.4·eps·(1 + p/gap) over six seeds
    of 500 matrices (worst 3.3e-13 at gap/p = 6e-4); a wrong root formula errs by O(1)."""
    A, _ = _random_symmetric(np.random.default_rng(0), 500, repeated=False)
    got = np.asarray(_linalg.eigvalsh3(jnp.asarray(A)))
    ref = np.linalg.eigvalsh(A)
    scale = np.max(np.abs(ref), axis=-1)
    spread = np.sqrt(np.sum((ref - ref.mean(-1, keepdims=True)) ** 2, -1) / 6)
    gap = np.min(np.diff(ref, axis=-1), axis=-1)
    bound = 16 * np.finfo(float).eps * (1 + spread / gap)
    assert np.all(np.max(np.abs(got - ref), axis=-1) / scale <= bound)


def test_eigvalsh3_at_a_repeated_eigenvalue_keeps_half_the_digits():
    # the docstring's √eps: 1e-7 (≈ 5 √eps) relative to the largest |λ|
    A, _ = _random_symmetric(np.random.default_rng(0), 500, repeated=True)
    got = np.asarray(_linalg.eigvalsh3(jnp.asarray(A)))
    ref = np.linalg.eigvalsh(A)
    scale = np.max(np.abs(ref), axis=-1, keepdims=True)
    assert np.max(np.abs(got - ref) / scale) < 1e-7


def test_positive_definite3_is_sylvester():
    # decided exactly as the sign of the smallest eigenvalue wherever it is not within round-off
    # (1e-12 of the largest) of zero
    A, lam = _random_symmetric(np.random.default_rng(1), 2000, repeated=False)
    got = np.asarray(_linalg.positive_definite3(jnp.asarray(A)))
    smallest = np.min(lam, axis=-1) / np.max(np.abs(lam), axis=-1)
    clear = np.abs(smallest) > 1e-12
    assert np.array_equal(got[clear], (smallest > 0)[clear])
    assert got.any() and not got.all()  # both outcomes occur


def test_triangle_inequality_check_at_its_boundary():
    # 𝕀₃ = 𝕀₁ + 𝕀₂ (a planar body, rotated arbitrarily) is a rigid body's and must pass; 1 %
    # beyond it must fail: the check is decided by Sylvester's criterion with a 50-eps shift
    rng = np.random.default_rng(2)
    Q, _ = np.linalg.qr(rng.normal(size=(200, 3, 3)))
    lam = np.abs(rng.normal(size=(200, 3))) + 0.1
    lam[:, 2] = lam[:, 0] + lam[:, 1]
    for factor, expect_bad in ((1.0, False), (1.01, True)):
        moments = lam * np.array([1.0, 1.0, factor])
        A = Q @ (moments[:, :, None] * np.swapaxes(Q, -1, -2))
        A = 0.5 * (A + np.swapaxes(A, -1, -2))
        triangle = spd3_checks(jnp.asarray(A))[-1]
        assert "triangle" in triangle.message
        assert np.all(np.asarray(triangle.bad) == expect_bad)
