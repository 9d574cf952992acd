"""Per-task feedback gains trained on the model's own disturbed scenarios (issue 35).

The neighbouring gains (`neighbouring`, (N1)) are the re-plan's sensitivity to the measured
state: exact for small deviations, and under σ = 0.05 too large a correction for about half
the targets (bench/README, `neighbouring_feedback.py`). `tune_feedback` keeps the policy's
form, (F2) around each task's open-loop optimum, and trains its gains by gradients through
closed-loop rollouts on scenarios drawn from the disturbance model (`scenarios`, (S1), (S2)):
at step `i`, for each of the `B` tasks `S` fresh scenarios of size `σ`, and

    L = (1/BS) Σ_{b,s} [ (max(miss_bs − d, 0) / s_m)² + w · effort_bs / max(E*_b, E_f) ]  (T1)

(`s_m` the miss scale, `d` the miss tolerance (0 by default: every miss counts), `w` the
effort weight, `E*_b` task `b`'s optimum effort: each task's effort counted relative to its
own, but never relative to less than the floor `E_f`),
minimised with `optax.adam` after a global-norm clip. A rollout whose plant failed under a
large correction counts as a miss of 1 and adds no gradient: its task trains on its other
rollouts (each rollout differentiated with its own copy of its task's arrays, so a failure's
NaN stays in its own row; a task skipping the whole step instead could stay where every
batch has a failing plant, and never train again). The floor is there for targets the
optimum reaches with almost no actuation: relative to their own optimum a disturbance's
correction costs tens of times it, and (T1) without the floor traded their success for
effort (bench/README, `neighbouring_feedback.py`, "The effort counted against a floor").
The nominal plan `c̄ₖ` and features `φ̄ₖ` stay the optimum's; the gains of every interval
train, the last one's too, and for a `policies.QuadraticFeedback` (F4) (`from_linear` of the
neighbouring law) its second-order term with them: the form that reaches the targets the
linear one, trained the same way, still misses (bench/README).

This is per-task design, done where the optimum is (for each target, before it is run): it
sees the target and the disturbance model, never the plant it is evaluated on (the
scenarios' key is the settings' `seed`'s own stream; evaluation draws its own). One program
per shapes `(B, S)`: one `jit` of the whole step, scenarios drawn inside it; `σ`, the
learning rate, the clip, `s_m`, `w` and `d` are its inputs (another value builds nothing).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._checks import real_number
from .closed_loop import (
    PerTask,
    Tasks,
    _batch,
    check_policy_problem,
    interval_maps,
    interval_sizes,
)
from .policies import LinearFeedback, PlantInformedFeedback, QuadraticFeedback
from .scenarios import PARTS, check_sigma, draw_scenarios, kick_steps, restricted

__all__ = ["TuneHistory", "TuneSettings", "tune_feedback"]

_STREAM = 3  # folded into the seed's key (training uses 2: a different stream)
_TRACED = ("sigma", "learning_rate", "clip", "miss_scale", "effort_weight", "miss_tolerance")
_POSITIVE = ("learning_rate", "clip", "miss_scale")  # of `_TRACED`: > 0 (the rest ≥ 0)


class TuneSettings(NamedTuple):
    """`steps`, `scenarios` (`S` per task and step), `sigma` (their `σ`), `learning_rate`,
    `clip` (global gradient norm), (T1)'s `miss_scale`, `effort_weight`, `effort_floor`
    (`E_f`, in the problem's effort units) and `miss_tolerance` (`d`, a miss within it costs
    nothing), `interval` (`H`, default `T/10`), `seed` (the
    scenarios' stream), `disturbances` (`scenarios.restricted`'s parts: `"all"`, or only the
    kicks or only the plant, to find which of them a law cannot correct)."""

    steps: int = 1000
    scenarios: int = 16
    sigma: float = 0.05
    learning_rate: float = 1e-2
    clip: float = 10.0
    miss_scale: float = 0.05
    effort_weight: float = 0.1
    effort_floor: float = 1.0
    miss_tolerance: float = 0.0
    interval: float | None = None
    seed: int = 0
    disturbances: str = "all"


class TuneHistory(NamedTuple):
    """Per step: `loss` (T1), `grad_norm` (before clipping, the dropped rollouts' left out),
    `success` (the batch's fraction with miss ≤ 0.05), `effort_ratio` (the batch's median
    effort over its task's (T1) scale, `max(E*, E_f)`), `skipped` (the fraction of rollouts
    whose plant failed: their gradient dropped)."""

    loss: np.ndarray
    grad_norm: np.ndarray
    success: np.ndarray
    effort_ratio: np.ndarray
    skipped: np.ndarray


def _repeated(policy: PerTask, S: int) -> PerTask:
    """Each task's policy `S` times in a row: rollout `b·S + s` runs task `b`'s."""
    return jax.tree_util.tree_map(lambda a: jnp.repeat(a, S, axis=0), policy)


def _trainable(policy: PerTask):
    """The arrays `tune_feedback` trains: the gains, (F4)'s second-order term, (F5)'s plant
    gains."""
    p = policy.policy
    if isinstance(p, PlantInformedFeedback):
        b = p.base
        return (b.gains, b.quad, p.plant_gains) if isinstance(b, QuadraticFeedback) else (
            b.gains, p.plant_gains)  # fmt: skip
    return (p.gains, p.quad) if isinstance(p, QuadraticFeedback) else (p.gains,)


def _told(policy: PerTask) -> PerTask:
    """A (F5) law trains told its scenarios' plant (`PlantInformedFeedback`'s `source`)."""
    p = policy.policy
    if isinstance(p, PlantInformedFeedback):
        return PerTask(dataclasses.replace(p, source="told"))
    return policy


def _loss(params, policy, problem, m, R, maps, scenarios, at, tasks, scale, settings):
    """(T1) of the `PerTask` `policy` with its trainable arrays `params` (one per task), on
    `S` rollouts per task: `(loss, (miss, effort ratio, plant alive))`."""
    copies, members = _per_rollout(params, policy, settings.scenarios)
    args = (problem, m, R, maps, scenarios, at, tasks, scale, settings)
    return _rollouts_loss(copies, members, *args)


def _per_rollout(params, policy: PerTask, S: int):
    """The trainable arrays and the policy, each task's `S` times in a row (`_repeated`)."""
    return tuple(jnp.repeat(p, S, axis=0) for p in params), _repeated(policy, S)


def _rollouts_loss(params, members, problem, m, R, maps, scenarios, at, tasks, scale, settings):
    """(T1) with one copy of the trainable arrays per rollout (`params`, `members`: `B·S`
    rows, rollout `b·S + s` task `b`'s): its gradient, row by row, is each rollout's own."""
    members = eqx.tree_at(_trainable, members, params)
    miss, effort, ok, *_ = _batch(problem, members, m, R, maps, scenarios, at, tasks)
    # a failed plant counts as a miss of 1 (its gradient is NaN: `_step` drops that rollout's)
    miss = jnp.where(ok, miss, 1.0)
    ratio = jnp.where(ok, effort, 0.0) / scale
    loss = jnp.mean(miss_cost(miss, settings)) + settings.effort_weight * jnp.mean(ratio)
    return loss, (miss, ratio, ok)


def miss_cost(miss, settings: TuneSettings):
    """(T1)'s miss term of each rollout: `(max(miss − d, 0) / s_m)²`."""
    return (jnp.maximum(miss - settings.miss_tolerance, 0.0) / settings.miss_scale) ** 2


def effort_scale(optimum_effort, effort_floor: float):
    """(T1)'s scale of each task's effort: `max(E*, E_f)`."""
    return jnp.maximum(optimum_effort, effort_floor)


def _optimiser(settings: TuneSettings) -> optax.GradientTransformation:
    # no `apply_if_finite`: `_step` drops a failed rollout's gradient before the update
    clip = optax.clip_by_global_norm(settings.clip)
    return optax.chain(clip, optax.adam(settings.learning_rate))


@eqx.filter_jit
def _step(params, opt_state, policy, problem, m, R, maps, at, tasks, scale, key, settings):
    B = tasks.target.shape[0] // settings.scenarios
    scenarios = draw_scenarios(
        key, B * settings.scenarios, settings.sigma, problem.model.n_masses, problem.t_end,
        params[0].dtype,
    )  # fmt: skip
    scenarios = restricted(scenarios, settings.disturbances)
    S = settings.scenarios
    copies, members = _per_rollout(params, policy, S)
    (loss, (miss, ratio, ok)), grads = jax.value_and_grad(_rollouts_loss, has_aux=True)(
        copies, members, problem, m, R, maps, scenarios, at, tasks, scale, settings
    )
    # a rollout whose plant failed has a NaN gradient (its own only: each rollout has its own
    # copy of the arrays): it adds nothing, and its task trains on its other rollouts
    keep = ok & jnp.all(
        jnp.stack([jnp.all(jnp.isfinite(g.reshape(g.shape[0], -1)), axis=1) for g in grads]),
        axis=0,
    )
    grads = tuple(
        jnp.where(keep.reshape((-1,) + (1,) * (g.ndim - 1)), g, 0.0)
        .reshape((B, S) + g.shape[1:])
        .sum(axis=1)
        for g in grads
    )
    updates, opt_state = _optimiser(settings).update(grads, opt_state, params)
    return (
        optax.apply_updates(params, updates),
        opt_state,
        loss,
        jnp.sqrt(sum(jnp.sum(g * g) for g in grads)),
        jnp.mean(miss <= 0.05),
        jnp.median(ratio),
        1.0 - jnp.mean(keep.astype(loss.dtype)),
    )


def tune_feedback(
    problem,
    policy: PerTask,
    tasks: Tasks,
    optimum_effort,
    settings: TuneSettings = TuneSettings(),
    callback: Callable[[int, dict], None] | None = None,
) -> tuple[PerTask, TuneHistory]:
    """Train the gains of `policy` (a `PerTask` of `LinearFeedback`, one per task of `tasks`:
    `neighbouring.neighbouring_feedback`'s; or of `QuadraticFeedback`, its second-order term
    too) by (T1) on model-drawn scenarios; `optimum_effort (B,)` each task's optimum effort.
    `callback(step, record)` after every step. Returns the trained `PerTask` and a
    `TuneHistory`."""
    check_policy_problem(problem)
    kinds = (LinearFeedback, QuadraticFeedback, PlantInformedFeedback)
    if not (isinstance(policy, PerTask) and isinstance(policy.policy, kinds)):
        raise TypeError(
            "tune_feedback trains a PerTask of LinearFeedback (neighbouring_feedback) or "
            "QuadraticFeedback"
        )
    if settings.steps < 1 or settings.scenarios < 1:
        raise ValueError("steps and scenarios must be positive integers")
    check_sigma(settings.sigma)
    if settings.disturbances not in PARTS:
        raise ValueError(
            f"disturbances must be one of {', '.join(PARTS)}, got {settings.disturbances!r}"
        )
    for name in _TRACED[1:]:  # σ (the first) checked by `check_sigma`
        value = real_number(name, getattr(settings, name))
        if not math.isfinite(value) or value < 0 or (value == 0 and name in _POSITIVE):
            which = "> 0" if name in _POSITIVE else "≥ 0"
            raise ValueError(f"{name} must be a finite number {which}, got {value!r}")
    B = policy.count
    dtype = _trainable(policy)[0].dtype
    scale = jnp.asarray(optimum_effort, dtype)
    if tasks.target.shape != (B, 2) or scale.shape != (B,):
        raise ValueError(
            f"one task and one optimum effort per policy: {B} policies, targets "
            f"{tuple(tasks.target.shape)}, optimum_effort {tuple(scale.shape)}"
        )
    if not bool(jnp.all(scale > 0)):
        raise ValueError("optimum_effort must be positive (each task's optimum effort)")
    floor = real_number("effort_floor", settings.effort_floor)
    if not (math.isfinite(floor) and floor >= 0):
        raise ValueError(f"effort_floor must be a finite number ≥ 0, got {floor!r}")
    S = settings.scenarios
    m, R = interval_sizes(problem, settings.interval, None)
    maps = interval_maps(problem, m * problem.dt)
    rep = lambda a: jnp.repeat(jnp.asarray(a, dtype), S, axis=0)  # noqa: E731
    batch = Tasks(rep(tasks.target), rep(tasks.theta0))
    scale = rep(effort_scale(scale, floor))
    # the kick times are fixed fractions of T: their steps are the same for every draw
    still = draw_scenarios(0, B * S, 0.0, problem.model.n_masses, problem.t_end)
    at = kick_steps(still, problem.dt)
    deployed = policy
    policy = _told(policy)
    params = _trainable(policy)
    opt_state = _optimiser(settings).init(params)
    base = jax.random.fold_in(jax.random.key(settings.seed), _STREAM)
    # the step's program depends on the shapes and `scenarios` only: `steps`, `seed` and the
    # floor are not in it, and the other numbers (σ, the learning rate, ...) are its inputs,
    # so that another value of any of them reuses it
    numbers: dict = {k: jnp.asarray(getattr(settings, k), dtype) for k in _TRACED}
    step_settings = settings._replace(steps=1, seed=0, effort_floor=0.0, **numbers)
    records: dict[str, list] = {k: [] for k in TuneHistory._fields}
    for i in range(settings.steps):
        params, opt_state, *values = _step(
            params, opt_state, policy, problem, m, R, maps, at, batch, scale,
            jax.random.fold_in(base, i), step_settings,
        )  # fmt: skip
        record = dict(zip(TuneHistory._fields, map(float, values), strict=True))
        for k, v in record.items():
            records[k].append(v)
        if callback is not None:
            callback(i, record)
    tuned = eqx.tree_at(_trainable, deployed, params)
    return tuned, TuneHistory(*(np.asarray(records[k]) for k in TuneHistory._fields))
