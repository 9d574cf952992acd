"""The `reach-point` problem (issue 14) and gradients through the simulation.

- (a) `jax.grad` of a composite cost (effort, terminal miss, tracking, obstacle, rail barrier,
  contact limits) with respect to the control coefficients = central finite differences, for
  the explicit RKMK4 and the implicit DLA (Newton, implicit-function-theorem gradient), both
  through `simulate`'s checkpointed scan.
- (b) float32: the gradient of reach-point's augmented Lagrangian is finite and within 1e-3
  of float64.
- (c) (slow) reach-point is solved: miss ≤ 1e-3, and re-simulated with DLA at a 4× finer step
  the miss stays within 1e-3 plus the two discretisations' difference.
- (d) (slow) `multi_start` member k = the single run from the same guess, on reach-point.
- (slow) an independent optimality check: scipy's SLSQP on the same cost, constraint and
  gradients reaches the same minimal effort (SLSQP, not L-BFGS-B: L-BFGS-B handles bounds
  only, and an equality constraint it cannot see would need our own penalty loop around it,
  which would not be independent of the method under test).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import central_difference_error

from jaxrigid.control.costs import (
    CirclePath,
    ContactLimits,
    DiscObstacles,
    Effort,
    FinalPosition,
    RailBarrier,
    Tracking,
)
from jaxrigid.control.optimise import AugmentedLagrangian, multi_start, optimise
from jaxrigid.control.presets import ControlProblem, get_problem, reach_point
from jaxrigid.integrators.nonholonomic_lie import NonholonomicDLA
from jaxrigid.integrators.rkmk import RKMK4


def _guess(shape, seed=0, scale=0.5):
    return jnp.asarray(scale * np.random.default_rng(seed).normal(size=shape))


def _composite(integrator, dt=0.1):
    """Every cost term at once, each active at the test's coefficients: a disc around the
    start (the path begins inside it), rail bounds the masses cross, a friction coefficient
    the contact exceeds."""
    base = reach_point(dt=dt, integrator=integrator)
    f = jnp.asarray
    cost = (
        Effort()
        + 3.0 * FinalPosition(f([1.0, 0.5]))
        + Tracking(CirclePath(f([0.0, 1.0]), f(1.0), f(5.0)))
        + 10.0 * DiscObstacles(f([[0.1, 0.0]]), f([0.3]))
        + RailBarrier(f([-2.0, -2.0]), f([-1.2, -1.2]))
        + 10.0 * ContactLimits(f(0.05), f(0.0))
    )
    return ControlProblem(
        base.model, base.state0, integrator, cost, (), "composite", dt, base.n_steps, 1
    )


@pytest.mark.parametrize(
    "integrator",
    # DLA's gradient compiles for ~90 s on the shared 2-core machine: slow (run with -m slow)
    # both slow (235 s for RKMK4 on 2 CPU cores, issue 31's suite time): the rolling ball's
    # gradient through `simulate` is checked in the default suite by test_control_dynamic.py
    [
        pytest.param(RKMK4(), marks=pytest.mark.slow),
        pytest.param(NonholonomicDLA(), marks=pytest.mark.slow),
    ],
    ids=["RKMK4", "DLA"],
)
def test_gradient_equals_central_differences(integrator):
    """`jax.grad` (reverse mode through the checkpointed scan; for DLA through Newton by the
    implicit function theorem) = central differences `(f(p + heᵢ) − f(p − heᵢ))/2h` for
    every coefficient, to 1e-6 relative to the largest entry. h = 1e-5: truncation
    `h²|f'''|/6 ≈ 1e-10·f'''` and round-off `eps·|f|/h ≈ 1e-10` (|f| ≈ 10) are both far
    below 1e-6; the squared hinges are C¹ with Lipschitz gradients, so a difference across
    a hinge's kink errs by O(h) at most. T = 5 at dt = 0.1 (50 steps) keeps it fast."""
    problem = _composite(integrator)
    p = _guess(problem.coefficient_shape)
    f = lambda p: problem(p)[0]  # noqa: E731
    value, grad = jax.jit(jax.value_and_grad(f))(p)
    parts = problem.cost.parts(problem.trajectory(p), problem.control.with_coefficients(p))
    assert all(v > 0 for v in parts.values()), parts  # every term contributes
    rel = central_difference_error(f, p, grad, h=1e-5)
    print(f"{integrator.name}: f = {float(value):.6g}, max|grad − FD|/max|grad| = {rel:.2e}")
    assert rel <= 1e-6


@pytest.mark.slow  # 71-143 s on 2 CPU cores (issue 31: the default suite's time)
def test_float32_gradient_matches_float64():
    """reach-point's augmented Lagrangian `f + λ·c + ρ/2|c|²` (λ = (0.5, −0.5), ρ = 10) in
    float32: every entry finite and the gradient within 1e-3 of float64 (relative, in the
    max norm). The float32 error is round-off accumulated over 100 RKMK4 steps and the
    reverse pass (≈ 100·eps₃₂·condition ≈ 1e-5 expected); 1e-3 is the issue's bound."""

    def lagrangian_grad(dtype):
        problem = reach_point(dt=0.05, dtype=dtype)
        p = _guess(problem.coefficient_shape).astype(dtype)
        lam = jnp.asarray([0.5, -0.5], dtype)

        def L(p):
            f, c, _ = problem(p)
            return f + lam @ c + 5.0 * c @ c

        return jax.jit(jax.grad(L))(p)

    g32, g64 = lagrangian_grad(jnp.float32), lagrangian_grad(jnp.float64)
    assert g32.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(g32)))
    rel = float(jnp.max(jnp.abs(g32.astype(jnp.float64) - g64)) / jnp.max(jnp.abs(g64)))
    print(f"float32 vs float64 gradient: {rel:.2e}")
    assert rel <= 1e-3


def test_problem_registry_and_errors():
    """`get_problem` knows reach-point (case-insensitive) and lists the names for an unknown
    one; a step that does not divide T is refused."""
    assert get_problem("Reach-Point").name == "reach-point"
    with pytest.raises(
        ValueError, match="known: reach-point, follow-circle, figure-eight, avoid-obstacles"
    ):
        get_problem("reach-moon")
    with pytest.raises(ValueError, match="dt must divide T"):
        reach_point(dt=0.3)


REACH = AugmentedLagrangian(n_outer=10, n_inner=40)  # the problem's default settings


@pytest.fixture(scope="module")
def solved():
    problem = reach_point(dt=0.05)
    res = optimise(problem, problem.initial_coefficients(), REACH)
    return problem, res


@pytest.mark.slow
def test_reach_point_is_solved_and_resimulated(solved):
    """The miss |x(T)[:2] − (1, 0.5)| ≤ 1e-3 (RKMK4, dt = 0.05). Re-simulated with DLA (a
    different, implicit, order-2 method) at dt/4: the final contact point moves by the
    difference of the two discretisations (measured ≈ 2e-6: DLA's O(h²) error at h = 0.0125),
    so the re-simulated miss is ≤ 1e-3 + 1e-5."""
    problem, res = solved
    miss = float(res.residual_norm)
    x_res = problem.with_integrator(NonholonomicDLA(), refine=4).trajectory(res.coefficients).x
    resim_miss = float(jnp.linalg.norm(x_res[-1, :2] - jnp.asarray([1.0, 0.5])))
    print(f"effort {float(res.cost):.6f}, miss {miss:.2e}, resimulated miss {resim_miss:.2e}")
    print("residual per outer iteration:", np.asarray(res.history["residual_norm"]))
    assert miss <= 1e-3
    assert resim_miss <= 1e-3 + 1e-5
    assert float(res.cost) < float(res.cost_initial) + 1.0  # rest has zero effort


@pytest.mark.slow
def test_multi_start_member_equals_single_run():
    """`multi_start` over 2 guesses (`vmap` of the whole optimisation): member k = the
    single run from guess k. Both compute the same iterations; only the batched program's
    rounding may differ and the optimiser may amplify it, so 1e-8 relative on the
    coefficients and the cost (measured in the test)."""
    problem = reach_point(dt=0.1)
    settings = AugmentedLagrangian(n_outer=3, n_inner=8)
    p0s = jnp.stack([_guess(problem.coefficient_shape, s, 0.2) for s in (1, 2)])
    ms = multi_start(problem, p0s, settings)
    for k in range(2):
        one = optimise(problem, p0s[k], settings)
        scale = float(jnp.max(jnp.abs(one.coefficients)))
        err = float(jnp.max(jnp.abs(ms.all.coefficients[k] - one.coefficients))) / scale
        print(f"member {k}: max coefficient difference / scale = {err:.1e}")
        assert err <= 1e-8
        np.testing.assert_allclose(ms.all.cost[k], one.cost, rtol=1e-8)


@pytest.mark.slow
def test_scipy_slsqp_finds_the_same_minimal_effort(solved):
    """An independent optimality check: scipy's SLSQP (sequential quadratic programming,
    the constraint x(T)[:2] = target handled exactly, no augmented Lagrangian) on the same
    effort, constraint and jax gradients/Jacobians, from the same start (c = 0). SLSQP
    meets the constraint to 1e-6. The two minimal efforts agree to 1e-3 relative (measured
    0.238041 (AL, miss 1.8e-7) against 0.2380407 (SLSQP); with optax's L-BFGS in 10 × 25
    iterations the AL stopped at 0.238155, 4.8e-4 above: a fixed budget of inner iterations
    leaves a gap, not the miss, worth |λ|·miss ≈ 1e-6 of effort), and the AL's effort is not
    below SLSQP's by more than that miss allows."""
    from scipy.optimize import minimize

    problem, res = solved
    shape = problem.coefficient_shape
    unflat = lambda z: jnp.asarray(z).reshape(shape)  # noqa: E731
    f_and_g = jax.jit(jax.value_and_grad(lambda p: problem(p)[0]))
    c_fun = jax.jit(lambda p: problem(p)[1])
    c_jac = jax.jit(jax.jacrev(lambda p: problem(p)[1]))
    out = minimize(
        lambda z: tuple(np.asarray(v, float).ravel() for v in f_and_g(unflat(z))),
        np.zeros(int(np.prod(shape))),
        jac=True,
        method="SLSQP",
        constraints={
            "type": "eq",
            "fun": lambda z: np.asarray(c_fun(unflat(z))),
            "jac": lambda z: np.asarray(c_jac(unflat(z))).reshape(2, -1),
        },
        options={"maxiter": 200, "ftol": 1e-12},
    )
    miss = float(np.linalg.norm(np.asarray(c_fun(unflat(out.x)))))
    print(f"SLSQP: effort {out.fun:.8f} miss {miss:.1e} ({out.nit} iterations, {out.message})")
    print(f"AL:    effort {float(res.cost):.8f} miss {float(res.residual_norm):.1e}")
    assert miss <= 1e-6
    np.testing.assert_allclose(float(res.cost), out.fun, rtol=1e-3)
    assert float(res.cost) >= out.fun - 10 * float(res.residual_norm)
