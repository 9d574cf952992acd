"""Receding-horizon control (MPC) of the rolling ball against disturbed plants (`scenarios`).

Every `H` (`replan_every`, default `T/10`; a whole number of steps, dividing `T`) the
controller measures the plant's state at `tₖ = kH` and re-optimises the remaining control on
`[tₖ, T]` with the model: least effort `∫_{tₖ}^T Σᵢ θ̈ᵢ² dt` (or `∫Σuᵢ²` for dynamic masses)
subject to `x(T)[:2] = x*`, by a fixed budget of SQP iterations (`control.sqp`: the effort is
quadratic in the coefficients and the constraint has two rows), or by the augmented
Lagrangian of `optimise` where `settings` asks for it. The plant then runs the new plan with
the problem's integrator and step until `tₖ₊₁` (`scenarios.advance`).

**Plans in local time.** Plan `k` is the problem's B-spline parametrisation in the local time
`s = t − tₖ` on a fixed horizon `[0, T]` (only `[0, T − tₖ]` is used):

    θ(s) = θₖ + θ̇ₖ s + φ(s)ᵀcₖ     (prescribed, (P1)),     u(s) = ψ(s)ᵀcₖ     (dynamic, (P2))

with `θₖ`, `θ̇ₖ` the masses' position and speed at `tₖ` (the previous plan's, prescribed;
measured, dynamic), so the rails stay C¹ across a re-plan. Every plan has the same shape and
the remaining horizon enters as a traced count of steps: the model's scan has the whole
horizon's `T/dt` steps, of which the first `(T − tₖ)/dt` are taken (`scenarios.advance`'s
`upto`) and `x(T)` read after them, the effort's quadrature nodes past `T − tₖ` masked (a
cold start at `t₀ = 0` is the open-loop problem itself). So one program re-plans at every
`tₖ`, one program advances the plant, and all scenarios run in them under `vmap`.

**Warm start.** The previous plan's tail, `θ_{k−1}(s + H)`, projected on plan `k`'s basis by
least squares, with the previous multipliers `λ` and penalty `ρ`. The knot spacing divides
`H` (`basis_size`), so the tail is exactly a spline on plan `k`'s knots (whose first two
control points `(θₖ, θ̇ₖ)` fix) and the projection reproduces it to rounding: with no
disturbance the first re-plan starts at the open-loop optimum itself. A cold start is zero
coefficients (`θₖ + θ̇ₖ s`, or `u = 0`) with `λ = 0`, `ρ = ρ₀`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import xla_options
from .._carry import tied
from .._input_checks import reported_in_outcome
from ..program_store import call_filtered
from ..runs.planning import whole_steps
from .bases import gauss_legendre_intervals
from .optimise import AugmentedLagrangian, outer_iteration
from .parametrisations import AbstractParametrisedControl, BSplineActuation, BSplineControl
from .scenarios import Scenarios, advance, kick_steps, plant, target_of
from .sqp import SQP, solve

__all__ = [
    "DEFAULT_REPLAN_SETTINGS",
    "MPCResult",
    "Multipliers",
    "basis_size",
    "cold_start",
    "partial_effort",
    "predicted_offset",
    "replan",
    "replan_iterations",
    "replan_one",
    "replan_steps",
    "restart",
    "run_mpc",
    "warm_start",
]

DEFAULT_REPLAN_SETTINGS = SQP(n_iterations=8)
"""Each re-plan's budget: 8 SQP iterations (`control.sqp`: one linearisation of the remaining
horizon's simulation each). `AugmentedLagrangian(n_outer=2, n_inner=20)` re-plans by the
augmented Lagrangian instead (the default before 2026-12-01)."""


def replan_iterations(settings=None) -> int:
    """The linearisations (SQP) or L-BFGS iterations (augmented Lagrangian) of one re-plan."""
    settings = DEFAULT_REPLAN_SETTINGS if settings is None else settings
    if isinstance(settings, SQP):
        return settings.n_iterations
    return settings.n_outer * settings.n_inner


class Multipliers(NamedTuple):
    """The optimiser's state besides the coefficients: `lam` (λ, the SQP's and the augmented
    Lagrangian's), `mu` (μ, the inequalities', `(0,)` here), `rho` (ρ, the augmented
    Lagrangian's)."""

    lam: jax.Array
    mu: jax.Array
    rho: jax.Array


def basis_size(t_end: float, replan_every: float, at_least: int) -> int:
    """The B-spline's knot intervals on `[0, T]` for MPC: the least multiple of `T/H` that is
    `≥ at_least`, so that the knot spacing divides `H` (the warm start is then exact)."""
    per = round(t_end / replan_every)
    return per * max(1, math.ceil(at_least / per))


def replan_steps(problem, replan_every=None) -> int:
    """`H` in steps of the problem's `dt` (default `H = T/10`); `ValueError` unless `H` is a
    whole number of steps dividing the horizon and the plan's knot spacing divides it."""
    H = problem.t_end / 10 if replan_every is None else float(replan_every)
    if not (math.isfinite(H) and 0 < H <= problem.t_end):
        raise ValueError(f"replan_every must be in (0, T = {problem.t_end:g}], got {H:g}")
    try:
        m = whole_steps(H, problem.dt)
    except ValueError:
        raise ValueError(f"replan_every = {H:g} is not a whole number of steps of {problem.dt:g}")
    if problem.n_steps % m:
        raise ValueError(f"replan_every = {H:g} does not divide T = {problem.t_end:g}")
    plan = problem.control
    if not isinstance(plan, (BSplineControl, BSplineActuation)) or plan.t_end != problem.t_end:
        raise ValueError("MPC needs a B-spline control on [0, T] (basis='bspline')")
    per = H / (plan.t_end / plan.n_intervals)
    if abs(per - round(per)) > 1e-9 * per:
        raise ValueError(
            f"replan_every = {H:g} must be a multiple of the knot spacing "
            f"{plan.t_end / plan.n_intervals:g} (n_basis = basis_size(T, H, n))"
        )
    return m


def _prescribed(plan) -> bool:
    return isinstance(plan, AbstractParametrisedControl)


def _rate(plan):
    """The effort's integrand `s -> (n,)`: `θ̈` (prescribed) or `u` (dynamic)."""
    return (lambda s: plan.derivatives(s)[2]) if _prescribed(plan) else plan


def partial_effort(plan, upto):
    """`∫₀^upto Σᵢ θ̈ᵢ² ds` (or `∫Σuᵢ²`) by the plan's quadrature with the nodes past `upto`
    dropped: exact when `upto` is a knot (its rule is Gauss–Legendre per knot interval)."""
    nodes, weights = plan.quadrature()
    dtype = plan.coefficients.dtype
    nodes, weights = jnp.asarray(nodes, dtype), jnp.asarray(weights, dtype)
    values = jax.vmap(_rate(plan))(nodes)
    weights = jnp.where(nodes < upto, weights, 0.0)
    return jnp.sum(weights * jnp.sum(values * values, axis=-1))


def warm_start(plan, state, shift):
    """Plan `k` from plan `k − 1` (both local, `shift = H` apart): `θₖ`, `θ̇ₖ` the old plan's at
    `H` (prescribed; dynamic plans have none) and coefficients the least-squares projection of
    the old tail on the basis, sampled at 4 Gauss–Legendre nodes per knot interval."""
    del state  # dynamic masses: θ, θ̇ are the measured state's, not the plan's
    edges = np.linspace(0.0, plan.t_end, plan.n_intervals + 1)
    nodes = jnp.asarray(gauss_legendre_intervals(edges, 4)[0], plan.coefficients.dtype)
    Phi = jax.vmap(plan._phi)(nodes)
    if _prescribed(plan):
        theta, theta_dot, _ = plan.derivatives(shift)
        tail = jax.vmap(plan)(nodes + shift) - theta[None] - theta_dot[None] * nodes[:, None]
        plan = eqx.tree_at(lambda p: (p.theta0, p.theta_dot0), plan, (theta, theta_dot))
    else:
        tail = jax.vmap(plan)(nodes + shift)
    c, *_ = jnp.linalg.lstsq(Phi, tail)
    return plan.with_coefficients(c)


def cold_start(plan, state, shift):
    """Plan `k` from scratch: zero coefficients from the same `θₖ`, `θ̇ₖ` as `warm_start`."""
    if _prescribed(plan):
        theta, theta_dot, _ = plan.derivatives(shift)
        plan = eqx.tree_at(lambda p: (p.theta0, p.theta_dot0), plan, (theta, theta_dot))
    return plan.with_coefficients(jnp.zeros_like(plan.coefficients))


class _Remaining(eqx.Module):
    """The re-plan's objective `p -> (f, c)`: the model from the measured `state` driven by
    `plan` with coefficients `p`, the first `remaining` of the problem's `n_steps` steps
    taken, `x(T)` after them; `f` the plan's effort on `[0, remaining·dt]`, `c = x(T)[:2] −
    x*` (`effort` and `miss` each alone)."""

    problem: Any
    plan: Any
    state: Any
    remaining: jax.Array

    def effort(self, p):
        """`f`, the plan's effort on `[0, remaining·dt]` (no simulation)."""
        return partial_effort(self.plan.with_coefficients(p), self.remaining * self.problem.dt)

    def miss(self, p):
        """`c = x(T)[:2] − x*`."""
        pb, plan = self.problem, self.plan.with_coefficients(p)
        model = eqx.tree_at(pb.slot.get, pb.model, plan)
        # the integrator's steps in a plain scan (as the plant's, `advance`), differentiated
        # by `lax.scan`'s own rule: a far smaller program to build than `simulate`'s, and the
        # short horizon's states are cheap to store for the reverse pass; the steps past
        # `remaining` not taken (`upto`), so that a plan diverging after the horizon's end
        # cannot make the gradient NaN
        end, _, _ = advance(
            pb.integrator, model, self.state, pb.dt, pb.n_steps, upto=self.remaining
        )
        return end.x[:2] - target_of(pb)

    def __call__(self, p):
        c = self.miss(p)  # first: the augmented Lagrangian's program keeps its operations' order
        return self.effort(p), c


def predicted_offset(problem, plan, state, remaining):
    """`x(T)[:2] − x*` of `plan` run on the model from `state` for the `remaining` steps (the
    re-plan's constraint at the plan's own coefficients)."""
    return _Remaining(problem, plan, state, remaining).miss(plan.coefficients)


def replan_one(problem, settings, plan, state, multipliers: Multipliers, remaining):
    """One scenario's re-plan, unbatched (`replan` maps it over the scenarios): `(plan,
    multipliers, effort, miss, miss_by_iteration)`, the last three the model's prediction on
    the remaining horizon (`miss` the norm). With `state` the problem's initial state and
    `remaining` its `n_steps`, from zero coefficients, it is the open-loop problem itself
    (`region.open_loop_optima`)."""
    if isinstance(settings, SQP):
        return _replan_sqp(problem, settings, plan, state, multipliers, remaining)
    objective = _Remaining(problem, plan, state, remaining)
    p0 = plan.coefficients
    # the first update keeps ρ (no previous infeasibility to compare with): no extra run
    vnorm0 = jnp.asarray(jnp.inf, p0.dtype)
    carry = tied((p0, multipliers.lam, multipliers.mu, multipliers.rho, vnorm0), (plan, state))
    outer = lambda carry, k: outer_iteration(objective, settings, None, carry, k)  # noqa: E731
    (p, lam, mu, rho, _), (_, _, fs, cnorms) = lax.scan(outer, carry, jnp.arange(settings.n_outer))
    return plan.with_coefficients(p), Multipliers(lam, mu, rho), fs[-1], cnorms[-1], cnorms


def _replan_sqp(problem, settings, plan, state, multipliers: Multipliers, remaining):
    objective = _Remaining(problem, plan, state, remaining)
    shape = plan.coefficients.shape

    def effort(x):
        return objective.effort(jnp.reshape(x, shape))

    def miss(x):
        return objective.miss(jnp.reshape(x, shape))

    r = solve(effort, miss, jnp.ravel(plan.coefficients), multipliers.lam, settings)
    plan = plan.with_coefficients(jnp.reshape(r.x, shape))
    miss_history = r.history["residual_norm"]
    return plan, multipliers._replace(lam=r.multipliers), r.cost, miss_history[-1], miss_history


@xla_options.filter_jit
def _replan_program(problem, settings, plans, states, multipliers, remaining):
    one = lambda pl, s, m: replan_one(problem, settings, pl, s, m, remaining)  # noqa: E731
    with reported_in_outcome():
        return jax.vmap(one)(plans, states, multipliers)


def replan(problem, plans, states, multipliers, remaining, settings=None):
    """Re-optimise every scenario's plan (leading axis `K`) from its measured state with the
    model, from the given coefficients and multipliers (`warm_start` or `cold_start`) within
    `settings`' budget (`DEFAULT_REPLAN_SETTINGS`), `remaining` steps left of the horizon
    (traced: one program for every re-plan). Returns `(plans, multipliers, effort, miss)`,
    the last two the model's prediction on the remaining horizon, `(K,)` each."""
    settings = DEFAULT_REPLAN_SETTINGS if settings is None else settings
    remaining = jnp.asarray(remaining, jnp.int32)
    args = (problem, settings, plans, states, multipliers, remaining)
    return call_filtered(_replan_program, *args)[:4]  # the program's fifth: the miss by iteration


@xla_options.filter_jit
def _start_program(plans, states, shift, warm: bool):
    start = warm_start if warm else cold_start
    return jax.vmap(lambda p, s: start(p, s, shift))(plans, states)


@xla_options.filter_jit
def _segment_program(problem, plans, states, scenarios, at, step0, m):
    def one(plan, state, s: Scenarios, at):
        model = plant(eqx.tree_at(problem.slot.get, problem.model, plan), s)
        state, xs, ok = advance(
            problem.integrator, model, state, problem.dt, m, step0=step0, kicks=s.kicks, at=at
        )
        return state, xs, partial_effort(plan, m * problem.dt), ok

    with reported_in_outcome():
        return jax.vmap(one)(plans, states, scenarios, at)


class MPCResult(NamedTuple):
    """`miss (K,)` `|x(T)[:2] − x*|` of the plant (NaN where a plant step failed); `effort
    (K,)` the executed control's (`∫₀ᵀ Σθ̈²` or `∫Σu²`); `final_x (K, 3)`; `path (K,
    n_steps + 1, 3)` the plant's `x` at every step; `predicted_miss (K, R − 1)` each
    re-plan's model miss; `replan_steps` (`m`, steps per re-plan); `plans` the last plans."""

    miss: jax.Array
    effort: jax.Array
    final_x: jax.Array
    path: jax.Array
    predicted_miss: jax.Array
    replan_steps: int
    plans: Any


def restart(multipliers: Multipliers, warm: bool, settings=None) -> Multipliers:
    """A re-plan's starting multipliers: warm, the previous plan's `λ`, `μ`, `ρ` (the
    augmented Lagrangian continued: with `ρ` reset to `ρ₀` the first re-plans of disturbed
    plants missed by as much as the open loop, a moderate `ρ` leaving a miss of order
    `Δλ/ρ`); cold, `λ = 0`, `μ = 0`, `ρ = ρ₀` (`settings.rho0`; the SQP reads only `λ`,
    and its `ρ` is kept)."""
    if warm:
        return multipliers
    settings = DEFAULT_REPLAN_SETTINGS if settings is None else settings
    rho = multipliers.rho
    if isinstance(settings, AugmentedLagrangian):
        rho = jnp.full_like(rho, settings.rho0)
    return Multipliers(jnp.zeros_like(multipliers.lam), jnp.zeros_like(multipliers.mu), rho)


def _batched(tree, K: int):
    return jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (K,) + jnp.shape(a)), tree)


def run_mpc(
    problem,
    coefficients,
    multipliers: Multipliers,
    scenarios: Scenarios,
    replan_every=None,
    settings: SQP | AugmentedLagrangian | None = None,
    warm: bool = True,
) -> MPCResult:
    """Receding-horizon control of every scenario: plan 0 is `coefficients` (the open-loop
    optimum, with its `multipliers`: `OptimiseResult.multipliers`, `.inequality_multipliers`,
    `.penalty`); every `replan_every` (`replan_steps`) a `warm_start` (or `cold_start`) with
    `restart`ed multipliers and a `replan`, then the plant advanced to the next re-plan
    (`scenarios.advance`, kicks included). Three programs (the start, the re-plan, the plant
    segment), each built once and reused at every re-plan."""
    m = replan_steps(problem, replan_every)
    R = problem.n_steps // m
    K = scenarios.count
    target = target_of(problem)
    at = kick_steps(scenarios, problem.dt)
    plans = _batched(problem.control.with_coefficients(coefficients), K)
    states = _batched(problem.state0, K)
    mult = _batched(Multipliers(*multipliers), K)
    effort = jnp.zeros((K,), plans.coefficients.dtype)
    ok = jnp.ones((K,), bool)
    path, predicted = [states.x[:, None]], []
    for k in range(R):
        if k > 0:
            plans = call_filtered(_start_program, plans, states, m * problem.dt, warm)
            remaining = problem.n_steps - k * m
            mult = restart(mult, warm, settings)
            plans, mult, _, c_norm = replan(problem, plans, states, mult, remaining, settings)
            predicted.append(c_norm)
        step0 = jnp.asarray(k * m, jnp.int32)
        states, xs, e, segment_ok = call_filtered(
            _segment_program, problem, plans, states, scenarios, at, step0, m
        )
        effort, ok = effort + e, ok & segment_ok
        path.append(xs)
    # a plant whose step failed has no miss to report (`advance`)
    miss = jnp.where(ok, jnp.linalg.norm(states.x[:, :2] - target[None], axis=-1), jnp.nan)
    predicted_miss = jnp.stack(predicted, axis=1) if predicted else jnp.zeros((K, 0))
    xs = jnp.concatenate(path, axis=1)
    return MPCResult(miss, effort, states.x, xs, predicted_miss, m, plans)
