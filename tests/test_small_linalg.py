"""The closed-form 3×3 linear algebra of the value checks (`jaxrigid._linalg`) against LAPACK."""

import jax
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


def _operand_pairs():
    """Operand pairs of every kind `_linalg.mul/add/sub` meet: arrays of one shape and dtype
    (the primitive), broadcasting shapes, mixed dtypes, weak-typed arrays, Python numbers on
    either side (the primitive with a strong float array, the operator otherwise)."""
    f64 = jnp.asarray(np.array([1.5, -2.0, 3.25]))
    g64 = jnp.asarray(np.array([0.3, 7.0, -1.0 / 3.0]))
    f32 = jnp.asarray(np.array([0.1, -2.5, 7.0], np.float32))
    g32 = jnp.asarray(np.array([3.0, 1e-3, -0.7], np.float32))
    weak = jnp.asarray(2.0)  # a Python number made an array: weakly typed
    return [
        (f64, g64),
        (f32, g32),
        (f64, f64[:1]),  # broadcast
        (f32, f64),  # promoted
        (weak, f64),
        (weak, jnp.asarray(0.5)),
        (f32, 0.1),
        (0.1, f32),
        (f64, 3),
        (jnp.asarray(np.array([1, 2, 3])), 0.5),  # an integer array and a float: promoted
        (weak, 0.1),  # stays weak
    ]


def _with_arrays_through(transform, fn, a, b):
    """`fn(a, b)` with the array operands passed through `transform` (`jit`, `vmap` over a
    leading axis of two copies) and Python numbers kept as numbers."""
    arrays = [x for x in (a, b) if isinstance(x, jax.Array)]

    def call(*xs):
        it = iter(xs)
        return fn(*(next(it) if isinstance(x, jax.Array) else x for x in (a, b)))

    if transform == "vmap":
        out = jax.vmap(call)(*(jnp.stack([x, x]) for x in arrays))
        return out[0], out
    out = (jax.jit(call) if transform == "jit" else call)(*arrays)
    return out, out


@pytest.mark.parametrize("k", range(11))
@pytest.mark.parametrize("transform", ["eager", "jit", "vmap"])
def test_primitive_arithmetic_is_the_operators(k, transform):
    """`mul`, `add`, `sub` (the component algebra's products and sums, by `lax` primitives
    where the operands allow) give the operators' values, dtypes and weak types for every
    kind of operand, eagerly, under `jit` and under `vmap`: a primitive taken where the
    operator promotes or broadcasts would change a dtype (float32 against float64) or a weak
    type (the dtype of a later product), or raise."""
    a, b = _operand_pairs()[k]
    for ours, operator in (
        (_linalg.mul, jnp.multiply),
        (_linalg.add, jnp.add),
        (_linalg.sub, jnp.subtract),
    ):
        want, _ = _with_arrays_through(transform, operator, a, b)
        got, whole = _with_arrays_through(transform, ours, a, b)
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert whole.shape == (2,) * (transform == "vmap") + want.shape
