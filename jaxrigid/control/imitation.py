"""Policies learnt from MPC: the receding-horizon re-plan as the expert (imitation, DAgger).

Training a policy from scratch by gradients through the closed loop (`training`) reached a
median miss of 0.2 on `reach-region` and 3000× the open-loop optimum's effort. The expert that
gradient descent was groping for is already here: MPC's re-plan (`mpc.replan_one`, SQP) from
the measured state is, interval by interval, the least-effort plan that reaches the target
on the model. So a policy can be fitted to it by regression, without a simulation gradient:

    label(o) = re-plan(o)[:rows],     min_π  E_o |π(o) − label(o)|²_W                     (I1)

(`rows`: the coefficients with a basis function nonzero on the interval,
`policies.active_rows`; `W` a fixed diagonal weight, one over the labels' root mean square per
output). A rollout (`expert_rollout`) runs the closed loop of `closed_loop` on disturbed
plants; at the start `tₖ` of every interval the expert re-plans the remaining horizon on the
model from the plant's state and the rails' `θₖ`, `θ̇ₖ`, warm-started from its previous plan
shifted by `H` (`mpc.warm_start`, `θₖ`, `θ̇ₖ` put to the rails' actual ones) and at `t₀` from
the task's open-loop optimum; the interval is then driven by the expert's plan or by the policy
(`expert_drives`, per rollout). The states the policy meets are then labelled too (DAgger:
Ross, Gordon & Bagnell, AISTATS 2011, Algorithm 3.1, with `β = 1` in round 0 and `0` after):

    round 0: the expert drives;  round j ≥ 1: π_{j−1} drives;  π_j fits (I1) on all rounds' data.

**Tolerance.** MPC re-plans to reach `x*` exactly, and under σ = 0.05 its last intervals'
corrections cost most of its effort (the model's masses are not the plant's: the miss the
model predicts grows back between re-plans). A policy is judged by `miss ≤ 0.05`, so the
expert may aim at a disc of radius `r` around the target: at `tₖ` it runs its held plan on
the model from the measured state; if the predicted `x(T)` is within `r` it keeps the plan,
otherwise it re-plans to the disc's nearest point,

    x*ₖ = x* + r (x̂(T) − x*)/|x̂(T) − x*|,     x̂(T) the held plan's prediction          (I2)

(`r = 0`: MPC's re-plan exactly). `last_replan` stops re-planning after an interval. With
`r > 0` a label depends on the held plan, not on the observation alone: a history a policy
does not see (bench/README.md, "reach_region_imitation.py", measures what each costs and
what a regression on the labels achieved).

`fit` minimises (I1) by `optax.adam` over random mini-batches, every step of a call in one
program (`lax.scan`). `expert_rollout` is one program: a `lax.scan` over the intervals whose
body is one re-plan, one interval of the plant and the policy, `vmap`ped over the rollouts.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from .. import xla_options
from .._carry import tied
from .._input_checks import reported_in_outcome
from ..program_store import call_filtered
from .closed_loop import (
    Tasks,
    check_policy_problem,
    drive_interval,
    interval_maps,
    interval_sizes,
)  # fmt: skip
from .mpc import DEFAULT_REPLAN_SETTINGS, Multipliers, predicted_offset, replan_one, warm_start
from .policies import Observation, active_rows
from .region import task_plan
from .scenarios import Scenarios, kick_steps, target_of
from .sqp import SQP

__all__ = ["ExpertRun", "FitSettings", "expert_rollout", "fit", "flatten", "label_weights"]


class ExpertRun(NamedTuple):
    """Per rollout (leading axis `B`): `observations` (an `Observation` of `(B, R, ...)`
    arrays, what the policy saw at each interval's start), `labels (B, R, rows, n)` the
    expert's coefficients there (I1), `predicted_miss (B, R)` the model's predicted miss of
    the expert's plan: from the point it aimed at where it re-planned (the target itself at
    tolerance 0), from the target where it kept its plan,
    and the rollout's `miss (B,)` (NaN where not `ok`), `effort (B,)`, `ok (B,)` (C1)."""

    observations: Observation
    labels: jax.Array
    predicted_miss: jax.Array
    miss: jax.Array
    effort: jax.Array
    ok: jax.Array


def _expert_one(
    problem, settings, policy, m, R, maps, scenario, at, target, theta0, c0, drives, last, tol
):
    """One rollout, unbatched: `c0` the task's open-loop optimum (plan 0's warm start)."""
    H = m * problem.dt
    problem = eqx.tree_at(lambda p: p.constraints[0].target, problem, target)
    dtype = problem.control.coefficients.dtype
    theta0 = jnp.asarray(theta0, dtype)
    first = task_plan(problem, c0, theta0)
    rows = active_rows(first, H)
    horizon = R * H
    zero_mu, one = jnp.zeros((0,), dtype), jnp.ones((), dtype)

    def interval(carry, k):
        state, theta, theta_dot, expert, lam, effort, ok = carry
        obs = Observation(
            state.x[:2], state.Omega, state.q, theta, theta_dot, target, horizon - k * H, k
        )
        # the expert's previous plan shifted by H (plan 0: the optimum), from the actual rails
        shifted = warm_start(expert, None, H)
        shifted = jax.tree_util.tree_map(lambda a, b: jnp.where(k == 0, a, b), first, shifted)
        shifted = eqx.tree_at(lambda p: (p.theta0, p.theta_dot0), shifted, (theta, theta_dot))
        remaining = problem.n_steps - k * m
        # (I2): the held plan's miss on the model; outside the tolerance disc, re-plan to its
        # nearest point (the target itself at tol = 0)
        offset = predicted_offset(problem, shifted, state, remaining)
        distance = jnp.linalg.norm(offset)
        aim = target + offset * (tol / jnp.where(distance > 0, distance, 1.0))
        aimed = eqx.tree_at(lambda p: p.constraints[0].target, problem, aim)
        replanned, found, _, predicted, _ = replan_one(
            aimed, settings, shifted, state, Multipliers(lam, zero_mu, one), remaining
        )
        # past the last re-plan, or within the tolerance, the expert holds the shifted plan
        now = (k <= last) & (distance > tol)
        expert = jax.tree_util.tree_map(lambda a, b: jnp.where(now, a, b), replanned, shifted)
        lam = jnp.where(now, found.lam, lam)
        predicted = jnp.where(now, predicted, distance)
        label = expert.coefficients[:rows]
        c_rows = jnp.where(drives, label, policy(obs).astype(dtype))
        c = jnp.zeros_like(expert.coefficients).at[:rows].set(c_rows)
        state, _, ok_k, theta, theta_dot, e = drive_interval(
            problem, maps, m, scenario, at, k, state, theta, theta_dot, c
        )
        effort = effort + e
        carry = (state, theta, theta_dot, expert, lam, effort, ok & ok_k)
        return carry, (obs, label, predicted)

    lam0 = jnp.zeros((2,), dtype)
    carry = (problem.state0, theta0, jnp.zeros_like(theta0), first, lam0, jnp.zeros((), dtype))
    carry = tied(carry + (jnp.asarray(True),), (scenario, at, target))
    (state, *_, effort, ok), (obs, labels, predicted) = jax.lax.scan(
        interval, carry, jnp.arange(R, dtype=jnp.int32)
    )
    miss = jnp.where(ok, jnp.linalg.norm(state.x[:2] - target), jnp.nan)
    return obs, labels, predicted, miss, effort, ok


@xla_options.filter_jit
def _expert_program(
    problem, settings, policy, m, R, maps, scenarios, at, tasks, c0, drives, last, tol
):
    def one(s, a, x, th, c, d, r):
        return _expert_one(problem, settings, policy, m, R, maps, s, a, x, th, c, d, last, r)

    with reported_in_outcome():
        return jax.vmap(one)(scenarios, at, tasks.target, tasks.theta0, c0, drives, tol)


def expert_rollout(
    problem, policy, scenarios: Scenarios, tasks: Tasks, optima, expert_drives,
    settings: SQP = DEFAULT_REPLAN_SETTINGS, interval=None, last_replan=None, tolerance=0.0,
) -> ExpertRun:  # fmt: skip
    """Closed-loop rollouts of every scenario with its task (leading axes `B`) labelled by the
    expert (I1): `optima (B, M, n)` each task's open-loop optimum (`region.open_loop_optima`'s
    coefficients), `expert_drives (B,)` bool: the interval driven by the expert's plan (MPC
    itself) or by `policy`; `settings` each re-plan's SQP budget; `interval` `H`;
    `last_replan` the last interval `k` whose start re-plans (default all), `tolerance (B,)`
    (or one for all) the expert's (I2) (0: MPC's exact re-plans)."""
    check_policy_problem(problem)
    target_of(problem)  # a final-position constraint alone (ValueError otherwise)
    if not isinstance(settings, SQP):
        raise TypeError(f"settings must be control.sqp.SQP, got {type(settings).__name__}")
    m, R = interval_sizes(problem, interval, None)
    dtype = problem.control.coefficients.dtype
    B = scenarios.count
    optima = jnp.asarray(optima, dtype)
    drives = jnp.broadcast_to(jnp.asarray(expert_drives, bool), (B,))
    shape = (B,) + problem.control.coefficients.shape
    if tasks.target.shape != (B, 2) or optima.shape != shape:
        raise ValueError(
            f"tasks and optima must have one row per scenario ({B}): targets (B, 2) and optima "
            f"{shape}, got {tasks.target.shape} and {optima.shape}"
        )
    at = kick_steps(scenarios, problem.dt)
    maps = interval_maps(problem, m * problem.dt)
    last = jnp.asarray(R - 1 if last_replan is None else last_replan, jnp.int32)
    tol = jnp.broadcast_to(jnp.asarray(tolerance, dtype), (B,))
    if not bool(jnp.all(tol >= 0)):
        raise ValueError(f"tolerance must be ≥ 0 (a distance to the target), got {tolerance!r}")
    args = (problem, settings, policy, m, R, maps, scenarios, at, tasks, optima, drives, last, tol)
    return ExpertRun(*call_filtered(_expert_program, *args))


class FitSettings(NamedTuple):
    """(I1)'s regression: `steps` of `optax.adam(learning_rate)` (cosine-decayed to zero) on
    mini-batches of `batch` pairs drawn with replacement from `seed`'s stream."""

    steps: int = 4000
    batch: int = 256
    learning_rate: float = 3e-3
    seed: int = 0


def label_weights(labels):
    """(I1)'s `W`: one over each output's root mean square over the data `(N, rows, n)`, so
    that every coefficient counts alike (a late interval's labels are larger)."""
    rms = jnp.sqrt(jnp.mean(labels * labels, axis=0))
    return 1.0 / jnp.maximum(rms, 1e-12 * jnp.max(rms))


def _pair_loss(policy, observations, labels, weights):
    predicted = jax.vmap(policy)(observations).astype(labels.dtype)
    return jnp.mean(((predicted - labels) * weights[None]) ** 2)


@eqx.filter_jit
def _fit_program(policy, observations, labels, weights, settings: FitSettings):
    schedule = optax.cosine_decay_schedule(settings.learning_rate, settings.steps)
    opt = optax.adam(schedule)
    params, static = eqx.partition(policy, eqx.is_inexact_array)
    N = labels.shape[0]
    keys = jax.random.split(jax.random.key(settings.seed), settings.steps)

    def step(carry, key):
        params, state = carry
        idx = jax.random.randint(key, (settings.batch,), 0, N)
        batch = jax.tree_util.tree_map(lambda a: a[idx], observations)

        def loss(p):
            return _pair_loss(eqx.combine(p, static), batch, labels[idx], weights)

        value, grads = jax.value_and_grad(loss)(params)
        updates, state = opt.update(grads, state, params)
        return (optax.apply_updates(params, updates), state), value

    (params, _), losses = jax.lax.scan(step, (params, opt.init(params)), keys)
    policy = eqx.combine(params, static)
    return policy, losses, _pair_loss(policy, observations, labels, weights)


def fit(policy, observations: Observation, labels, weights=None, settings=FitSettings()):
    """(I1) on pairs with a leading axis `N` (`ExpertRun`'s `(B, R, ...)` flattened): returns
    `(policy, losses (steps,), final)`, the mini-batches' losses and the loss on all pairs
    after the last step. `weights` default `label_weights(labels)`."""
    if labels.ndim != 3 or observations.x.shape[0] != labels.shape[0]:
        raise ValueError(
            "observations and labels must be pairs with one leading axis N: labels (N, rows, n),"
            f" got labels {labels.shape} and observations {observations.x.shape[:-1]}"
        )
    weights = label_weights(labels) if weights is None else weights
    return _fit_program(policy, observations, labels, weights, settings)


def flatten(run: ExpertRun, keep=None):
    """`ExpertRun`'s pairs with the rollouts' and intervals' axes merged, `(B·R, ...)`; `keep
    (B,)` selects rollouts (default: those that were `ok`)."""
    keep = run.ok if keep is None else keep
    take = lambda a: a[keep].reshape((-1,) + a.shape[2:])  # noqa: E731
    return jax.tree_util.tree_map(take, run.observations), take(run.labels)
