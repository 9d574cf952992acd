"""The hindsight optimum of a disturbed plant: the least effort any feedback law of the closed
loop's form could spend on it.

A feedback law (`closed_loop`, (F1)) chooses at the start of each interval `k` the
coefficients `cₖ (rows, n)` of the rails' plan on it, from whatever it observes; over the
horizon its control is some sequence `C = (c₀, …, c_{R−1})`, and its effort is
`Σₖ cₖᵀ G cₖ` ((C1), `closed_loop.IntervalMaps`). Knowing the plant in advance (its masses,
inertia and kicks: the scenario), the least effort that ends within `r` of the target is

    E_h(r) = min_C Σₖ cₖᵀ G cₖ   subject to   |x_C(T)[:2] − x*| ≤ r,                       (H1)

`x_C(T)` the plant's run under `C` (`closed_loop.drive_interval`, kicks included). No causal
law of that form, however it is designed or trained, reaches within `r` of `x*` on that plant
with less effort, so `E_h(r)` bounds from below, rollout by rollout, the effort of every
controller that succeeds there (to the extent that SQP's local solution is the global one).

The effort is a convex quadratic with its minimum, 0, at `C = 0` (the rails kept at their
phases). So either `C = 0` itself ends within `r` (then `E_h = 0`), or the bound is active at
every minimiser: `E_h(r)` is then the least effort with `|e|² = r²`, `e = x_C(T)[:2] − x*`
(for `r = 0`, `e = 0`: two constraints). Both are solved by `sqp.solve` (as the open-loop
optimum, `region.open_loop_optima`) from the task's nominal plan in interval form (its
open-loop optimum's tails, `closed_loop.linear_feedback`'s `c̄ₖ`), every rollout in one
program under `vmap`. The interval form lets `θ̈` jump between intervals, which the whole
horizon's spline does not: with no disturbance `E_h(0)` is the task's optimum or slightly
below it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import xla_options
from .._checks import is_integer, real_number
from .._input_checks import reported_in_outcome
from ..program_store import call_filtered
from .closed_loop import Tasks, check_policy_problem, drive_interval, interval_maps, interval_sizes
from .mpc import warm_start
from .policies import active_rows
from .region import task_plan
from .scenarios import Scenarios, kick_steps
from .sqp import SQP, solve

__all__ = [
    "HINDSIGHT_SETTINGS",
    "Hindsight",
    "Informed",
    "hindsight_optima",
    "informed_replanner",
    "replan_intervals",
]

HINDSIGHT_SETTINGS = SQP(n_iterations=30)
"""(H1)'s budget: 30 SQP iterations from the nominal plan (a perturbed plant's optimum lies
near it; `Hindsight.miss` says where the bound was not reached in the budget)."""


class Hindsight(NamedTuple):
    """Per rollout (leading axis `B`): `coefficients (B, R, rows, n)` the sequence `C` found;
    `effort (B,)` its `Σₖ cₖᵀ G cₖ`, `E_h(r)` of (H1); `miss (B,)` `|x_C(T)[:2] − x*|` of the
    plant's run under it (≤ `r` where solved; NaN where a plant step failed); `zero (B,)`:
    the rails kept at rest already end within `r` (`E_h = 0`)."""

    coefficients: jax.Array
    effort: jax.Array
    miss: jax.Array
    zero: jax.Array


def nominal_sequence(problem, coefficients, theta0, H: float, R: int, rows: int):
    """The task's plan with `coefficients` (from its rails at rest) in interval form: plan `k`
    its tail from `tₖ = kH` (`mpc.warm_start`), rows `< rows` (`policies.active_rows`)."""
    plan = task_plan(problem, coefficients, theta0)

    def interval(plan, _):
        return warm_start(plan, None, H), plan.coefficients[:rows]

    _, C = jax.lax.scan(interval, plan, None, length=R)
    return C


def _run(problem, m, maps, scenario, at, target, theta0, C):
    """The plant's run under the sequence `C (R, rows, n)` from the rails at rest at `theta0`:
    `(e, ok)`, `e = x(T)[:2] − x*`."""
    zero = jnp.zeros_like(problem.control.coefficients)

    def interval(carry, kc):
        k, c = kc
        state, theta, theta_dot, ok = carry
        c = zero.at[: c.shape[0]].set(c)
        state, _, ok_k, theta, theta_dot, _ = drive_interval(
            problem, maps, m, scenario, at, k, state, theta, theta_dot, c
        )
        return (state, theta, theta_dot, ok & ok_k), None

    R = C.shape[0]
    carry = (problem.state0, theta0, jnp.zeros_like(theta0), jnp.asarray(True))
    (state, *_, ok), _ = jax.lax.scan(interval, carry, (jnp.arange(R, dtype=jnp.int32), C))
    return state.x[:2] - target, ok


def _effort(maps, C):
    """`Σₖ cₖᵀ G cₖ` (the rows past `rows` are zero: `G`'s leading block)."""
    rows = C.shape[1]
    G = maps.gram[:rows, :rows]
    return jnp.sum(C * jnp.einsum("ij,kjn->kin", G, C))


def _least_effort(problem, settings, m, maps, scenario, at, target, theta0, C, free, r):
    """(H1) over the intervals where `free (R,)` (the others kept as in `C`), on `scenario`'s
    plant, from `C`: `(C, zero)`, `zero` where the free intervals at rest already end within
    `r > 0` (the effort, convex in them, is then least there)."""
    free = free[:, None, None]
    shape, dtype = C.shape, C.dtype

    def sequence(x):
        return jnp.where(free, jnp.reshape(x, shape), C)

    def e(x):
        return _run(problem, m, maps, scenario, at, target, theta0, sequence(x))[0]

    def effort(x):
        return _effort(maps, sequence(x))

    # |e|² = r² has no gradient where e = 0 (the nominal plan on an undisturbed plant):
    # first e = r·d, d towards where the free intervals at rest end (for r = 0 the answer),
    # then |e|² = r² from there
    rest = jnp.zeros((C.size,), dtype)
    e0, ok0 = _run(problem, m, maps, scenario, at, target, theta0, sequence(rest))
    moved = jnp.any(e0 != 0)
    d = jnp.where(
        moved, e0 / jnp.where(moved, jnp.linalg.norm(e0), 1.0), jnp.eye(2, dtype=dtype)[0]
    )
    on = solve(effort, lambda x: e(x) - r * d, jnp.ravel(C), jnp.zeros((2,), dtype), settings)
    ring = lambda x: jnp.sum(e(x) ** 2, keepdims=True) - r**2  # noqa: E731
    # `r` is one for every rollout (not batched): the second solve runs only where r > 0
    x = jax.lax.cond(
        r > 0, lambda: solve(effort, ring, on.x, jnp.zeros((1,), dtype), settings).x, lambda: on.x
    )
    zero = (r > 0) & ok0 & (jnp.linalg.norm(e0) <= r)
    return sequence(jnp.where(zero, rest, x)), zero


def _outcome(problem, m, maps, scenario, at, target, theta0, C):
    """`(C, effort, miss)` of the sequence `C` on the plant (miss NaN where a step failed)."""
    e, ok = _run(problem, m, maps, scenario, at, target, theta0, C)
    return C, _effort(maps, C), jnp.where(ok, jnp.linalg.norm(e), jnp.nan)


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
    dtype = problem.control.coefficients.dtype
    # one re-plan from the start, every kick seen and the plant known: (H1)
    k = scenarios.kicks.shape[1]
    stages = (jnp.zeros((1,), jnp.int32), jnp.ones((1, k), dtype), jnp.ones((1,), bool))
    return Hindsight(*call_filtered(_program, *args, stages, jnp.asarray(r, dtype)))


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
# The informed re-planner: the plant known, the kicks seen when they have happened.


class Informed(NamedTuple):
    """Per rollout (leading axis `B`): `coefficients (B, R, rows, n)` the sequence the
    informed re-planner drove; `effort (B,)` its `Σₖ cₖᵀ G cₖ`; `miss (B,)` `|x(T)[:2] − x*|`
    of the plant's run under it (NaN where a plant step failed)."""

    coefficients: jax.Array
    effort: jax.Array
    miss: jax.Array


def replan_intervals(at, m: int, R: int) -> list[int]:
    """The intervals at whose start a causal law has seen a new kick: a kick added before
    step `a` is in the state observed at the start of interval `k` when `a < k·m`, so from
    interval `⌊a/m⌋ + 1` (those past the horizon dropped); `at (K, k)` the same for every
    rollout (`ValueError` otherwise)."""
    at = jnp.asarray(at)
    if not bool(jnp.all(at == at[:1])):
        raise ValueError("the informed re-planner needs the same kick times in every scenario")
    return sorted({int(a) // m + 1 for a in at[0] if int(a) // m + 1 < R})


def _stages_one(
    problem, settings, m, R, rows, maps, scenario, at, target, theta0, c, stages, r
):  # fmt: skip
    """One rollout: from its task's nominal sequence, each stage `(start, seen, plant)` in
    turn re-plans the intervals from `start` (`_least_effort`); `(C, effort, miss, zero)` of
    the sequence driven, `zero` the last stage's."""

    def stage(C, st):
        """One re-plan: the intervals from `start` re-optimised with the kicks `seen` so far,
        on the plant where `plant` (on the model where not), to within `r` of `x*`."""
        start, seen, plant = st
        known = Scenarios(
            jnp.where(plant, scenario.mass_scale, 1.0),
            jnp.where(plant, scenario.inertia_scale, 1.0),
            scenario.kicks * seen[:, None],
            scenario.kick_times,
        )
        free = jnp.arange(R) >= start
        return _least_effort(problem, settings, m, maps, known, at, target, theta0, C, free, r)

    C0 = nominal_sequence(problem, c, theta0, m * problem.dt, R, rows)
    C, zero = jax.lax.scan(stage, C0, stages)
    return *_outcome(problem, m, maps, scenario, at, target, theta0, C), zero[-1]


@xla_options.filter_jit
def _program(problem, settings, m, R, rows, maps, scenarios, at, tasks, c, stages, r):
    """Every rollout's re-plans `stages` (`_stages_one`), one program under `vmap`."""

    def one(s, a, x, th, c):
        return _stages_one(problem, settings, m, R, rows, maps, s, a, x, th, c, stages, r)

    with reported_in_outcome():
        return jax.vmap(one)(scenarios, at, tasks.target, tasks.theta0, c)


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
    remaining intervals likewise with the kicks seen so far (SQP from its current plan, the
    earlier intervals kept as driven). Arguments as `hindsight_optima`'s. With `identified_at
    > 0` it stands for a law that identifies the plant from what it observed before (the
    deterministic plant's parameters are in its state); one that knew the future kicks is
    (H1)."""
    r = _radius(tolerance)
    args = _checked(problem, tasks, coefficients, scenarios, settings, interval)
    m, R, at = args[2], args[3], args[7]
    if not (is_integer(identified_at) and 0 <= identified_at < R):
        raise ValueError(f"identified_at must be an interval in [0, {R}), got {identified_at!r}")
    starts = sorted({0, int(identified_at), *replan_intervals(at, m, R)})
    observed = [int(a) // m + 1 for a in jnp.asarray(at)[0]]
    seen = [[float(k <= start) for k in observed] for start in starts]
    dtype = problem.control.coefficients.dtype
    plant = [start >= identified_at for start in starts]
    stages = (jnp.asarray(starts, jnp.int32), jnp.asarray(seen, dtype), jnp.asarray(plant))
    return Informed(*call_filtered(_program, *args, stages, jnp.asarray(r, dtype))[:3])
