"""`reach-region`: a family of reaching tasks for feedback policies.

From rest at the origin (the two-circles ball, prescribed rails, `presets.two_circles_start`),
reach any target in the disc of radius `ρ = 2` around the start by `T = 5`, the rails starting
at rest at random phases. A task is drawn as

    x* = ρ √u (cos φ, sin φ),   u ~ U[0, 1],  φ ~ U[0, 2π)   (uniform on the disc:          (R1)
                                                               |x*|²/ρ² ~ U[0, 1]),
    θᵢ(0) = −π/2 + α (2vᵢ − 1),  vᵢ ~ U[0, 1]                  (α = π: any phase)

Tasks come from named seed streams: `sample_tasks(seed, count, split, step)` folds the split's
tag (`"train"` or `"heldout"`) and then the step into the seed's key, so the held-out targets
are a stream of their own that training never draws from (training draws `split="train"`
with its step numbers; evaluation `split="heldout"`).

`reach_region(...)` is the family's `ControlProblem`: reach-point's model, integrator and
step with a B-spline whose knot spacing divides the control interval (`mpc.basis_size`); its
target (the origin) is a placeholder, each rollout's target is its task's.

`open_loop_optima(problem, tasks)` is each task's open-loop optimum on the model (what a
policy's effort is compared with, and whether a target is within reach at all): least effort
`∫₀ᵀ Σᵢ θ̈ᵢ² dt` subject to `x(T)[:2] = x*` from the task's rails: MPC's re-plan
(`mpc.replan_one`, SQP) over the whole horizon from rest (zero coefficients), with the task's
target, every task in one program under `vmap`. A task whose optimum's miss stays above a
tolerance was not reached in the budget; that alone does not show it out of reach.
`replay_optima` runs each task's optimum unchanged on its own disturbed plant (the open loop a
policy is compared with).
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import xla_options
from .._checks import is_integer
from .._input_checks import reported_in_outcome
from ..program_store import call_filtered
from .closed_loop import Tasks, check_policy_problem
from .costs import FinalPosition
from .mpc import Multipliers, basis_size, replan_one
from .presets import reach_point
from .scenarios import Scenarios, kick_steps, replay_one, target_of
from .sqp import SQP

__all__ = [
    "HORIZON",
    "OPEN_LOOP_SETTINGS",
    "RADIUS",
    "SPLITS",
    "OpenLoopOptima",
    "open_loop_optima",
    "replay_optima",
    "reach_region",
    "sample_tasks",
    "task_plan",
]

RADIUS = 2.0
"""`ρ`: the targets' disc radius around the start."""
HORIZON = 5.0
"""`T`."""
SPLITS = {"train": 0, "heldout": 1}
"""The seed streams' tags (folded into the seed's key)."""
INTERVAL = 0.5
"""The default control interval `H = T/10`."""


def reach_region(
    dt: float | None = None, integrator=None, dtype=None, interval: float = INTERVAL, n_basis=8
):
    """The family's `ControlProblem` (named `"reach-region"`): reach-point's ball, integrator
    (RKMK4 default) and step (`dt` default 0.05), `T = 5`, a quintic B-spline with at least
    `n_basis` knot intervals whose spacing divides `interval`."""
    n = basis_size(HORIZON, interval, n_basis)
    problem = reach_point(dt=dt, n_basis=n, integrator=integrator, dtype=dtype, target=(0.0, 0.0))
    target = jnp.zeros((2,), problem.model.inertia.dtype)
    return dataclasses.replace(
        problem,
        name="reach-region",
        constraints=(FinalPosition(target),),
        description=f"T = 5: reach any target within {RADIUS:g} of the start, rails at random "
        "phases at rest",
    )


def sample_tasks(
    seed, count: int, split: str = "train", step: int = 0, n_masses: int = 2, spread=math.pi,
    dtype=None,
) -> Tasks:  # fmt: skip
    """`count` tasks (R1) from the stream `(seed, split, step)`: targets uniform on the disc of
    radius `RADIUS`, rail phases `−π/2 + spread·U(−1, 1)` per mass (`spread = π`: uniform on
    the circle). The same arguments give the same tasks."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if not is_integer(count) or isinstance(count, bool) or count < 1:
        raise ValueError(f"count (the number of tasks) must be a positive integer, got {count!r}")
    if not (is_integer(seed) and seed >= 0):
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    dtype = jnp.result_type(float) if dtype is None else dtype
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(int(seed)), SPLITS[split]), step)
    k_r, k_phi, k_theta = jax.random.split(key, 3)
    u = jax.random.uniform(k_r, (count,), dtype)
    phi = jax.random.uniform(k_phi, (count,), dtype, 0.0, 2 * math.pi)
    r = RADIUS * jnp.sqrt(u)
    target = jnp.stack([r * jnp.cos(phi), r * jnp.sin(phi)], axis=-1)
    v = jax.random.uniform(k_theta, (count, n_masses), dtype, -1.0, 1.0)
    return Tasks(target, -math.pi / 2 + spread * v)


OPEN_LOOP_SETTINGS = SQP(n_iterations=40)
"""The per-task optimum's budget (`open_loop_optima`): 40 SQP iterations from rest. At
`dt = 0.05`, 989 of 1000 held-out targets reached a miss below 1e-8 within them (median 10);
the other 11 needed 41–141 (`bench/reach_region_open_loop.py --targets 1000`, bench/README)."""


class OpenLoopOptima(NamedTuple):
    """Per task (leading axis `B`): `coefficients (B, M, n)` the plan found; `effort (B,)` its
    `∫₀ᵀ Σᵢ θ̈ᵢ² dt`; `miss (B,)` `|x(T)[:2] − x*|` of its run on the model; `multipliers
    (B, 2)` the constraint's `λ`; `miss_by_iteration (B, N)` `|x(T)[:2] − x*|` after each SQP
    iteration."""

    coefficients: jax.Array
    effort: jax.Array
    miss: jax.Array
    multipliers: jax.Array
    miss_by_iteration: jax.Array


def _optimum(problem, settings: SQP, target, theta0):
    """One task's SQP from rest: the plan (P1) from `θ(0) = theta0`, `θ̇(0) = 0`, zero
    coefficients, re-planned over the whole horizon from the initial state."""
    problem = eqx.tree_at(lambda p: p.constraints[0].target, problem, target)
    zero = jnp.zeros_like(problem.control.coefficients)
    plan = task_plan(problem, zero, theta0)
    start = Multipliers(
        jnp.zeros((2,), zero.dtype), jnp.zeros((0,), zero.dtype), jnp.ones((), zero.dtype)
    )
    steps = jnp.asarray(problem.n_steps, jnp.int32)
    plan, found, effort, miss, history = replan_one(
        problem, settings, plan, problem.state0, start, steps
    )
    return plan.coefficients, effort, miss, found.lam, history


@xla_options.filter_jit
def _optima_program(problem, settings, targets, theta0s):
    one = lambda x, th: _optimum(problem, settings, x, th)  # noqa: E731
    with reported_in_outcome():
        return jax.vmap(one)(targets, theta0s)


def open_loop_optima(problem, tasks: Tasks, settings: SQP = OPEN_LOOP_SETTINGS) -> OpenLoopOptima:
    """Each task's open-loop optimum on `problem`'s model (`reach_region()`'s, any step and
    integrator): least effort subject to reaching its target, by `settings.n_iterations` SQP
    iterations from rest, all tasks in one program. The tasks' `miss` says which were
    reached (the constraint holds to rounding after a few iterations where it converges)."""
    check_policy_problem(problem)
    target_of(problem)  # a final-position constraint alone (ValueError otherwise)
    if not isinstance(settings, SQP):
        raise TypeError(f"settings must be control.sqp.SQP, got {type(settings).__name__}")
    dtype = problem.control.coefficients.dtype
    targets = jnp.asarray(tasks.target, dtype)
    theta0s = jnp.asarray(tasks.theta0, dtype)
    if targets.ndim != 2 or targets.shape[1] != 2 or theta0s.shape != (
        targets.shape[0], problem.model.n_masses,
    ):  # fmt: skip
        raise ValueError(
            f"tasks must be targets (B, 2) and theta0 (B, {problem.model.n_masses}), got "
            f"{targets.shape} and {theta0s.shape}"
        )
    return OpenLoopOptima(*call_filtered(_optima_program, problem, settings, targets, theta0s))


def task_plan(problem, coefficients, theta0):
    """The problem's plan (P1) with `coefficients` from the task's rails at rest."""
    theta0 = jnp.asarray(theta0, coefficients.dtype)
    return eqx.tree_at(
        lambda p: (p.coefficients, p.theta0, p.theta_dot0),
        problem.control,
        (coefficients, theta0, jnp.zeros_like(theta0)),
    )


def _replay_one(problem, coefficients, theta0, target, scenario: Scenarios, at):
    model = eqx.tree_at(problem.slot.get, problem.model, task_plan(problem, coefficients, theta0))
    return replay_one(problem, model, target, scenario, at)[0]


@xla_options.filter_jit
def _replay_program(problem, coefficients, targets, theta0s, scenarios, at):
    one = lambda c, th, x, s, a: _replay_one(problem, c, th, x, s, a)  # noqa: E731
    with reported_in_outcome():
        return jax.vmap(one)(coefficients, theta0s, targets, scenarios, at)


def replay_optima(problem, tasks: Tasks, coefficients, scenarios: Scenarios):
    """Each task's open-loop plan (`coefficients (B, M, n)`, `open_loop_optima`'s) run
    unchanged on its own disturbed plant (`scenarios`, one per task, kicks included), as
    `scenarios.replay` runs one plan on many: the miss `|x(T)[:2] − x*|` per task `(B,)`, NaN
    where a plant step failed."""
    dtype = problem.control.coefficients.dtype
    coefficients = jnp.asarray(coefficients, dtype)
    B = coefficients.shape[0]
    if tasks.target.shape[0] != B or scenarios.count != B:
        raise ValueError(
            f"tasks, coefficients and scenarios must be one per task: {tasks.target.shape[0]}, "
            f"{B} and {scenarios.count}"
        )
    at = kick_steps(scenarios, problem.dt)
    targets, theta0s = jnp.asarray(tasks.target, dtype), jnp.asarray(tasks.theta0, dtype)
    return call_filtered(_replay_program, problem, coefficients, targets, theta0s, scenarios, at)
