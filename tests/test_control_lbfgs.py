"""`jaxrigid.control.lbfgs`: L-BFGS with its line search a state of the loop, one
evaluation per iteration, on functions with known minima (no simulation: fast)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.control import lbfgs


def _minimise(f, x0, n, trials=False):
    """`n` iterations in one `lax.scan` (as `optimise` runs them); the final state and the
    function's value at each iteration's accepted iterate (and, with `trials`, at each
    iteration's trial point)."""
    value_and_grad = jax.value_and_grad(f)

    def body(state, _):
        value, grad = value_and_grad(lbfgs.trial_point(state))
        state = lbfgs.update(state, value, grad)
        return state, (state.f, value) if trials else state.f

    return jax.lax.scan(body, lbfgs.init(jnp.asarray(x0)), None, length=n)


def _rosenbrock(x):
    return (1.0 - x[0]) ** 2 + 100.0 * (x[1] - x[0] ** 2) ** 2


def test_rosenbrock_from_the_classical_start():
    """From (−1.2, 1) (the classical start; the valley's bend defeats steepest descent) to the
    minimum (1, 1): to 1e-8 in 100 evaluations (measured: 46 reach 1e-8; each
    iteration is one evaluation, so a search with rejected trials counts every trial). The
    accepted values never increase (every accepted step decreases f, Armijo or the
    approximate Wolfe condition's ε|f| within round-off of a minimum)."""
    state, values = jax.jit(_minimise, static_argnums=(0, 2))(_rosenbrock, [-1.2, 1.0], 100)
    np.testing.assert_allclose(state.x, [1.0, 1.0], atol=1e-8)
    v = np.asarray(values)[1:]
    assert np.all(np.diff(v) <= 1e-6 * np.abs(v[:-1]) + 1e-300)


def test_ill_conditioned_quadratic_to_round_off():
    """A 6-D quadratic with condition number 1e4: L-BFGS's memory (10 pairs ≥ 6 unknowns)
    recovers the Hessian, and the gradient falls to round-off (|g| < 1e-9 relative to the
    start's) in 60 evaluations."""
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    H = jnp.asarray(Q @ np.diag(np.logspace(0, 4, 6)) @ Q.T)
    b = jnp.asarray(rng.normal(size=6))

    def f(x):
        return 0.5 * x @ (H @ x) - b @ x

    state, _ = jax.jit(_minimise, static_argnums=(0, 2))(f, jnp.zeros(6), 60)
    x_star = np.linalg.solve(np.asarray(H), np.asarray(b))
    np.testing.assert_allclose(state.x, x_star, rtol=1e-8)
    assert np.linalg.norm(state.g) < 1e-9 * np.linalg.norm(b)


def test_an_infinite_trial_is_stepped_back_from():
    """`f = −log(1 − |x|²) + |x − a|²` is +inf (NaN gradient) outside the unit ball; from the
    origin a first trial lands outside (asserted: at least one trial's value is not finite).
    The search treats a non-finite trial as too far and shrinks the step: every accepted
    value is finite and the iterate reaches the minimum (|∇f| < 1e-10)."""
    a = jnp.asarray([0.9, 0.3])

    def f(x):
        r2 = x @ x
        return jnp.where(r2 < 1, -jnp.log1p(-jnp.minimum(r2, 1.0)), jnp.inf) + (x - a) @ (x - a)

    state, (values, tried) = jax.jit(_minimise, static_argnums=(0, 2, 3))(f, jnp.zeros(2), 60, True)
    assert not np.all(np.isfinite(np.asarray(tried)))
    assert np.all(np.isfinite(np.asarray(values)))
    assert np.linalg.norm(state.g) < 1e-10


def test_vmapped_runs_equal_single_runs():
    """Under `vmap` (`multi_start`'s form) every start's run equals its own, to 1e-12
    (the same iterations; a batched program may round differently)."""
    starts = jnp.asarray([[-1.2, 1.0], [0.5, -0.5], [2.0, 2.0]])
    run = jax.jit(lambda x0: _minimise(_rosenbrock, x0, 60)[0].x)
    batched = jax.vmap(run)(starts)
    for k in range(3):
        np.testing.assert_allclose(batched[k], run(starts[k]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_float32_and_float64_keep_their_dtype(dtype):
    """The state keeps the start's dtype; float32 reaches the Rosenbrock minimum to its own
    precision (1e-3: the valley is flat to ~sqrt(eps₃₂) ≈ 3e-4 in x)."""
    state, _ = _minimise(_rosenbrock, jnp.asarray([-1.2, 1.0], dtype), 150)
    assert state.x.dtype == dtype and state.s.dtype == dtype
    np.testing.assert_allclose(state.x, [1.0, 1.0], atol=1e-3 if dtype == jnp.float32 else 1e-8)
