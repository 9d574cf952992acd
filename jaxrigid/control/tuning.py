"""Per-task feedback gains trained on the model's own disturbed scenarios (issue 35).

The neighbouring gains (`neighbouring`, (N1)) are the re-plan's sensitivity to the measured
state: exact for small deviations, and under σ = 0.05 too large a correction for about half
the targets (bench/README, `neighbouring_feedback.py`). `tune_feedback` keeps the policy's
form, (F2) around each task's open-loop optimum, and trains its gains by gradients through
closed-loop rollouts on scenarios drawn from the disturbance model (`scenarios`, (S1), (S2)):
at step `i`, for each of the `B` tasks `S` fresh scenarios of size `σ`, and

    L = (1/BS) Σ_{b,s} [ (miss_bs / s_m)² + w · effort_bs / E*_b ]                      (T1)

(`s_m` the miss scale, `w` the effort weight, `E*_b` task `b`'s optimum effort: each task's
effort counted relative to its own), minimised with `optax.adam` after a global-norm clip; a
task whose gradient is not finite (one of its plants failed under a large correction) skips
that step.
The nominal plan `c̄ₖ` and features `φ̄ₖ` stay the optimum's; the gains of every interval
train, the last one's too, and for a `policies.QuadraticFeedback` (F4) (`from_linear` of the
neighbouring law) its second-order term with them: the form that reaches the targets the
linear one, trained the same way, still misses (bench/README).

This is per-task design, done where the optimum is (for each target, before it is run): it
sees the target and the disturbance model, never the plant it is evaluated on (the
scenarios' key is the settings' `seed`'s own stream; evaluation draws its own). One program
per shapes `(B, S)`: one `jit` of the whole step, scenarios drawn inside it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .closed_loop import (
    PerTask,
    Tasks,
    _batch,
    check_policy_problem,
    interval_maps,
    interval_sizes,
)
from .policies import LinearFeedback, QuadraticFeedback
from .scenarios import draw_scenarios, kick_steps

__all__ = ["TuneHistory", "TuneSettings", "tune_feedback"]

_STREAM = 3  # folded into the seed's key (training uses 2: a different stream)


class TuneSettings(NamedTuple):
    """`steps`, `scenarios` (`S` per task and step), `sigma` (their `σ`), `learning_rate`,
    `clip` (global gradient norm), (T1)'s `miss_scale` and `effort_weight`, `interval` (`H`,
    default `T/10`), `seed` (the scenarios' stream)."""

    steps: int = 1000
    scenarios: int = 16
    sigma: float = 0.05
    learning_rate: float = 1e-2
    clip: float = 10.0
    miss_scale: float = 0.05
    effort_weight: float = 0.1
    interval: float | None = None
    seed: int = 0


class TuneHistory(NamedTuple):
    """Per step: `loss` (T1), `grad_norm` (before clipping, the skipped tasks' left out),
    `success` (the batch's fraction with miss ≤ 0.05), `effort_ratio` (the batch's median
    effort over its task's optimum), `skipped` (the fraction of tasks whose gradient was not
    finite: a plant failed; they keep their gains that step)."""

    loss: np.ndarray
    grad_norm: np.ndarray
    success: np.ndarray
    effort_ratio: np.ndarray
    skipped: np.ndarray


def _repeated(policy: PerTask, S: int) -> PerTask:
    """Each task's policy `S` times in a row: rollout `b·S + s` runs task `b`'s."""
    return jax.tree_util.tree_map(lambda a: jnp.repeat(a, S, axis=0), policy)


def _trainable(policy: PerTask):
    """The arrays `tune_feedback` trains: the gains, and (F4)'s second-order term."""
    p = policy.policy
    return (p.gains, p.quad) if isinstance(p, QuadraticFeedback) else (p.gains,)


def _loss(params, policy, problem, m, R, maps, scenarios, at, tasks, scale, settings):
    S = settings.scenarios
    members = eqx.tree_at(_trainable, policy, params)
    miss, effort, ok, *_ = _batch(problem, _repeated(members, S), m, R, maps, scenarios, at, tasks)
    # a failed plant counts as a miss of 1 (its gradient is NaN: its task skips the step)
    miss = jnp.where(ok, miss, 1.0)
    ratio = jnp.where(ok, effort, 0.0) / scale
    loss = jnp.mean((miss / settings.miss_scale) ** 2) + settings.effort_weight * jnp.mean(ratio)
    return loss, (miss, ratio)


def _optimiser(settings: TuneSettings) -> optax.GradientTransformation:
    # no `apply_if_finite`: `_step` zeroes a non-finite task's gradient before the update
    clip = optax.clip_by_global_norm(settings.clip)
    return optax.chain(clip, optax.adam(settings.learning_rate))


@eqx.filter_jit
def _step(params, opt_state, policy, problem, m, R, maps, at, tasks, scale, key, settings):
    B = tasks.target.shape[0] // settings.scenarios
    scenarios = draw_scenarios(
        key, B * settings.scenarios, settings.sigma, problem.model.n_masses, problem.t_end,
        params[0].dtype,
    )  # fmt: skip
    (loss, (miss, ratio)), grads = jax.value_and_grad(_loss, has_aux=True)(
        params, policy, problem, m, R, maps, scenarios, at, tasks, scale, settings
    )
    # a plant that failed makes its task's gradient NaN (and only its task's): that task
    # skips the step, the others train on
    finite = jnp.stack([jnp.all(jnp.isfinite(g.reshape(g.shape[0], -1)), axis=1) for g in grads])
    finite = jnp.all(finite, axis=0)
    grads = tuple(jnp.where(finite.reshape((-1,) + (1,) * (g.ndim - 1)), g, 0.0) for g in grads)
    updates, opt_state = _optimiser(settings).update(grads, opt_state, params)
    return (
        optax.apply_updates(params, updates),
        opt_state,
        loss,
        jnp.sqrt(sum(jnp.sum(g * g) for g in grads)),
        jnp.mean(miss <= 0.05),
        jnp.median(ratio),
        1.0 - jnp.mean(finite.astype(loss.dtype)),
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
    kinds = (LinearFeedback, QuadraticFeedback)
    if not (isinstance(policy, PerTask) and isinstance(policy.policy, kinds)):
        raise TypeError(
            "tune_feedback trains a PerTask of LinearFeedback (neighbouring_feedback) or "
            "QuadraticFeedback"
        )
    if settings.steps < 1 or settings.scenarios < 1:
        raise ValueError("steps and scenarios must be positive integers")
    B = policy.count
    dtype = policy.policy.gains.dtype
    scale = jnp.asarray(optimum_effort, dtype)
    if tasks.target.shape != (B, 2) or scale.shape != (B,):
        raise ValueError(
            f"one task and one optimum effort per policy: {B} policies, targets "
            f"{tuple(tasks.target.shape)}, optimum_effort {tuple(scale.shape)}"
        )
    if not bool(jnp.all(scale > 0)):
        raise ValueError("optimum_effort must be positive (each task's optimum effort)")
    S = settings.scenarios
    m, R = interval_sizes(problem, settings.interval, None)
    maps = interval_maps(problem, m * problem.dt)
    rep = lambda a: jnp.repeat(jnp.asarray(a, dtype), S, axis=0)  # noqa: E731
    batch = Tasks(rep(tasks.target), rep(tasks.theta0))
    scale = rep(scale)
    # the kick times are fixed fractions of T: their steps are the same for every draw
    still = draw_scenarios(0, B * S, 0.0, problem.model.n_masses, problem.t_end)
    at = kick_steps(still, problem.dt)
    params = _trainable(policy)
    opt_state = _optimiser(settings).init(params)
    base = jax.random.fold_in(jax.random.key(settings.seed), _STREAM)
    # the step's program depends on these settings only (not on `steps` or `seed`)
    step_settings = settings._replace(steps=1, seed=0)
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
    tuned = eqx.tree_at(_trainable, policy, params)
    return tuned, TuneHistory(*(np.asarray(records[k]) for k in TuneHistory._fields))
