"""Training a feedback policy by gradients through closed-loop rollouts (`closed_loop`).

Each step draws a batch of `B` tasks (`tasks(step, fraction)`) and `B` disturbed scenarios of
size `σ` (`scenarios.draw_scenarios`, from the seed's own stream, a new draw every step),
evaluates the loss (C2) and its gradient with respect to the policy's parameters through the
whole closed loop, and updates the policy with `optax`:

    adam(learning_rate) after clip_by_global_norm(clip)    (any step whose gradient is not
                                                             finite skipped: apply_if_finite)

**Horizon curriculum.** `curriculum = (R₁, R₂, …)` trains the steps in equal stages on the
first `Rⱼ` intervals only (a horizon `RⱼH`), the targets scaled by `Rⱼ/R` (`fraction`): a
shorter horizon reaches less far. The policy sees the time left, so the same task at a
shorter horizon is the end of a longer one. Each stage is one program (its interval count is
a shape), built once.

`train_policy` returns the trained policy and a `History` (per step: the loss, the gradient's
global norm before clipping, the batch's median miss, the fraction of failed rollouts, the
stage's interval count).
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
    LossWeights,
    Tasks,
    check_policy_problem,
    interval_maps,
    interval_sizes,
    loss_value_and_grad,
)
from .scenarios import draw_scenarios, kick_steps

__all__ = ["History", "TrainSettings", "optimiser", "train_policy"]

_SCENARIO_STREAM = 2  # folded into the seed's key for the scenarios (tasks use 0 and 1)


class TrainSettings(NamedTuple):
    """`steps`, `batch` (`B`), `sigma` (the scenarios' `σ`), `learning_rate`, `clip` (the
    global gradient norm clipped to; `None`: no clipping), `curriculum` (interval counts per
    stage, `()`: the whole horizon throughout), `weights` (C2), `interval` (`H`, default
    `T/10`), `seed`."""

    steps: int = 200
    batch: int = 64
    sigma: float = 0.05
    learning_rate: float = 3e-3
    clip: float | None = 1.0
    curriculum: tuple[int, ...] = ()
    weights: LossWeights = LossWeights()
    interval: float | None = None
    seed: int = 0


class History(NamedTuple):
    """Per training step: `loss`, `grad_norm` (before clipping), `median_miss` (over the
    batch's rollouts that did not fail), `failed` (their fraction), `intervals` (the stage's
    `R`)."""

    loss: np.ndarray
    grad_norm: np.ndarray
    median_miss: np.ndarray
    failed: np.ndarray
    intervals: np.ndarray


def optimiser(settings: TrainSettings) -> optax.GradientTransformation:
    """`adam` after `clip_by_global_norm` (if `clip`), a non-finite update skipped."""
    parts = [] if settings.clip is None else [optax.clip_by_global_norm(settings.clip)]
    chain = optax.chain(*parts, optax.adam(settings.learning_rate))
    return optax.apply_if_finite(chain, max_consecutive_errors=10**9)


def _norm(tree):
    """The global 2-norm of a pytree's arrays (`None` leaves skipped)."""
    return jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree_util.tree_leaves(tree)))


def _step_numbers(settings: TrainSettings, dtype):
    """The settings' numbers as the step program's inputs, `(learning_rate, clip, weights)`
    (arrays; `clip` `None` where there is none): another value of any reuses the program.
    (Given the optimiser itself, a new `optax` object every call, each `train_policy` call
    traced the step again.)"""
    number = lambda x: None if x is None else jnp.asarray(x, dtype)  # noqa: E731
    weights = LossWeights(*(jnp.asarray(w, dtype) for w in settings.weights))  # type: ignore[arg-type]
    return number(settings.learning_rate), number(settings.clip), weights


@eqx.filter_jit
def _train_step(policy, opt_state, numbers, problem, m, R, maps, scenarios, at, tasks):
    """One step of training; `numbers` from `_step_numbers`."""
    learning_rate, clip, weights = numbers
    opt = optimiser(TrainSettings(learning_rate=learning_rate, clip=clip))
    step = loss_value_and_grad(policy, problem, m, R, maps, scenarios, at, tasks, weights)
    params = eqx.filter(policy, eqx.is_inexact_array)
    updates, opt_state = opt.update(step.grads, opt_state, params)
    policy = eqx.apply_updates(policy, updates)
    miss = jnp.where(step.ok, step.miss, jnp.nan)
    failed = jnp.mean((~step.ok).astype(step.loss.dtype))
    return (
        policy,
        opt_state,
        step.loss,
        _norm(step.grads),
        jnp.nanmedian(miss),
        failed,
    )


def _stages(settings: TrainSettings, R_max: int) -> list[int]:
    """The interval count of every step."""
    stages = tuple(settings.curriculum) or (R_max,)
    for R in stages:
        if not (isinstance(R, int) and 1 <= R <= R_max):
            raise ValueError(f"curriculum: interval counts must be in [1, {R_max}], got {R!r}")
    per = -(-settings.steps // len(stages))
    return [stages[min(i // per, len(stages) - 1)] for i in range(settings.steps)]


def train_policy(
    problem,
    policy,
    tasks: Callable[[int, float], Tasks],
    settings: TrainSettings = TrainSettings(),
    callback: Callable[[int, dict], None] | None = None,
):
    """Train `policy` on `problem` (a prescribed B-spline problem: `region.reach_region`, or
    reach-point for a `LinearFeedback`) for `settings.steps` steps; `tasks(step, fraction)`
    gives the step's `B` tasks (targets scaled by `fraction`, the curriculum's). `callback
    (step, record)` after every step. Returns `(policy, History)`."""
    check_policy_problem(problem)
    if settings.steps < 1 or settings.batch < 1:
        raise ValueError("steps and batch must be positive integers")
    m, R_max = interval_sizes(problem, settings.interval, None)
    per_step = _stages(settings, R_max)
    opt_state = optimiser(settings).init(eqx.filter(policy, eqx.is_inexact_array))
    dtype = problem.model.inertia.dtype
    numbers = _step_numbers(settings, dtype)
    base = jax.random.fold_in(jax.random.key(settings.seed), _SCENARIO_STREAM)
    n_masses = problem.model.n_masses
    maps = interval_maps(problem, m * problem.dt)
    records: dict[str, list] = {k: [] for k in History._fields}
    for i, R in enumerate(per_step):
        key = jax.random.fold_in(base, i)
        scenarios = draw_scenarios(
            key, settings.batch, settings.sigma, n_masses, problem.t_end, dtype
        )
        at = kick_steps(scenarios, problem.dt)
        batch = tasks(i, R / R_max)
        batch = Tasks(batch.target.astype(dtype), batch.theta0.astype(dtype))
        policy, opt_state, loss, gnorm, miss, failed = _train_step(
            policy, opt_state, numbers, problem, m, R, maps, scenarios, at, batch
        )
        record = {
            "loss": float(loss),
            "grad_norm": float(gnorm),
            "median_miss": float(miss),
            "failed": float(failed),
            "intervals": R,
        }
        for k, v in record.items():
            records[k].append(v)
        if callback is not None:
            callback(i, record)
    return policy, History(*(np.asarray(records[k]) for k in History._fields))
