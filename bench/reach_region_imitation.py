"""A reach-region policy learnt from MPC by imitation and DAgger (issue 35; `control.imitation`).

Round `j` draws `--tasks` training tasks (`region.sample_tasks(seed, B, "train", j)`) and
σ = `--disturbance` scenarios from the seed's own stream, computes each task's open-loop
optimum (`region.open_loop_optima`, the expert's plan 0), and runs the closed loop labelled
by the expert (`imitation.expert_rollout`: every interval's SQP re-plan from the plant's
state, held within `--tolerance` of the target's miss on the model): round 0 driven by the
expert (MPC itself), later rounds by the policy of the round before (DAgger). The policy
(an `MLPPolicy`, `--width`, `--depth`) is then fitted by (I1) to all rounds' pairs
(`imitation.fit`, `--fit-steps` of Adam), continuing from its weights.

After every round it is evaluated as `jaxrigid control reach-region --feedback policy
--scenarios N --seed S` evaluates (`--evaluate` held-out tasks, the scenarios of the seed):
success (miss ≤ 0.05), median miss, and the median over targets of its effort over the
target's open-loop optimum; with σ = 0 too (the optimum's own plant, where the ratio
compares like with like). Writes `results/reach_region_imitation_<device>.json` and the
policy file (`--policy-out`).

`--frontier`: instead, the expert alone (MPC, driving) on round 0's tasks and scenarios for
each `(last re-plan, tolerance)` pair, its success and median effort over the optimum:
`results/reach_region_expert_frontier_<device>.json`.

    python bench/reach_region_imitation.py [--rounds 3] [--tasks 512] [--evaluate 200]
    python bench/reach_region_imitation.py --frontier [--tasks 256]
"""

from __future__ import annotations

import time
from pathlib import Path

import _common as common
import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from jaxrigid.control import region  # noqa: E402
from jaxrigid.control.closed_loop import closed_loop_rollout  # noqa: E402
from jaxrigid.control.imitation import FitSettings, expert_rollout, fit, flatten  # noqa: E402
from jaxrigid.control.policies import MLPPolicy, active_rows  # noqa: E402
from jaxrigid.control.policy_io import save_policy  # noqa: E402
from jaxrigid.control.scenarios import draw_scenarios  # noqa: E402

SUCCESS = 0.05  # the success: miss ≤ 0.05
_STREAM = 7  # the training scenarios' stream, folded into the seed's key

p = common.parser(__doc__)
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--tasks", type=int, default=512)
p.add_argument("--evaluate", type=int, default=200)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--disturbance", type=float, default=0.05)
p.add_argument("--tolerance", type=float, default=0.02)
p.add_argument("--last-replan", type=int, default=9)
p.add_argument("--fit-steps", type=int, default=20000)
p.add_argument("--fit-learning-rate", type=float, default=1e-3)
p.add_argument("--width", type=int, default=128)
p.add_argument("--depth", type=int, default=3)
p.add_argument("--policy-out", default=None)
p.add_argument("--frontier", action="store_true")
p.add_argument("--pairs-out", default=None, help="an .npz of every round's pairs")
A = p.parse_args()
if A.quick:
    A.rounds, A.tasks, A.evaluate, A.fit_steps = 1, 8, 8, 200
T0 = time.perf_counter()


def timed(f, *args, **kwargs):
    t = time.perf_counter()
    out = jax.block_until_ready(f(*args, **kwargs))
    return out, time.perf_counter() - t


problem = region.reach_region(dt=0.05)
rows = active_rows(problem.control, region.INTERVAL)
T = problem.t_end
base = jax.random.fold_in(jax.random.key(A.seed), _STREAM)
FRONTIER = [(9, 0.0), (9, 0.01), (9, 0.02), (9, 0.03), (8, 0.0), (8, 0.01), (8, 0.02), (7, 0.0),
            (7, 0.01), (6, 0.0), (5, 0.0), (4, 0.0)]  # fmt: skip
if A.frontier:
    tasks = region.sample_tasks(A.seed, A.tasks, "train", 0)
    scenarios = draw_scenarios(jax.random.fold_in(base, 0), A.tasks, A.disturbance, 2, T)
    optima, t_optima = timed(region.open_loop_optima, problem, tasks)
    o_effort = np.asarray(optima.effort)
    nobody = MLPPolicy(rows, 2, region.HORIZON, region.RADIUS, key=jax.random.key(0))
    points = []
    for last, tol in FRONTIER:
        run, seconds = timed(
            expert_rollout, problem, nobody, scenarios, tasks, optima.coefficients, True,
            last_replan=last, tolerance=tol,
        )  # fmt: skip
        miss, effort = np.asarray(run.miss), np.asarray(run.effort)
        point = {
            "last_replan": last,
            "tolerance": tol,
            "success": float(np.mean(np.isfinite(miss) & (miss <= SUCCESS))),
            "median_miss": float(np.nanmedian(miss)),
            "p90_miss": float(np.nanpercentile(miss, 90)),
            "median_effort_ratio": float(np.median(effort / o_effort)),
            "ratio_of_median_efforts": float(np.median(effort) / np.median(o_effort)),
            "seconds": seconds,
        }
        points.append(point)
        common.log(str(point))
    record = {"tasks": A.tasks, "seed": A.seed, "disturbance": A.disturbance,
              "optima_seconds": t_optima, "points": points}  # fmt: skip
    name = f"reach_region_expert_frontier_{common.device_tag()}.json"
    common.log(f"wrote {common.write_results(A.out, name, record, T0)}")
    raise SystemExit(0)
held = region.sample_tasks(A.seed, A.evaluate, "heldout", 0)
held_optima, t_opt = timed(region.open_loop_optima, problem, held)
held_effort = np.asarray(held_optima.effort)
reached = np.asarray(held_optima.miss) <= 1e-8
common.log(f"held-out optima: {reached.sum()} of {A.evaluate} reached, {t_opt:.1f} s")
evaluation = {
    sigma: draw_scenarios(A.seed, A.evaluate, sigma, 2, T) for sigma in (A.disturbance, 0.0)
}


def evaluate(policy):
    out = {}
    for sigma, scenarios in evaluation.items():
        run, seconds = timed(closed_loop_rollout, problem, policy, scenarios, held, region.INTERVAL)
        miss, effort = np.asarray(run.miss), np.asarray(run.effort)
        ratio = effort[reached] / held_effort[reached]
        out[str(sigma)] = {
            "success": float(np.mean(np.isfinite(miss) & (miss <= SUCCESS))),
            "median_miss": float(np.nanmedian(miss)),
            "p90_miss": float(np.nanpercentile(miss, 90)),
            "median_effort_ratio": float(np.median(ratio)),
            "seconds": seconds,
        }
    return out


policy = MLPPolicy(
    rows, 2, region.HORIZON, region.RADIUS, key=jax.random.key(A.seed), width=A.width,
    depth=A.depth,
)  # fmt: skip
observations, labels, rounds = [], [], []
for j in range(A.rounds):
    tasks = region.sample_tasks(A.seed, A.tasks, "train", j)
    scenarios = draw_scenarios(jax.random.fold_in(base, j), A.tasks, A.disturbance, 2, T)
    optima, t_optima = timed(region.open_loop_optima, problem, tasks)
    run, t_expert = timed(
        expert_rollout, problem, policy, scenarios, tasks, optima.coefficients, j == 0,
        last_replan=A.last_replan, tolerance=A.tolerance,
    )  # fmt: skip
    miss, effort = np.asarray(run.miss), np.asarray(run.effort)
    o, lab = flatten(run)
    observations.append(o)
    labels.append(lab)
    data = jax.tree_util.tree_map(lambda *a: np.concatenate(a), *observations)
    every = np.concatenate(labels)
    if A.pairs_out:
        Path(A.pairs_out).parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            A.pairs_out, labels=every, **{f: np.asarray(getattr(data, f)) for f in data._fields}
        )
    (policy, losses, final), t_fit = timed(
        fit,
        policy,
        data,
        every,
        settings=FitSettings(A.fit_steps, 256, A.fit_learning_rate, A.seed + j),
    )
    record = {
        "round": j,
        "driver": "expert" if j == 0 else "policy",
        "optima_seconds": t_optima,
        "expert_seconds": t_expert,
        "rollout_success": float(np.mean(np.isfinite(miss) & (miss <= SUCCESS))),
        "rollout_median_miss": float(np.nanmedian(miss)),
        "rollout_median_effort_ratio": float(np.median(effort / np.asarray(optima.effort))),
        "pairs": int(every.shape[0]),
        "fit_seconds": t_fit,
        "fit_first_loss": float(losses[0]),
        "fit_last_loss": float(np.mean(np.asarray(losses[-100:]))),
        "fit_final_loss": float(final),
        "evaluation": evaluate(policy),
    }
    rounds.append(record)
    common.log(str(record))

record = {
    "tasks_per_round": A.tasks,
    "evaluate": A.evaluate,
    "seed": A.seed,
    "disturbance": A.disturbance,
    "tolerance": A.tolerance,
    "last_replan": A.last_replan,
    "fit_steps": A.fit_steps,
    "fit_learning_rate": A.fit_learning_rate,
    "width": A.width,
    "depth": A.depth,
    "held_out_optima_seconds": t_opt,
    "rounds": rounds,
}
name = f"reach_region_imitation_{common.device_tag()}.json"
path = common.write_results(A.out, name, record, T0)
common.log(f"wrote {path}")
if A.policy_out:
    meta = {"family": "reach-region", "dt": problem.dt, "trained_by": "imitation (DAgger)"}
    save_policy(A.policy_out, policy, meta)
    common.log(f"policy written to {A.policy_out}")
