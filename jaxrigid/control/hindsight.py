"""The hindsight optimum of a disturbed plant: the least effort any feedback law of the closed
loop's form could spend on it.

A feedback law (`closed_loop`, (F1)) chooses at the start of each interval `k` the
coefficients `cₖ (rows, n)` of the rails' plan on it, from whatever it observes; over the
horizon its control is some sequence `C = (c₀, …, c_{R−1})`, and its effort is
`Σₖ cₖᵀ G cₖ` ((C1), `closed_loop.IntervalMaps`). Knowing the plant in advance (its masses,
inertia and kicks: the scenario), the least effort that ends within `r` of the target is

    E_h(r) = min_C Σₖ cₖᵀ G cₖ   subject to   |x_C(T)[:2] − x*| ≤ r,                       (H1)

`x_C(T)` the plant's run under `C` (`replan.drive_sequence`, kicks included). No causal
law of that form, however it is designed or trained, reaches within `r` of `x*` on that plant
with less effort, so `E_h(r)` bounds from below, rollout by rollout, the effort of every
controller that succeeds there (to the extent that SQP's local solution is the global one).

The effort is a convex quadratic with its minimum, 0, at `C = 0` (the rails kept at their
phases). So either `C = 0` itself ends within `r` (then `E_h = 0`), or the bound is active at
every minimiser: `E_h(r)` is then the least effort with `|e|² = r²`, `e = x_C(T)[:2] − x*`
(for `r = 0`, `e = 0`: two constraints). Both are solved by `sqp.solve` (as the open-loop
optimum, `region.open_loop_optima`; `replan.least_effort`) from the task's nominal plan in
interval form (its open-loop optimum's tails, `closed_loop.linear_feedback`'s `c̄ₖ`), every
rollout in one program under `vmap`. The interval form lets `θ̈` jump between intervals,
which the whole horizon's spline does not: with no disturbance `E_h(0)` is the task's
optimum or slightly below it.

**The causal references.** A law re-plans, at the start of some intervals `s`, the intervals
from `s` on from the state it measured there, by (H1) on what it knows of the plant, no kick
still to come assumed. `informed_replanner` is told the plant's masses and inertia (from
interval `identified_at` on, the model's before); `identifying_replanner` is told nothing and
fits them, and the kicks so far, to its measurements ((I1), `identification`). Both re-plan
at 0, at that interval and at the start of the interval after each kick (`stage_starts`).
(H1) itself is one such re-plan from the start that knows everything, kicks included. All
three are one program (`_program`): a fixed number of stages `(start, knows, skip)`, the
references differing only in the stages' values.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import xla_options
from .._carry import tied
from .._checks import is_integer, real_number
from .._input_checks import reported_in_outcome
from ..program_store import call_filtered
from .closed_loop import Tasks, check_policy_problem, interval_maps, interval_sizes
from .identification import (
    FIT_ITERATIONS,
    fit_plant,
    model_unknowns,
    one_step_residual,
    unknowns,
)
from .policies import active_rows
from .replan import drive_sequence, least_effort, nominal_sequence, outcome
from .scenarios import Scenarios, kick_steps
from .sqp import SQP

__all__ = [
    "HINDSIGHT_SETTINGS",
    "Hindsight",
    "Identified",
    "Informed",
    "hindsight_optima",
    "identifying_replanner",
    "informed_replanner",
    "replan_intervals",
    "stage_starts",
]

HINDSIGHT_SETTINGS = SQP(n_iterations=30)
"""(H1)'s budget: 30 SQP iterations from the nominal plan (a perturbed plant's optimum lies
near it; `Hindsight.miss` says where the bound was not reached in the budget)."""

MODEL, TOLD, FITTED, EVERYTHING = 0, 1, 2, 3
"""What a stage's re-plan knows of the plant (`knows`): the model's masses and inertia; the
plant's; those fitted by (I1); the plant's and every kick, past and future ((H1))."""


class Hindsight(NamedTuple):
    """Per rollout (leading axis `B`): `coefficients (B, R, rows, n)` the sequence `C` found;
    `effort (B,)` its `Σₖ cₖᵀ G cₖ`, `E_h(r)` of (H1); `miss (B,)` `|x_C(T)[:2] − x*|` of the
    plant's run under it (≤ `r` where solved; NaN where a plant step failed); `zero (B,)`:
    the rails kept at rest already end within `r` (`E_h = 0`)."""

    coefficients: jax.Array
    effort: jax.Array
    miss: jax.Array
    zero: jax.Array


class Informed(NamedTuple):
    """Per rollout (leading axis `B`): `coefficients (B, R, rows, n)` the sequence the
    informed re-planner drove; `effort (B,)` its `Σₖ cₖᵀ G cₖ`; `miss (B,)` `|x(T)[:2] − x*|`
    of the plant's run under it (NaN where a plant step failed)."""

    coefficients: jax.Array
    effort: jax.Array
    miss: jax.Array


class Identified(NamedTuple):
    """`Informed`'s fields for the identifying re-planner, and `plant` the last fit's plant
    (`Scenarios`, leading axis `B`: the masses' and moments' scales, the kicks), `residual
    (B,)` (I1)'s `|ρ|` at it."""

    coefficients: jax.Array
    effort: jax.Array
    miss: jax.Array
    plant: Scenarios
    residual: jax.Array


def _stages_one(
    problem, settings, m, R, rows, maps, scenario, at, target, theta0, c, stages, r, n_fit
):  # fmt: skip
    """One rollout: from its task's nominal sequence, each stage `(start, knows, skip)` not
    skipped measures the plant's run so far, takes the plant it `knows` (fitting (I1) where
    `FITTED`) and re-plans the intervals from `start` from the measured state (`least_effort`).
    Returns the driven sequence's `(C, effort, miss)`, and the last re-plan's `zero`, plant
    `p` and fit residual."""
    rest = (problem.state0, theta0, jnp.zeros_like(theta0))
    p0 = model_unknowns(scenario)
    plant = (scenario.mass_scale, scenario.inertia_scale, jnp.ravel(scenario.kicks))
    truth = jnp.concatenate(plant)
    n_known = scenario.mass_scale.shape[0] + 3  # p's masses and moments, before the kicks
    nothing = jnp.zeros((), p0.dtype)

    def replan(carry, start, knows):
        C = carry[0]
        # what the law measured: the plant's state at the start of every interval (those
        # from `start` on are not used: their plans are still to be chosen)
        _, _, ends = drive_sequence(problem, m, maps, scenario, at, rest, C, collect=True)
        X = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), rest, ends)
        residual = one_step_residual(problem, m, maps, at, X, C, start, scenario)
        p, rho = jax.lax.switch(
            knows,
            [lambda: (p0, nothing), lambda: (truth, nothing),
             lambda: fit_plant(residual, p0, n_fit), lambda: (truth, nothing)],
        )  # fmt: skip
        # the plant re-planned on: the kicks still to come only where it knows everything
        ahead = unknowns(jnp.where(knows == EVERYTHING, p, p.at[n_known:].set(0.0)), scenario)
        measured = jax.tree_util.tree_map(lambda a: a[start], X)

        def run(C):
            (state, _, _), ok = drive_sequence(
                problem, m, maps, ahead, at, measured, C, start=start
            )
            return state.x[:2] - target, ok

        C, zero = least_effort(settings, maps, run, C, jnp.arange(R) >= start, r)
        return C, zero, p, rho

    def stage(carry, st):
        start, knows, skip = st
        return jax.lax.cond(skip, lambda: carry, lambda: replan(carry, start, knows)), None

    C0 = nominal_sequence(problem, c, theta0, m * problem.dt, R, rows)
    # every leaf batched with the rollout from the start (`tied`): one batching of the stages
    init = tied((C0, jnp.asarray(False), p0, nothing), (scenario, at, target, theta0, c))
    (C, zero, p, rho), _ = jax.lax.scan(stage, init, stages)
    return *outcome(problem, m, maps, scenario, at, target, theta0, C), zero, p, rho


@xla_options.filter_jit
def _program(problem, settings, m, R, rows, maps, scenarios, at, tasks, c, stages, r, n_fit):
    """Every rollout's stages (`_stages_one`), one program under `vmap`."""

    def one(s, a, x, th, c):
        return _stages_one(problem, settings, m, R, rows, maps, s, a, x, th, c, stages, r, n_fit)

    with reported_in_outcome():
        return jax.vmap(one)(scenarios, at, tasks.target, tasks.theta0, c)


def _call(args, stages, r, n_fit=FIT_ITERATIONS):
    """`_program` with the stages `[(start, knows), …]` padded with skipped ones to `2 + k`
    (`k` kicks: the most `stage_starts` gives), so that every reference is one program."""
    scenarios = args[6]
    length = 2 + scenarios.kicks.shape[1]
    padded = list(stages) + [(0, MODEL)] * (length - len(stages))
    arrays = (
        jnp.asarray([s for s, _ in padded], jnp.int32),
        jnp.asarray([k for _, k in padded], jnp.int32),
        jnp.arange(length) >= len(stages),
    )
    dtype = args[0].control.coefficients.dtype
    return call_filtered(_program, *args, arrays, jnp.asarray(r, dtype), int(n_fit))


def hindsight_optima(
    problem,
    tasks: Tasks,
    coefficients,
    scenarios: Scenarios,
    tolerance=0.0,
    settings: SQP = HINDSIGHT_SETTINGS,
    interval=None,
) -> Hindsight:
    """(H1) for every rollout: task `b` (`tasks`, leading axis `B`) with its open-loop optimum
    `coefficients[b]` (`region.open_loop_optima`'s, the start) on the plant `scenarios[b]`,
    within `tolerance` `r` of its target (0: exactly; `r > 0`: the success radius), for the
    closed loop's intervals (`interval`, default `T/10`, as `closed_loop_rollout`)."""
    r = _radius(tolerance)
    args = _checked(problem, tasks, coefficients, scenarios, settings, interval)
    # one re-plan from the start, every kick seen and the plant known: (H1)
    return Hindsight(*_call(args, [(0, EVERYTHING)], r)[:4])


def _radius(tolerance) -> float:
    r = real_number("tolerance", tolerance)
    if not (math.isfinite(r) and r >= 0):
        raise ValueError(f"tolerance must be a finite number ≥ 0, got {tolerance!r}")
    return r


def _checked(problem, tasks, coefficients, scenarios, settings, interval):
    """The programs' arguments `(problem, settings, m, R, rows, maps, scenarios, at, tasks,
    coefficients)`, after the checks every entry point shares."""
    check_policy_problem(problem)
    if not isinstance(settings, SQP):
        raise TypeError(f"settings must be control.sqp.SQP, got {type(settings).__name__}")
    dtype = problem.control.coefficients.dtype
    coefficients = jnp.asarray(coefficients, dtype)
    tasks = Tasks(jnp.asarray(tasks.target, dtype), jnp.asarray(tasks.theta0, dtype))
    B = coefficients.shape[0]
    if (
        coefficients.shape[1:] != problem.control.coefficients.shape
        or tasks.target.shape != (B, 2)
        or tasks.theta0.shape != (B, problem.model.n_masses)
        or scenarios.count != B
    ):
        raise ValueError(
            f"coefficients (B, {', '.join(map(str, problem.control.coefficients.shape))}), "
            f"tasks and scenarios must be one per rollout: got coefficients {coefficients.shape}"
            f", targets {tasks.target.shape}, theta0 {tasks.theta0.shape} and "
            f"{scenarios.count} scenarios"
        )
    m, R = interval_sizes(problem, interval, None)
    rows = active_rows(problem.control, m * problem.dt)
    maps = interval_maps(problem, m * problem.dt)
    at = kick_steps(scenarios, problem.dt)
    return problem, settings, m, R, rows, maps, scenarios, at, tasks, coefficients


# ------------------------------------------------------------------------------------------
# The causal re-planners: the plant told or fitted, each kick seen when it has happened.


def replan_intervals(at, m: int, R: int) -> list[int]:
    """The intervals at whose start a causal law has seen a new kick: a kick added before
    step `a` is in the state observed at the start of interval `k` when `a < k·m`, so from
    interval `⌊a/m⌋ + 1` (those past the horizon dropped); `at (K, k)` the same for every
    rollout (`ValueError` otherwise)."""
    at = jnp.asarray(at)
    if not bool(jnp.all(at == at[:1])):
        raise ValueError("the informed re-planner needs the same kick times in every scenario")
    return sorted({int(a) // m + 1 for a in at[0] if int(a) // m + 1 < R})


def stage_starts(at, m: int, R: int, identified_at: int, name: str = "identified_at"):
    """The intervals at whose start a re-planner re-plans: 0, `identified_at` (`ValueError`
    unless in `[0, R)`) and those after a kick (`replan_intervals`)."""
    if not (is_integer(identified_at) and 0 <= identified_at < R):
        raise ValueError(f"{name} must be an interval in [0, {R}), got {identified_at!r}")
    return sorted({0, int(identified_at), *replan_intervals(at, m, R)})


def informed_replanner(
    problem,
    tasks: Tasks,
    coefficients,
    scenarios: Scenarios,
    tolerance=0.0,
    settings: SQP = HINDSIGHT_SETTINGS,
    interval=None,
    identified_at: int = 0,
) -> Informed:
    """A causal reference for every rollout: a law that knows the plant's masses and inertia
    from the start of interval `identified_at` (0: from the start; before it, the model's)
    but never its kicks before they happen. It drives the least-effort sequence ending within
    `tolerance` of `x*` without kicks ((H1) with no kick, on what it knows); at the start of
    each interval after a kick (`replan_intervals`) and at `identified_at` it re-plans the
    remaining intervals likewise from the state measured there (SQP from its current plan,
    the earlier intervals kept as driven). Arguments as `hindsight_optima`'s. With
    `identified_at > 0` it stands for a law that identifies the plant from what it observed
    before (`identifying_replanner` is one); one that knew the future kicks is (H1)."""
    args = (problem, tasks, coefficients, scenarios, tolerance, settings, interval)
    return Informed(*_replanner(*args, identified_at, TOLD, "identified_at")[:3])


def identifying_replanner(
    problem,
    tasks: Tasks,
    coefficients,
    scenarios: Scenarios,
    tolerance=0.0,
    settings: SQP = HINDSIGHT_SETTINGS,
    interval=None,
    identify_at: int = 3,
    fit_iterations: int = FIT_ITERATIONS,
) -> Identified:
    """`informed_replanner` told nothing of the plant: it plans on the model until the start
    of interval `identify_at` (default 3: `t = 1.5` at `T = 5` in ten intervals, the first
    kick seen), then fits the plant's masses, moments and kicks so far to the states it
    measured ((I1), `fit_iterations` Levenberg–Marquardt steps) and re-plans from the
    measured state on the fitted plant, again after each kick. The scenarios' plants are only
    simulated: the law sees them through the measured states alone."""
    if not (is_integer(fit_iterations) and not isinstance(fit_iterations, bool)) or (
        fit_iterations < 1
    ):
        raise ValueError(f"fit_iterations must be an integer ≥ 1, got {fit_iterations!r}")
    args = (problem, tasks, coefficients, scenarios, tolerance, settings, interval)
    out = _replanner(*args, identify_at, FITTED, "identify_at", fit_iterations)
    C, effort, miss, _, p, rho = out
    return Identified(C, effort, miss, jax.vmap(unknowns)(p, scenarios), rho)


def _replanner(
    problem, tasks, coefficients, scenarios, tolerance, settings, interval, known_from: int,
    knows: int, name: str, n_fit: int = FIT_ITERATIONS,
):  # fmt: skip
    """The re-planner whose re-plans from interval `known_from` (`name`) on know the plant as
    `knows` (`TOLD`, `FITTED`), the model before: `_program`'s outputs."""
    r = _radius(tolerance)
    args = _checked(problem, tasks, coefficients, scenarios, settings, interval)
    m, R, at = args[2], args[3], args[7]
    starts = stage_starts(at, m, R, known_from, name)
    return _call(args, [(s, knows if s >= known_from else MODEL) for s in starts], r, n_fit)
