"""The MPC expert a policy learns from (`control.imitation`): on the nominal plant it follows
the task's open-loop optimum (labels its tails, principle of optimality) whether it or the
policy drives; a tolerance that never re-plans replays the optimum (`scenarios.replay`); on a
disturbed plant every re-plan reaches the target on the model; the regression recovers a
policy from its own labels; bad input is refused. `dt = 0.25` (20 steps over `T = 5`) so
that the programs build in seconds."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.control import region
from jaxrigid.control.closed_loop import Tasks
from jaxrigid.control.imitation import FitSettings, expert_rollout, fit, flatten
from jaxrigid.control.mpc import warm_start
from jaxrigid.control.policies import LinearFeedback, Observation
from jaxrigid.control.scenarios import draw_scenarios, replay

DT = 0.25


def _task_problem(problem, task: Tasks):
    """The family's problem with the task's target and rails (what `replay` reads)."""
    return eqx.tree_at(
        lambda p: (p.constraints[0].target, p.control.theta0),
        problem,
        (task.target[0], task.theta0[0]),
    )


def _tails(problem, coefficients):
    """The optimum's plan on each interval `k`, its first 4 rows (those nonzero on `[0, H)`):
    `mpc.warm_start` applied `k` times (exact: the knot spacing divides `H`)."""
    plan = problem.control.with_coefficients(coefficients)
    tails = [plan.coefficients[:4]]
    for _ in range(9):
        plan = warm_start(plan, None, region.INTERVAL)
        tails.append(plan.coefficients[:4])
    return jnp.stack(tails)


@pytest.fixture(scope="module")
def runs():
    """One held-out task (a target 1.67 from the start) in four rollouts of one program:
    0, the nominal plant, the expert driving; 1, the same with the policy (zero gains around
    the optimum) driving; 2, a σ = 0.05 plant, tolerance 10 (never re-plans); 3, that plant,
    tolerance 0 (MPC)."""
    problem = region.reach_region(dt=DT)
    task = region.sample_tasks(0, 1, "heldout", 0)
    optimum = region.open_loop_optima(problem, task)
    fixed = _task_problem(problem, task)
    policy = LinearFeedback.zeros(_tails(fixed, optimum.coefficients[0]), jnp.zeros((10, 13)))
    disturbed = draw_scenarios(3, 1, 0.05, 2, problem.t_end)
    nominal = eqx.tree_at(
        lambda s: (s.mass_scale, s.inertia_scale, s.kicks),
        disturbed,
        (jnp.ones((1, 2)), jnp.ones((1, 3)), jnp.zeros((1, 2, 3))),
    )
    scenarios = jax.tree_util.tree_map(
        lambda a, b: jnp.concatenate([a, a, b, b]), nominal, disturbed
    )
    tasks = Tasks(*(jnp.repeat(a, 4, axis=0) for a in task))
    optima = jnp.repeat(optimum.coefficients, 4, axis=0)
    drives = jnp.array([True, False, True, True])
    tolerance = jnp.array([0.0, 0.0, 10.0, 0.0])
    run = expert_rollout(problem, policy, scenarios, tasks, optima, drives, tolerance=tolerance)
    open_loop = replay(fixed, optimum.coefficients[0], disturbed)
    return problem, optimum, policy, run, open_loop


def test_on_the_nominal_plant_the_expert_keeps_the_optimum(runs):
    """The principle of optimality: re-planning an optimum's tail from its own state finds
    that tail again. The expert driving: miss ≤ 1e-10 (measured 0) and effort the optimum's
    to 1e-7 (a re-plan lowers a tail's value only by the optimum's own imprecision in its
    flat directions, summed over 10 re-plans; measured −1.5e-8); its labels are the tails
    (`mpc.warm_start`'s chain) to 1e-2 of their size: the argument of a flat
    minimum is known only to about the square root of its value's precision (measured
    5.9e-4). The policy driving (the tails exactly) is the open loop itself: miss ≤ 1e-10,
    effort the optimum's to 1e-12 (measured 6e-15 and 6e-15)."""
    _, optimum, policy, run, _ = runs
    assert float(run.miss[0]) <= 1e-10
    np.testing.assert_allclose(run.effort[0], optimum.effort[0], rtol=1e-7)
    scale = float(jnp.max(jnp.abs(policy.nominal_coefficients)))
    tails = policy.nominal_coefficients
    np.testing.assert_allclose(run.labels[0], tails, rtol=0, atol=1e-2 * scale)
    assert float(run.miss[1]) <= 1e-10
    np.testing.assert_allclose(run.effort[1], optimum.effort[0], rtol=1e-12)
    observations, labels = flatten(run)  # the regression's pairs: every rollout was ok
    assert labels.shape == (4 * run.labels.shape[1],) + run.labels.shape[2:]
    np.testing.assert_array_equal(observations.x, run.observations.x.reshape(-1, 2))


def test_a_tolerance_never_crossed_replays_the_optimum(runs):
    """Tolerance 10 (a disc no miss leaves): the expert holds the optimum's tails, and the
    rollout is `scenarios.replay`'s open loop on the same plant, a separate program: miss
    and effort to 1e-12 (rounding over 20 steps; measured 1.4e-14 and 4e-15), as is
    `region.replay_optima`'s miss (per task, the command's open loop for reach-region)."""
    problem, optimum, _, run, open_loop = runs
    np.testing.assert_allclose(run.miss[2], open_loop.miss[0], rtol=1e-12)
    # `region.replay_optima`, each task's plan on its own plant, is the same open loop
    task = region.sample_tasks(0, 1, "heldout", 0)
    disturbed = draw_scenarios(3, 1, 0.05, 2, problem.t_end)
    alone = region.replay_optima(problem, task, optimum.coefficients, disturbed)
    np.testing.assert_allclose(alone, open_loop.miss, rtol=1e-12)
    np.testing.assert_allclose(run.effort[2], open_loop.effort[0], rtol=1e-12)


def test_on_a_disturbed_plant_each_replan_reaches_the_target_on_the_model(runs):
    """Tolerance 0: every re-plan's predicted miss ≤ 1e-8 (8 SQP iterations from a warm start
    converge to rounding; measured 7.4e-12), and the plant's miss is below a twentieth of the
    open loop's (measured 0.0039 against 0.30)."""
    *_, run, open_loop = runs
    assert float(jnp.max(run.predicted_miss[3])) <= 1e-8
    assert float(run.miss[3]) <= 0.05 * float(open_loop.miss[0])


def test_fit_recovers_a_linear_policy_from_its_labels():
    """Labels from a `LinearFeedback` with random gains at random observations; fitting a
    zero-gain one of the same structure (a consistent least-squares problem in the gains:
    Adam's iterates converge until its cosine-decayed rate reaches 0) recovers the gains to
    1e-8 of their size (measured 1e-10) and lowers the loss below 1e-18 of its start
    (measured 5e-22)."""
    R, rows, n, F, N = 2, 4, 2, 13, 512
    keys = jax.random.split(jax.random.key(0), 8)
    true = LinearFeedback(
        jax.random.normal(keys[0], (R, rows * n, F)),
        jax.random.normal(keys[1], (R, rows, n)),
        jax.random.normal(keys[2], (R, F)),
    )
    obs = Observation(
        jax.random.normal(keys[3], (N, 2)), jax.random.normal(keys[4], (N, 3)),
        jax.random.normal(keys[5], (N, 4)), jax.random.normal(keys[6], (N, n)),
        jax.random.normal(keys[7], (N, n)), jnp.zeros((N, 2)), jnp.ones((N,)),
        jnp.arange(N, dtype=jnp.int32) % R,
    )  # fmt: skip
    labels = jax.vmap(true)(obs)
    start = LinearFeedback.zeros(true.nominal_coefficients, true.nominal_features)
    settings = FitSettings(2000, 128, learning_rate=0.03)
    fitted, losses, final = fit(start, obs, labels, settings=settings)
    scale = float(jnp.max(jnp.abs(true.gains)))
    np.testing.assert_allclose(fitted.gains, true.gains, rtol=0, atol=1e-8 * scale)
    assert float(final) < 1e-18 * float(losses[0])


def test_bad_input_is_refused(runs):
    problem, optimum, policy, *_ = runs
    task = region.sample_tasks(0, 2, "heldout", 0)
    sc = draw_scenarios(0, 2, 0.05, 2, problem.t_end)
    c = jnp.repeat(optimum.coefficients, 2, axis=0)
    with pytest.raises(TypeError, match="settings must be control.sqp.SQP, got str"):
        expert_rollout(problem, policy, sc, task, c, True, settings="sqp")
    with pytest.raises(ValueError, match=r"tasks and optima must have one row per scenario \(2\)"):
        expert_rollout(problem, policy, sc, task, c[:1], True)
    with pytest.raises(ValueError, match="tolerance must be ≥ 0"):
        expert_rollout(problem, policy, sc, task, c, True, tolerance=-0.1)
    obs = Observation(
        *(jnp.zeros((3,) + s) for s in [(2,), (3,), (4,), (2,), (2,), (2,), ()]),
        jnp.zeros((3,), jnp.int32),
    )
    with pytest.raises(ValueError, match="observations and labels must be pairs"):
        fit(policy, obs, jnp.zeros((2, 4, 2)))
