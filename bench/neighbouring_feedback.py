"""Neighbouring-optimal feedback on reach-region's held-out tasks, against the open loop and
MPC on the same disturbed scenarios (issue 35).

Per held-out task (`region.sample_tasks(seed, --tasks, "heldout", 0)`, the tasks `--feedback
policy --seed` evaluates on) at `dt = --dt`: its open-loop optimum (`region.open_loop_optima`),
then `neighbouring.neighbouring_feedback`'s gains (N1) around it, timed as a first call
(build and run) and a second (run). For every `--sigmas` value, on one σ-scenario per task
(`draw_scenarios(--seed, ...)`, kicks included):

- `open loop`: each optimum replayed (the policy with zero gains, the same program);
- `neighbouring, last L`: the feedback on intervals `k < L` and zero gains after (the last
  intervals' gains are the largest: a correction with `(R − k)H` left costs most);
- `tuned` (`--tune STEPS`): the neighbouring law (from "last 9"; `--tune-form quadratic`,
  the default, with (F4)'s second-order term, zero to start) trained further per task
  on model-drawn σ = `--tune-sigma` scenarios (`tuning.tune_feedback`, `--tune-scenarios` per
  task and step, (T1)'s effort floor `--tune-effort-floor`; its own stream, never the
  evaluation's), timed;
- `tuned` with `--tune-form plant`: (F5), the law plus a term linear in the plant's deviation
  from the model from interval `--identify-at` on (`policies.PlantInformedFeedback`), trained
  told the scenarios' plant; evaluated deployed (the closed loop fits (I1) at that interval,
  `tuned`) and told (`tuned, told the plant`); its plant gains start at zero or (`--plant-start
  sensitivity`) at (N1)'s sensitivity to the plant; `--save-policy FILE` writes the tuned law;
- `MPC` (`--mpc`): the expert of `imitation.expert_rollout` driving, its exact SQP re-plan
  (8 iterations) at every interval's start (last re-plan 9, tolerance 0), the peer.

Each: success (miss ≤ 0.05), median and 90th percentile miss, the median over tasks of the
effort's ratio to the task's optimum, the rollout program's seconds; and every rollout's miss
and effort (`rollouts`, with each task's optimum effort and index). Writes
`results/neighbouring_feedback_<device>.json`. `--eval-per-task E`: `E` scenarios per task
(every controller on the same `tasks·E` rollouts).

`--disturbances kicks` keeps only the scenarios' kicks (S2), the plant's masses and inertia
the model's; `plant` only the plant (S1), no kick (the same draws either way, the other part
set to nominal, `scenarios.restricted`; with `--tune` the training's scenarios too): which of
the two a law cannot correct. Written as `neighbouring_feedback_kicks_<device>...` (or `_plant_`).

`--shard START:STOP`: only tasks `START … STOP−1` of the `--tasks` drawn (tuned, evaluated
on their own rows of the scenarios drawn for all `tasks·E`), written to
`..._<device>_tasks<START>-<STOP>.json`: shards of one run, run one after another or on
several machines, pool into the whole run's rollouts (`neighbouring_feedback_pool.py`); only
the tuning's own scenario stream differs from an unsharded run.

    python bench/neighbouring_feedback.py [--tasks 64] [--sigmas 0.001,0.01,0.05] [--last 10,9,8]
                                          [--dt 0.05] [--mpc] [--tune STEPS] [--eval-per-task E]
                                          [--shard START:STOP] [--disturbances all|kicks|plant]
"""

from __future__ import annotations

import dataclasses
import time

import _common as common
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from jaxrigid.control import region  # noqa: E402
from jaxrigid.control.closed_loop import PerTask, Tasks, closed_loop_rollout  # noqa: E402
from jaxrigid.control.imitation import expert_rollout  # noqa: E402
from jaxrigid.control.neighbouring import neighbouring_feedback  # noqa: E402
from jaxrigid.control.policies import (  # noqa: E402
    MLPPolicy,
    PlantInformedFeedback,
    QuadraticFeedback,
    active_rows,
)
from jaxrigid.control.policy_io import save_policy  # noqa: E402
from jaxrigid.control.scenarios import draw_scenarios, restricted  # noqa: E402
from jaxrigid.control.tuning import TuneSettings, tune_feedback  # noqa: E402

SUCCESS = 0.05

p = common.parser(__doc__)
p.add_argument("--tasks", type=int, default=64)
p.add_argument("--sigmas", default="0.001,0.01,0.05")
p.add_argument("--last", default="10,9,8")
p.add_argument("--dt", type=float, default=0.05)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--mpc", action="store_true", help="MPC on the same scenarios (the peer)")
p.add_argument("--tune", type=int, default=0, help="tune_feedback steps (0: not run)")
p.add_argument("--tune-scenarios", type=int, default=16)
p.add_argument("--tune-sigma", type=float, default=0.05)
p.add_argument("--tune-form", choices=("quadratic", "linear", "plant"), default="quadratic")
p.add_argument("--identify-at", type=int, default=3, help="(F5)'s k_id (--tune-form plant)")
p.add_argument(
    "--plant-start",
    choices=("zero", "sensitivity"),
    default="zero",
    help="(F5)'s plant gains to start from: zero, or (N1)'s sensitivity to the plant",
)
p.add_argument("--save-policy", default=None, help="write the tuned law here (policy_io)")
p.add_argument(
    "--tune-effort-floor",
    type=float,
    default=TuneSettings().effort_floor,
    help="(T1)'s effort floor E_f (default %(default)s; 0: each task's own optimum)",
)
p.add_argument(
    "--tune-miss-tolerance",
    type=float,
    default=TuneSettings().miss_tolerance,
    help="(T1)'s miss tolerance d: a miss within it costs nothing (default %(default)s)",
)
p.add_argument("--eval-per-task", type=int, default=1)
p.add_argument("--shard", default=None, help="START:STOP, only these tasks of --tasks")
p.add_argument("--disturbances", choices=("all", "kicks", "plant"), default="all")
A = p.parse_args()
if A.quick:
    A.tasks, A.dt, A.sigmas, A.last = 2, 0.25, "0.001", "10"
    A.tune = min(A.tune, 3)
T0 = time.perf_counter()
if A.shard is None:
    FIRST, LAST = 0, A.tasks
else:
    FIRST, LAST = (int(x) for x in A.shard.split(":"))
    if not 0 <= FIRST < LAST <= A.tasks:
        p.error(f"--shard must be START:STOP with 0 <= START < STOP <= --tasks, got {A.shard}")


def timed(f, *args, **kwargs):
    t = time.perf_counter()
    out = jax.block_until_ready(f(*args, **kwargs))
    return out, time.perf_counter() - t


def summary(miss, effort, optimum_effort, seconds) -> dict:
    miss, effort = np.asarray(miss), np.asarray(effort)
    return {
        "success": float(np.mean(np.isfinite(miss) & (miss <= SUCCESS))),
        "failed": int(np.sum(~np.isfinite(miss))),
        "median_miss": float(np.nanmedian(miss)),
        "p90_miss": float(np.nanpercentile(miss, 90)),
        "median_effort_ratio": float(np.median(effort / optimum_effort)),
        "seconds": seconds,
    }


problem = region.reach_region(dt=A.dt)
tasks = region.sample_tasks(A.seed, A.tasks, "heldout", 0)
tasks = Tasks(*(a[FIRST:LAST] for a in tasks))
B = LAST - FIRST
optima, t_optima = timed(region.open_loop_optima, problem, tasks)
reached = np.asarray(optima.miss) < 1e-8
common.log(f"optima: {t_optima:.1f} s, {int(reached.sum())} of {B} reached")
policy, t_first = timed(neighbouring_feedback, problem, optima.coefficients, tasks)
_, t_second = timed(neighbouring_feedback, problem, optima.coefficients, tasks)
common.log(f"gains: first call {t_first:.1f} s, second {t_second:.1f} s")
tuned, t_tune, history, skipped = None, None, None, None
if A.tune:
    settings = TuneSettings(
        steps=A.tune,
        scenarios=A.tune_scenarios,
        sigma=A.tune_sigma,
        effort_floor=A.tune_effort_floor,
        miss_tolerance=A.tune_miss_tolerance,
        disturbances=A.disturbances,
    )
    # from "last 9": the last interval's gains (the largest, a plant fails under them at
    # σ = 0.05) start at zero and train with the rest
    g = policy.policy.gains
    start = eqx.tree_at(lambda q: q.policy.gains, policy, g.at[:, -1].set(0))
    if A.tune_form in ("quadratic", "plant"):  # (F4), the second-order term zero to start
        start = PerTask(QuadraticFeedback.from_linear(start.policy))
    if A.tune_form == "plant":  # (F5): told the plant from interval --identify-at
        law = PlantInformedFeedback.from_base(start.policy, A.identify_at)
        if A.plant_start == "sensitivity":  # (N1)'s, the last interval's zeroed as the gains
            found = neighbouring_feedback(problem, optima.coefficients, tasks,
                                          identify_at=A.identify_at)  # fmt: skip
            law = dataclasses.replace(law, plant_gains=found.policy.plant_gains.at[:, -1].set(0))
        start = PerTask(law)
    log = lambda i, r: (i % 100 == 0 or i == A.tune - 1) and common.log(f"tune {i}: {r}")  # noqa: E731
    (tuned, hist), t_tune = timed(tune_feedback, problem, start, tasks, optima.effort, settings,
                                  log)  # fmt: skip
    every = max(1, A.tune // 100)
    history = {k: np.asarray(v)[::every].tolist() for k, v in hist._asdict().items()}
    skipped = float(np.sum(hist.skipped) * B * A.tune_scenarios)  # failed rollouts
    common.log(f"tuned {A.tune} steps: {t_tune:.1f} s")
    if A.save_policy:
        save_policy(A.save_policy, tuned, {"tasks": A.tasks, "shard": [FIRST, LAST], "dt": A.dt})
E = A.eval_per_task


def each(tree):  # every task's member E times in a row: the evaluation's rollouts
    return jax.tree_util.tree_map(lambda a: jnp.repeat(a, E, axis=0), tree)


tasks_e = Tasks(*each(tuple(tasks)))
policy, tuned = each(policy), None if tuned is None else each(tuned)
gains = policy.policy.gains
o_effort = np.repeat(np.asarray(optima.effort), E)
rows = active_rows(problem.control, region.INTERVAL)
nobody = MLPPolicy(rows, 2, region.HORIZON, region.RADIUS, key=jax.random.key(0))
points, rollouts = [], {}
for sigma in [float(s) for s in A.sigmas.split(",")]:
    scenarios = draw_scenarios(A.seed, A.tasks * E, sigma, 2, problem.t_end)
    scenarios = jax.tree_util.tree_map(lambda a: a[FIRST * E : LAST * E], scenarios)
    scenarios = restricted(scenarios, A.disturbances)
    runs = {"open loop": jnp.zeros_like(gains)}
    for last in [int(x) for x in A.last.split(",")]:
        keep = (jnp.arange(gains.shape[1]) < last).astype(gains.dtype)[None, :, None, None]
        runs[f"neighbouring, last {last}"] = gains * keep
    if tuned is not None:
        runs["tuned"] = gains  # replaced by the tuned policy below
        if A.tune_form == "plant":  # told the plant (as trained), beside the fit (deployed)
            runs["tuned, told the plant"] = gains
    for name, g in runs.items():
        pol = eqx.tree_at(lambda q: q.policy.gains, policy, g)
        if name == "tuned":
            pol = tuned
        if name == "tuned, told the plant":
            pol = PerTask(dataclasses.replace(tuned.policy, source="told"))
        run, seconds = timed(closed_loop_rollout, problem, pol, scenarios, tasks_e)
        point = {"sigma": sigma, "controller": name}
        point |= summary(run.miss, run.effort, o_effort, seconds)
        points.append(point)
        rollouts[f"{sigma:g}, {name}"] = {"miss": run.miss, "effort": run.effort}
        common.log(str(point))
    if A.mpc:
        run, seconds = timed(expert_rollout, problem, nobody, scenarios, tasks_e,
                             each(optima.coefficients), True, last_replan=9)  # fmt: skip
        point = {"sigma": sigma, "controller": "MPC, last re-plan 9"}
        point |= summary(run.miss, run.effort, o_effort, seconds)
        points.append(point)
        rollouts[f"{sigma:g}, MPC"] = {"miss": run.miss, "effort": run.effort}
        common.log(str(point))
record = {
    "tasks": A.tasks,
    "shard": [FIRST, LAST],
    "dt": A.dt,
    "seed": A.seed,
    "optima_seconds": t_optima,
    "optima_reached": int(reached.sum()),
    "gains_first_call_seconds": t_first,
    "gains_second_call_seconds": t_second,
    "eval_per_task": E,
    "disturbances": A.disturbances,
    "tune": None
    if not A.tune
    else {
        "steps": A.tune,
        "scenarios": A.tune_scenarios,
        "sigma": A.tune_sigma,
        "form": A.tune_form,
        "identify_at": A.identify_at if A.tune_form == "plant" else None,
        "plant_start": A.plant_start if A.tune_form == "plant" else None,
        "effort_floor": A.tune_effort_floor,
        "miss_tolerance": A.tune_miss_tolerance,
        "seconds": t_tune,
        "history_every": max(1, A.tune // 100),
        "dropped_rollouts": skipped,
        "history": history,
    },
    "points": points,
    "task_index": np.arange(FIRST, LAST),
    "optimum_effort": optima.effort,
    "optimum_miss": optima.miss,
    "rollouts": rollouts,
}
# a part of the disturbances before the device: `neighbouring_feedback_pool.py`'s glob of the
# shards (`neighbouring_feedback_cpu_tasks*`) leaves it out
name = "neighbouring_feedback" + ("" if A.disturbances == "all" else f"_{A.disturbances}")
name += f"_{common.device_tag(quick=A.quick)}"
name += "" if A.shard is None else f"_tasks{FIRST}-{LAST}"
name += ".json"
common.log(f"wrote {common.write_results(A.out, name, record, T0)}")
