"""Each reach-region task's open-loop optimum (`region.open_loop_optima`): a KKT point of least
effort subject to reaching the target, checked from an objective written independently with
`jaxrigid.simulate`; rest is the optimum where rest reaches the target; bad input is refused.
`dt = 0.25` (20 steps over `T = 5`) so that the program builds in seconds."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.control import region
from jaxrigid.control.closed_loop import Tasks
from jaxrigid.control.presets import get_problem, reach_point
from jaxrigid.control.sqp import SQP

DT = 0.25


@pytest.fixture(scope="module")
def optima():
    """Two held-out tasks (targets 1.67 and 1.20 from the start, rails at random phases) and
    the start itself with the rails at rest at the bottom, `θ = −π/2`."""
    problem = region.reach_region(dt=DT)
    held = region.sample_tasks(0, 2, "heldout", 0)
    rest = Tasks(jnp.zeros((1, 2)), jnp.full((1, 2), -math.pi / 2))
    tasks = Tasks(*(jnp.concatenate([a, b]) for a, b in zip(held, rest)))
    return problem, tasks, region.open_loop_optima(problem, tasks)


def _objective(problem, target, theta0):
    """`p -> (effort, x(T)[:2] − x*)`, from `jaxrigid.simulate` and the control's own
    `derivatives`: not the code under test's `advance` and `partial_effort`."""
    plan = eqx.tree_at(lambda p: (p.theta0, p.theta_dot0), problem.control, (theta0, 0 * theta0))
    nodes, weights = plan.quadrature()

    def f(p):
        controlled = plan.with_coefficients(p)
        acc = jax.vmap(lambda s: controlled.derivatives(s)[2])(jnp.asarray(nodes))
        return jnp.sum(jnp.asarray(weights) * jnp.sum(acc**2, axis=-1))

    def c(p):
        model = eqx.tree_at(problem.slot.get, problem.model, plan.with_coefficients(p))
        sol = jr.simulate(problem.integrator, model, problem.state0, problem.dt, problem.n_steps)
        return sol.final_state.x[:2] - target

    return f, c


def test_each_task_is_a_kkt_point(optima):
    """Miss ≤ 1e-10 (the constraint holds to rounding once SQP converges: measured ≤ 2.1e-15)
    and `|∇f + Jᵀλ| ≤ 1e-8 |∇f|` at the least-squares `λ`, which is the solver's to 1e-7
    (measured 1.1e-10 and 7e-10), with `∇f` and `J` central differences (step 1e-5: `f` is
    quadratic, so its differences are exact to rounding, ~1e-11 here; `c`'s truncation is
    ~1e-10 of its third derivative) of `f` and `c` recomputed from `simulate`, which also
    give `f` at the optimum to 1e-12 (another program: other rounding; measured equal)."""
    problem, tasks, res = optima
    h = 1e-5

    @jax.jit
    def values(p, target, theta0):
        """`f`, `c` at `p` and at `p ± h eⱼ` for every coefficient (one batch of runs)."""
        f, c = _objective(problem, target, theta0)
        steps = h * jnp.eye(p.size, dtype=p.dtype).reshape((p.size,) + p.shape)
        points = jnp.concatenate([p[None], p[None] + steps, p[None] - steps])
        return jax.vmap(f)(points), jax.vmap(c)(points)

    n = res.coefficients[0].size
    for i in range(2):
        fs, cs = (
            np.asarray(a) for a in values(res.coefficients[i], tasks.target[i], tasks.theta0[i])
        )
        g = (fs[1 : n + 1] - fs[n + 1 :]) / (2 * h)
        J = ((cs[1 : n + 1] - cs[n + 1 :]) / (2 * h)).T
        lam, *_ = np.linalg.lstsq(J.T, -g, rcond=None)
        assert res.miss[i] <= 1e-10 and np.linalg.norm(cs[0]) <= 1e-10, (res.miss[i], cs[0])
        assert np.linalg.norm(g + J.T @ lam) <= 1e-8 * np.linalg.norm(g)
        np.testing.assert_allclose(res.multipliers[i], lam, rtol=1e-7)
        np.testing.assert_allclose(res.effort[i], fs[0], rtol=1e-12)
        assert fs[0] > 0.1  # the masses had to move (a plan that never moved would fail above)


def test_rest_is_the_optimum_where_rest_reaches_the_target(optima):
    """Target = start with the rails at the bottom: the ball at rest is already there (to
    rounding: its forces are rounding's), so the least effort is 0 and the plan stays at
    zero to rounding (measured: coefficients ≤ 2e-16, effort ≤ 1e-33, miss ≤ 7e-17)."""
    _, _, res = optima
    assert float(np.max(np.abs(res.coefficients[2]))) <= 1e-14
    assert float(res.effort[2]) <= 1e-26 and float(res.miss[2]) <= 1e-14
    # each iteration's miss is recorded: the reached tasks end at rounding
    assert res.miss_by_iteration.shape == (3, region.OPEN_LOOP_SETTINGS.n_iterations)
    np.testing.assert_allclose(res.miss_by_iteration[:, -1], res.miss, rtol=0, atol=1e-15)


def test_bad_input():
    problem = region.reach_region(dt=DT)
    tasks = region.sample_tasks(0, 2, "heldout", 0)
    with pytest.raises(ValueError, match=r"tasks must be targets \(B, 2\) and theta0 \(B, 2\)"):
        region.open_loop_optima(problem, Tasks(tasks.target[:, :1], tasks.theta0))
    with pytest.raises(TypeError, match="settings must be control.sqp.SQP, got dict"):
        region.open_loop_optima(problem, tasks, {"n_iterations": 3})
    obstacles = get_problem("avoid-obstacles", dt=0.25)
    with pytest.raises(ValueError, match="feedback needs a final-position constraint as the only"):
        region.open_loop_optima(obstacles, tasks, SQP(3))
    dynamic = reach_point(dt=0.25, mode="dynamic")
    with pytest.raises(ValueError, match="need the prescribed mode's B-spline control"):
        region.open_loop_optima(dynamic, tasks, SQP(3))
