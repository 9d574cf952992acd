"""The augmented-Lagrangian optimiser (`jaxrigid.control.optimise`) on problems with known
solutions (no simulation: fast).

- An equality-constrained quadratic: the optimum and the multipliers from its KKT system
  (solved with numpy) are reached.
- `multi_start` member k = `optimise` from the same guess; best and spread.
- The progress callback sees every inner iteration; bad input raises.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxrigid.control.optimise import AugmentedLagrangian, multi_start, optimise


class Quadratic(eqx.Module):
    """`f = ½(p − a)ᵀH(p − a) + Σ p⁴/4` (a mildly non-quadratic convex cost), `c = Bp − b`."""

    H: jax.Array
    a: jax.Array
    B: jax.Array
    b: jax.Array
    coefficient_shape = (4,)

    def __call__(self, p):
        d = p - self.a
        return 0.5 * d @ (self.H @ d) + 0.25 * jnp.sum(p**4), self.B @ p - self.b


def _toy():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 4))
    return Quadratic(
        jnp.asarray(A @ A.T + 4 * np.eye(4)),
        jnp.asarray(rng.normal(size=4)),
        jnp.asarray(rng.normal(size=(2, 4))),
        jnp.asarray(rng.normal(size=2)),
    )


def _kkt(toy):
    """Newton on the KKT system `∇f + Bᵀλ = 0`, `Bp = b` (numpy), to round-off."""
    H, a, B, b = (np.asarray(x) for x in (toy.H, toy.a, toy.B, toy.b))
    p, lam = np.zeros(4), np.zeros(2)
    for _ in range(50):
        g = H @ (p - a) + p**3 + B.T @ lam
        K = np.block([[H + np.diag(3 * p**2), B.T], [B, np.zeros((2, 2))]])
        step = np.linalg.solve(K, -np.concatenate([g, B @ p - b]))
        p, lam = p + step[:4], lam + step[4:]
    return p, lam


# 20 inner iterations of one evaluation each: 10 × 20 reach the KKT point to the same
# round-off as optax's L-BFGS did in 10 × 15 iterations, which took 1.8 evaluations each
# (measured: 212 evaluations of the objective in all against 281)
SETTINGS = AugmentedLagrangian(n_outer=10, n_inner=20)


@pytest.mark.parametrize("inner", ["lbfgs", "optax"])
def test_reaches_the_kkt_point(inner):
    """The optimum and the multipliers of the KKT system, from the origin, with the default
    inner minimiser (`control.lbfgs`) and with an `optax` one (`optax.lbfgs()`, 15 of its
    iterations). The AL converges linearly in the outer iterations (measured |c|: 0.53,
    2e-2, 9e-4, …, 2.6e-13 after 10, a factor ≈ 0.04 each at ρ = 100), so after 10:
    |c| < 1e-11, p and λ to 1e-10."""
    toy = _toy()
    p_star, lam_star = _kkt(toy)
    settings = SETTINGS
    if inner == "optax":
        settings = AugmentedLagrangian(n_outer=10, n_inner=15, inner=optax.lbfgs())
    res = optimise(toy, jnp.zeros(4), settings)
    assert res.residual_norm < 1e-11
    np.testing.assert_allclose(res.coefficients, p_star, atol=1e-10)
    np.testing.assert_allclose(res.multipliers, lam_star, atol=1e-10)
    assert res.history["lagrangian"].shape == (10, settings.n_inner)
    assert res.cost_initial == toy(jnp.zeros(4))[0]


@pytest.mark.xla_defaults
def test_multi_start_members_equal_single_runs():
    """`multi_start` (vmap) member k = `optimise` from guess k to 1e-12 (the same
    iterations; a batched program may only round differently); the best is the feasible
    start of least cost, the spread its min/median/max."""
    toy = _toy()
    p0s = jnp.asarray(np.random.default_rng(1).normal(size=(3, 4)))
    ms = multi_start(toy, p0s, SETTINGS, tolerance=1e-6)
    for k in range(3):
        one = optimise(toy, p0s[k], SETTINGS)
        np.testing.assert_allclose(ms.all.coefficients[k], one.coefficients, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ms.all.cost[k], one.cost, rtol=1e-12)
    assert int(ms.spread["n_feasible"]) == 3
    assert ms.best.cost == jnp.min(ms.all.cost)
    assert ms.spread["cost_min"] <= ms.spread["cost_median"] <= ms.spread["cost_max"]


def test_callback_and_errors():
    """The callback gets `(outer, inner, value, grad_norm)` once per inner iteration, in
    order; NaN or wrong-shaped initial coefficients raise `ValueError`."""
    toy = _toy()
    seen = []
    settings = AugmentedLagrangian(n_outer=2, n_inner=3)
    optimise(toy, jnp.zeros(4), settings, callback=lambda *a: seen.append(tuple(map(float, a))))
    assert [(int(o), int(i)) for o, i, _, _ in seen] == [(o, i) for o in range(2) for i in range(3)]
    assert all(np.isfinite(v) and g >= 0 for _, _, v, g in seen)
    with pytest.raises(ValueError, match="NaN or inf"):
        optimise(toy, jnp.full(4, jnp.nan), settings)
    with pytest.raises(ValueError, match="shape"):
        optimise(toy, jnp.zeros(3), settings)
    with pytest.raises(ValueError, match="n_outer and n_inner"):
        AugmentedLagrangian(n_outer=0)


class Projection(eqx.Module):
    """`f = |p − a|²` subject to `Bp − 1 ≤ 0` (two half-spaces, one active at the optimum)
    and `p₀ + p₁ + p₂ = 0` (an equality): the objective returns `(f, c, g)`."""

    a: jax.Array
    B: jax.Array
    coefficient_shape = (3,)

    def __call__(self, p):
        d = p - self.a
        return d @ d, jnp.reshape(jnp.sum(p), (1,)), self.B @ p - 1.0


def test_inequalities_reach_the_kkt_point():
    """Inequality constraints in the PHR form (`max(0, μ + ρg)²`, one multiplier each): the
    projection of `a = (2, 1, −3)` onto `{Σp = 0, Bp ≤ 1}` with `B = ((1, 0, 0), (0, 0, 1))`
    (the first half-space active, the second not) is `p* = (1, 1.5, −2.5)` with equality
    multiplier `λ* = −1` and inequality multipliers `μ* = (3, 0)` (stationarity
    `2(p − a) + λ·1 + Bᵀμ = 0`). The PHR step converges like the equality case: after 10
    outer iterations the errors are below 1e-8."""
    toy = Projection(jnp.asarray([2.0, 1.0, -3.0]), jnp.asarray([[1.0, 0, 0], [0, 0, 1.0]]))
    res = optimise(toy, toy.a, SETTINGS)  # from a: c = 0, g = (1, −4), infeasibility 1
    np.testing.assert_allclose(res.coefficients, [1.0, 1.5, -2.5], atol=1e-9)
    np.testing.assert_allclose(res.multipliers, [-1.0], atol=1e-8)
    np.testing.assert_allclose(res.inequality_multipliers, [3.0, 0.0], atol=1e-8)
    np.testing.assert_allclose(res.inequality, [0.0, -3.5], atol=1e-9)
    assert res.residual_norm < 1e-9
    assert float(res.residual_norm_initial) == 1.0


def test_progress_is_reported_from_the_host_and_changes_nothing():
    """Concrete inputs: the outer loop runs on the host and the callback is called from
    there (so no program carries a host callback: tests/test_compilation_cache.py checks
    that a second process compiles none of them), in order, once per inner iteration. The
    result with a callback is the one without, bit for bit. Under a caller's `jit` the whole
    optimisation is one program; it iterates alike (the same iterations fused differently;
    1e-12 as for `multi_start`'s members)."""
    toy = _toy()
    settings = AugmentedLagrangian(n_outer=3, n_inner=7)
    seen = []
    reported = optimise(toy, jnp.zeros(4), settings, callback=lambda *a: seen.append(a))
    assert [(int(k), int(j)) for k, j, _, _ in seen] == [(k, j) for k in range(3) for j in range(7)]
    np.testing.assert_array_equal(
        [v for _, _, v, _ in seen], reported.history["lagrangian"].ravel()
    )
    plain = optimise(toy, jnp.zeros(4), settings)
    for a, b in zip(jax.tree_util.tree_leaves(reported), jax.tree_util.tree_leaves(plain)):
        np.testing.assert_array_equal(a, b)
    traced = jax.jit(lambda p: optimise(toy, p, settings).coefficients)(jnp.zeros(4))
    np.testing.assert_allclose(traced, plain.coefficients, rtol=0, atol=1e-12)
