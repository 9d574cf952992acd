"""The closed-form 3×3 linear algebra of the value checks (`jaxrigid._linalg`) against LAPACK."""

import jax.numpy as jnp
import numpy as np
import pytest

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


@pytest.mark.parametrize("repeated", [False, True])
def test_eigvalsh3_matches_lapack(repeated):
    # the trigonometric roots lose half the digits at a repeated eigenvalue (docstring): 1e-13
    # relative to the largest |λ| for distinct ones (a few hundred eps), 1e-7 (≈ 5 √eps) else
    A, _ = _random_symmetric(np.random.default_rng(0), 500, repeated)
    got = np.asarray(_linalg.eigvalsh3(jnp.asarray(A)))
    ref = np.linalg.eigvalsh(A)
    scale = np.max(np.abs(ref), axis=-1, keepdims=True)
    tol = 1e-7 if repeated else 1e-13
    assert np.max(np.abs(got - ref) / scale) < tol


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
