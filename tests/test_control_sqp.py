"""The SQP of MPC's re-plans (`control.sqp`) on problems with known solutions: the KKT point
reached to rounding, a step into a non-finite merit taken back, Powell's update positive
definite, the batched solve member by member the single one, float32, bad settings refused.
float64 unless stated (`conftest`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.control.sqp import SQP, _powell_bfgs, solve


def _effort(x):
    return jnp.sum(x * x)


def _two_constraints(x):
    """`x₀x₁x₂ = 1`, `x₀ = x₂`: on them `f = 2x₀² + x₀⁻⁴`, least at `x₀ = 1`, so the
    solution is `x = (1, 1, 1)`, and `2x + λ₁(1, 1, 1) + λ₂(1, 0, −1) = 0` there gives
    `λ = (−2, 0)`."""
    return jnp.stack([x[0] * x[1] * x[2] - 1, x[0] - x[2]])


@jax.jit
def _solve_three(x0):
    return solve(_effort, _two_constraints, x0, jnp.zeros((2,), x0.dtype), SQP(n_iterations=12))


def test_reaches_the_known_kkt_point():
    """From `(1.3, 0.7, 0.9)`, 12 iterations: `x = (1, 1, 1)` and `λ = (−2, 0)` to 1e-12 (a
    few ulps: the last iterations' steps are at rounding), the constraints to 1e-15; and the
    miss is below 1e-10 after 6 iterations, from 0.24 after the first: faster than any
    linear rate of 0.1 per iteration (Powell's BFGS learns the constraints' curvature, which
    a Gauss–Newton step lacks; the ℓ1 merit lets the miss rise once, 6e-6 → 1e-5, while the
    effort falls)."""
    r = _solve_three(jnp.asarray([1.3, 0.7, 0.9]))
    np.testing.assert_allclose(r.x, 1.0, atol=1e-12)
    np.testing.assert_allclose(r.multipliers, [-2.0, 0.0], atol=1e-12)
    assert np.max(np.abs(r.residual)) <= 1e-15
    assert float(r.cost) == pytest.approx(3.0, rel=1e-14)
    miss = np.asarray(r.history["residual_norm"])
    assert miss[0] > 0.1 and miss[5] <= 1e-10, miss


def test_batched_solve_equals_each_member():
    """Three starts under `vmap` (a scenario's re-plans run so): each member's solution is its
    own solve's, to 1e-13 (the batched KKT solves may round otherwise)."""
    starts = jnp.asarray([[1.3, 0.7, 0.9], [0.8, 1.6, 1.1], [1.5, 0.4, 1.7]])
    batched = jax.vmap(_solve_three)(starts)
    for i in range(3):
        one = _solve_three(starts[i])
        np.testing.assert_allclose(batched.x[i], one.x, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(batched.multipliers[i], one.multipliers, atol=1e-13)


def test_float32():
    """In float32 the same solution to 8 float32 ulps of each (`x` to 1e-6, `λ` to 2e-6; the
    iterations at rounding level must not wander; measured: `x` exact, `λ` within 0.3 ulp)."""
    r = _solve_three(jnp.asarray([1.3, 0.7, 0.9], jnp.float32))
    assert r.x.dtype == jnp.float32
    np.testing.assert_allclose(r.x, 1.0, atol=1e-6)
    np.testing.assert_allclose(r.multipliers, [-2.0, 0.0], atol=2e-6)


def test_a_step_into_a_non_finite_merit_is_taken_back():
    """`min |x|²/2` subject to `log x₀ + 3 = 0` from `(1, 1)`: the first full step lands at
    `x₀ = −2`, where the merit is NaN, and the line search halves it twice (`α = 0.25`); the
    solution `x = (e⁻³, 0)`, `λ = −e⁻⁶` (from `x₀ + λ/x₀ = 0`), is reached to 1e-14."""

    def constraint(x):
        return jnp.stack([jnp.log(x[0]) + 3])

    def f(x):
        return 0.5 * jnp.sum(x * x)

    x0 = jnp.asarray([1.0, 1.0])
    r = jax.jit(lambda x0: solve(f, constraint, x0, jnp.zeros((1,)), SQP(n_iterations=12)))(x0)
    assert float(r.history["step"][0]) == 0.25
    np.testing.assert_allclose(r.x, [np.exp(-3.0), 0.0], atol=1e-14)
    np.testing.assert_allclose(r.multipliers, [-np.exp(-6.0)], rtol=1e-10)


def test_powell_update_stays_positive_definite():
    """Where `sᵀy < 0.2 sᵀBs` (here `sᵀy < 0`: curvature a plain BFGS update would turn
    indefinite), Powell's update is positive definite and satisfies the secant condition
    with the damped `r = θy + (1 − θ)Bs`, `θ = 0.8 sᵀBs/(sᵀBs − sᵀy)`; where `sᵀy` is large
    enough it is the plain BFGS update (`B⁺s = y`); a zero step leaves `B` as it is."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 5))
    B = jnp.asarray(A @ A.T + 5 * np.eye(5))
    s = jnp.asarray(rng.normal(size=5))
    y = -B @ s  # sᵀy < 0
    new = _powell_bfgs(B, s, y)
    assert np.min(np.linalg.eigvalsh(np.asarray(new))) > 0
    sBs, sy = float(s @ B @ s), float(s @ y)
    theta = 0.8 * sBs / (sBs - sy)
    np.testing.assert_allclose(new @ s, theta * y + (1 - theta) * (B @ s), rtol=1e-12)
    y_good = 2 * B @ s
    np.testing.assert_allclose(_powell_bfgs(B, s, y_good) @ s, y_good, rtol=1e-12)
    np.testing.assert_array_equal(_powell_bfgs(B, jnp.zeros(5), y), B)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_iterations": 0}, "SQP: needs n_iterations ≥ 1 and max_halvings ≥ 0"),
        ({"max_halvings": -1}, "SQP: needs n_iterations ≥ 1 and max_halvings ≥ 0"),
        ({"ridge": 0.0}, "SQP: ridge must be > 0"),
    ],
)
def test_bad_settings_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SQP(**kwargs)
