"""Closed-loop rollouts of a feedback policy (`policies`) on disturbed plants (`scenarios`),
and their differentiable training loss.

A rollout runs `R` intervals of `m` steps (`H = m·dt`) from the problem's initial state with
a task's rails at `θ(0) = θ₀` at rest: at the start of interval `k` the policy maps the
`Observation` to the interval's coefficients (`policies`, (F1)), the plant (the model with
the scenario's masses and inertia, (S1)) runs that plan for `m` steps with the problem's
integrator, the kicks (S2) added on the plant's own clock (`scenarios.advance`), and the
next plan starts from this one's `θ`, `θ̇` at `H`. It returns, per rollout,

    miss = |x(RH)[:2] − x*|,    effort = Σₖ ∫₀ᴴ Σᵢ θ̈ᵢ² ds (plan k's),    ok            (C1)

(`ok`: every plant step succeeded and the state stayed finite; a caller reports the miss only
where `ok`). Each interval runs under `jax.checkpoint`: the reverse pass stores one carry (the
plant's state, `θ`, `θ̇`) per interval and recomputes the interval's steps. The training loss
over a batch of `B` rollouts is

    L = (1/B) Σ_b (miss_b / s)² + w · (1/B) Σ_b effort_b                                 (C2)

(`s` the miss scale, `w` the effort weight), differentiable with respect to the policy's
parameters (`loss_and_grad`). The programs are `eqx.filter_jit` functions of the arrays: one
build per shapes (batch, intervals) and policy structure, reused by every call.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .._carry import tied
from .._input_checks import reported_in_outcome
from .mpc import replan_steps, warm_start
from .policies import (
    LinearFeedback,
    Observation,
    PlantInformedFeedback,
    active_rows,
    features,
    plant_deviation,
)
from .scenarios import Scenarios, advance, draw_scenarios, kick_steps, plant, target_of

__all__ = [
    "ClosedLoop",
    "IntervalMaps",
    "LossWeights",
    "PerTask",
    "Tasks",
    "closed_loop_rollout",
    "drive_interval",
    "interval_maps",
    "linear_feedback",
    "loss_and_grad",
    "nominal_tasks",
    "training_loss",
]


class Tasks(NamedTuple):
    """`B` rollouts' tasks: `target (B, 2)` and the rails' initial positions `theta0 (B, n)`
    (at rest)."""

    target: jax.Array
    theta0: jax.Array


class ClosedLoop(NamedTuple):
    """(C1) per rollout: `miss (B,)` (NaN where not `ok`), `effort (B,)`, `ok (B,)`, `final_x
    (B, 3)`, `features (B, R, F)` (`policies.features` at each interval's start), `path
    (B, R·m + 1, 3)` the centre at every step."""

    miss: jax.Array
    effort: jax.Array
    ok: jax.Array
    final_x: jax.Array
    features: jax.Array
    path: jax.Array


class LossWeights(NamedTuple):
    """(C2)'s `miss_scale` `s` and `effort_weight` `w` (numbers: `training` passes them to its
    step program as inputs)."""

    miss_scale: float = 0.1
    effort_weight: float = 1e-2


def check_policy_problem(problem) -> None:
    """`ValueError` unless `problem` has the prescribed mode's B-spline control."""
    plan = problem.control
    if problem.mode != "prescribed" or not hasattr(plan, "n_intervals"):
        raise ValueError(
            "closed-loop policies need the prescribed mode's B-spline control (basis='bspline')"
        )


class IntervalMaps(NamedTuple):
    """What an interval's plan (P1) gives at its end and costs, linear and quadratic in its
    coefficients `c`: `θ(H) = θₖ + θ̇ₖH + φ(H)ᵀc`, `θ̇(H) = θ̇ₖ + φ'(H)ᵀc` and `∫₀ᴴ Σᵢ θ̈ᵢ² ds
    = Σᵢ cᵢᵀ G cᵢ` with `G = ∫₀ᴴ φ''φ''ᵀ ds` (the plan's Gauss–Legendre rule restricted to
    `[0, H)`, exact when `H` is a knot: `mpc.partial_effort`'s). Built once per problem,
    outside the traced programs: the rollouts then evaluate no basis derivative for them."""

    gram: jax.Array
    phi: jax.Array
    dphi: jax.Array


def interval_maps(problem, H: float) -> IntervalMaps:
    """`IntervalMaps` of the problem's control for intervals of length `H`."""
    plan = problem.control
    nodes, weights = plan.quadrature()
    keep = nodes < H
    dtype = plan.coefficients.dtype
    nodes, weights = jnp.asarray(nodes[keep], dtype), jnp.asarray(weights[keep], dtype)
    d2 = jax.vmap(jax.jacfwd(jax.jacfwd(plan._phi)))(nodes)
    at = jnp.asarray(H, dtype)
    return IntervalMaps((d2 * weights[:, None]).T @ d2, plan._phi(at), jax.jacfwd(plan._phi)(at))


def drive_interval(problem, maps, m: int, scenario: Scenarios, at, k, state, theta, theta_dot, c):
    """Interval `k` of a closed loop: the plan (F1) with coefficients `c (M, n)` from the
    rails' `θₖ`, `θ̇ₖ` run for `m` steps on the scenario's plant (kicks included). Returns
    `(state, xs, ok, θₖ₊₁, θ̇ₖ₊₁, effort)`: the plant after it, its centre at every step, its
    `ok`, the rails at `H` and the interval's `∫₀ᴴ Σθ̈²` (`IntervalMaps`)."""
    dt = problem.dt
    plan = eqx.tree_at(
        lambda p: (p.coefficients, p.theta0, p.theta_dot0), problem.control, (c, theta, theta_dot)
    )
    model = plant(eqx.tree_at(problem.slot.get, problem.model, plan), scenario)
    state, xs, ok = advance(
        problem.integrator, model, state, dt, m, step0=k * m, kicks=scenario.kicks, at=at
    )
    theta, theta_dot = (
        theta + theta_dot * (m * dt) + maps.phi @ c,
        theta_dot + maps.dphi @ c,
    )
    return state, xs, ok, theta, theta_dot, jnp.sum(c * (maps.gram @ c))


def _one(problem, policy, m: int, R: int, maps, scenario: Scenarios, at, target, theta0):
    """One rollout (C1), unbatched. A `PlantInformedFeedback` is told the plant's deviation
    (its `source`): the scenario's, or (I1)'s fit at the start of its `identify_at` interval,
    the horizon then run as two scans, before and after the fit."""
    dt = problem.dt
    plan0 = problem.control
    theta0 = jnp.asarray(theta0, plan0.coefficients.dtype)
    zero_c = jnp.zeros_like(plan0.coefficients)
    horizon = R * m * dt
    informed = isinstance(policy, PlantInformedFeedback)

    def interval(told):
        def run(carry, k):
            state, theta, theta_dot, effort, ok = carry
            obs = Observation(
                state.x[:2], state.Omega, state.q, theta, theta_dot, target,
                horizon - k * m * dt, k, told,
            )  # fmt: skip
            rows = policy(obs)
            c = zero_c.at[: rows.shape[0]].set(rows.astype(zero_c.dtype))
            measured = (state, theta, theta_dot)
            state, xs, ok_k, theta, theta_dot, e = drive_interval(
                problem, maps, m, scenario, at, k, state, theta, theta_dot, c
            )
            effort = effort + e
            return (state, theta, theta_dot, effort, ok & ok_k), (features(obs), xs, measured, rows)

        # the reverse pass keeps one carry per interval and re-runs the interval's m steps
        return jax.checkpoint(run)

    state0 = problem.state0
    carry = (state0, theta0, jnp.zeros_like(theta0), jnp.zeros((), theta0.dtype), jnp.asarray(True))
    carry = tied(carry, (scenario, at, target, policy))
    ks = jnp.arange(R, dtype=jnp.int32)
    if informed and policy.source == "fitted":
        from .identification import identified_deviation  # it drives intervals: `drive_interval`

        s = policy.identify_at
        unknown = jnp.zeros((scenario.mass_scale.shape[0] + 3,), theta0.dtype)
        carry, (f1, x1, X1, C1) = jax.lax.scan(interval(unknown), carry, ks[:s])
        X = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b[None]]), X1, carry[:3])
        told = identified_deviation(problem, m, maps, at, X, C1, scenario)
        carry, (f2, x2, _, _) = jax.lax.scan(interval(told), carry, ks[s:])
        feats, xs = jnp.concatenate([f1, f2]), jnp.concatenate([x1, x2])
    else:
        told = plant_deviation(scenario.mass_scale, scenario.inertia_scale) if informed else None
        carry, (feats, xs, _, _) = jax.lax.scan(interval(told), carry, ks)
    state, _, _, effort, ok = carry
    miss = jnp.linalg.norm(state.x[:2] - target)
    path = jnp.concatenate([state0.x[None], xs.reshape(-1, 3)])
    return miss, effort, ok, state.x, feats, path


class PerTask(eqx.Module):
    """One policy per rollout: `policy`'s arrays carry a leading axis `B`, and rollout `b`
    runs member `b` (`neighbouring.neighbouring_feedback`: each task's gains around its own
    optimum)."""

    policy: Any

    @property
    def count(self) -> int:
        return jax.tree_util.tree_leaves(eqx.filter(self.policy, eqx.is_array))[0].shape[0]


def check_per_task(policy, count: int) -> None:
    """`ValueError` unless a `PerTask` policy has one member per rollout."""
    if isinstance(policy, PerTask) and policy.count != count:
        raise ValueError(
            f"a PerTask policy needs one member per rollout: {policy.count} for {count} rollouts"
        )


def _batch(problem, policy, m, R, maps, scenarios, at, tasks: Tasks):
    if isinstance(policy, PerTask):
        arrays, static = eqx.partition(policy.policy, eqx.is_array)

        def each(p, s, a, x, th):
            return _one(problem, eqx.combine(p, static), m, R, maps, s, a, x, th)

        with reported_in_outcome():
            return jax.vmap(each)(arrays, scenarios, at, tasks.target, tasks.theta0)
    one = lambda s, a, x, th: _one(problem, policy, m, R, maps, s, a, x, th)  # noqa: E731
    with reported_in_outcome():
        return jax.vmap(one)(scenarios, at, tasks.target, tasks.theta0)


@eqx.filter_jit
def _rollout_program(problem, policy, m, R, maps, scenarios, at, tasks):
    miss, effort, ok, final_x, feats, path = _batch(
        problem, policy, m, R, maps, scenarios, at, tasks
    )
    return ClosedLoop(jnp.where(ok, miss, jnp.nan), effort, ok, final_x, feats, path)


def interval_sizes(problem, interval, intervals):
    """`(m, R)`: the steps per policy interval of length `interval` and the number of
    intervals (`intervals`, default all that fit the horizon)."""
    m = replan_steps(problem, interval)
    R_max = problem.n_steps // m
    R = R_max if intervals is None else int(intervals)
    if not 1 <= R <= R_max:
        raise ValueError(f"intervals must be in [1, {R_max}], got {intervals!r}")
    return m, R


def closed_loop_rollout(
    problem, policy, scenarios: Scenarios, tasks: Tasks, interval=None, intervals=None
) -> ClosedLoop:
    """(C1) for every scenario with its task (leading axes `B`, `vmap`): `interval` `H` (the
    control interval, default `T/10`; a whole number of steps, a multiple of the plan's knot
    spacing, `mpc.replan_steps`), `intervals` `R` (default all `T/H`; fewer: a shorter
    horizon `RH`); `policy` one for all, or a `PerTask` with one per rollout."""
    check_policy_problem(problem)
    check_per_task(policy, scenarios.count)
    m, R = interval_sizes(problem, interval, intervals)
    at = kick_steps(scenarios, problem.dt)
    maps = interval_maps(problem, m * problem.dt)
    return _rollout_program(problem, policy, m, R, maps, scenarios, at, tasks)


def training_loss(miss, effort, weights: LossWeights):
    """(C2) over a batch."""
    s, w = weights
    return jnp.mean((miss / s) ** 2) + w * jnp.mean(effort)


class Step(NamedTuple):
    """A loss evaluation: `loss ()` (C2), `grads` (the policy's structure), `miss (B,)`,
    `effort (B,)`, `ok (B,)`."""

    loss: jax.Array
    grads: Any
    miss: jax.Array
    effort: jax.Array
    ok: jax.Array


def _loss(policy, problem, m, R, maps, scenarios, at, tasks, weights):
    miss, effort, ok, *_ = _batch(problem, policy, m, R, maps, scenarios, at, tasks)
    return training_loss(miss, effort, weights), (miss, effort, ok)


def loss_value_and_grad(policy, problem, m, R, maps, scenarios, at, tasks, weights) -> Step:
    """(C2) and its gradient with respect to the policy's arrays (traceable: `train_policy`'s
    step calls it inside its own program)."""
    (loss, (miss, effort, ok)), grads = eqx.filter_value_and_grad(_loss, has_aux=True)(
        policy, problem, m, R, maps, scenarios, at, tasks, weights
    )
    return Step(loss, grads, miss, effort, ok)


_loss_program = eqx.filter_jit(loss_value_and_grad)


def loss_and_grad(
    problem, policy, scenarios, tasks, weights=LossWeights(), interval=None, intervals=None
) -> Step:
    """(C2) on a batch and its gradient with respect to the policy's parameters (one program
    per shapes)."""
    check_policy_problem(problem)
    check_per_task(policy, scenarios.count)
    m, R = interval_sizes(problem, interval, intervals)
    at = kick_steps(scenarios, problem.dt)
    maps = interval_maps(problem, m * problem.dt)
    return _loss_program(policy, problem, m, R, maps, scenarios, at, tasks, weights)


def nominal_tasks(problem, count: int) -> Tasks:
    """`count` copies of a fixed-target problem's task: its `FinalPosition` target and its
    control's `θ(0)` (reach-point)."""
    target = target_of(problem)
    theta0 = problem.control.theta0
    return Tasks(
        jnp.broadcast_to(target, (count, 2)), jnp.broadcast_to(theta0, (count,) + theta0.shape)
    )


def linear_feedback(problem, coefficients, interval=None, copies: int = 1) -> LinearFeedback:
    """(F2) around the control with `coefficients` (the open-loop optimum) with zero gains:
    `c̄ₖ` the control's tail on interval `k` (`mpc.warm_start` from the previous interval's
    plan: exact when the knot spacing divides `H`), `f̄ₖ` the features of its run on the model
    (no disturbance) at `tₖ`. The nominal run is `copies` identical rollouts: a caller that
    evaluates `copies` scenarios next reuses its program."""
    check_policy_problem(problem)
    m, R = interval_sizes(problem, interval, None)
    H = m * problem.dt
    plan = problem.control.with_coefficients(coefficients)
    rows = active_rows(plan, H)
    nominal = [plan.coefficients[:rows]]
    for _ in range(R - 1):
        plan = warm_start(plan, None, H)
        nominal.append(plan.coefficients[:rows])
    c_bar = jnp.stack(nominal)
    n = c_bar.shape[-1]
    policy = LinearFeedback.zeros(c_bar, jnp.zeros((R, 9 + 2 * n), c_bar.dtype))
    nominal_plant = draw_scenarios(
        0, copies, 0.0, problem.model.n_masses, problem.t_end, c_bar.dtype
    )
    run = closed_loop_rollout(problem, policy, nominal_plant, nominal_tasks(problem, copies), H)
    return LinearFeedback.zeros(c_bar, run.features[0])
