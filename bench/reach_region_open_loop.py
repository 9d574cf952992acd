"""Each reach-region target's open-loop optimum, and a policy's effort against it (issue 35).

For `--targets` held-out tasks of `--seed` (`region.sample_tasks(seed, N, "heldout", 0)`,
the tasks `jaxrigid control reach-region --feedback policy --scenarios N --seed S` evaluates
on) at the family's step (dt = 0.05, 100 RKMK4 steps):

- the open-loop optimum of each on the model (`region.open_loop_optima`: least effort subject
  to `x(T)[:2] = x*`, 40 SQP iterations from rest, every target in one program): reached or
  not (miss ≤ 1e-8), its effort, the SQP iterations it needed, the program's build and call;
- with `--policy FILE` (default: `results/reach_region_policy_cpu.eqx` where it exists), that
  policy on the same tasks with σ = `--disturbance` scenarios drawn from the seed, as the
  command draws them: per target its miss, success (≤ 0.05) and effort, and the median of
  its effort over the optimum's on the reached targets (the issue's bar: ≤ 1.5).

Writes `results/reach_region_open_loop_<device>.json` (`_<N>` added for `--targets N` other
than 50).

The optimum SQP finds is a local one (the problem is not convex): its effort bounds the
least effort from above, so a policy's ratio against it is a lower bound of the ratio
against the true optimum.

    python bench/reach_region_open_loop.py [--targets 50] [--seed 0] [--policy FILE]
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
from jaxrigid.control.policy_io import load_policy  # noqa: E402
from jaxrigid.control.scenarios import draw_scenarios  # noqa: E402

POLICY = Path(__file__).resolve().parent / "results" / "reach_region_policy_cpu.eqx"
REACHED = 1e-8  # a converged SQP holds the constraint to rounding (≤ 1.4e-13 measured)
SUCCESS = 0.05  # the success: miss ≤ 0.05

p = common.parser(__doc__)
p.add_argument("--targets", type=int, default=50)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--disturbance", type=float, default=0.05)
p.add_argument("--policy", default=str(POLICY) if POLICY.exists() else None)
A = p.parse_args()
if A.quick:
    A.targets = 4
T0 = time.perf_counter()

problem = region.reach_region(dt=0.05)
tasks = region.sample_tasks(A.seed, A.targets, "heldout", 0)
t = time.perf_counter()
optima = jax.block_until_ready(region.open_loop_optima(problem, tasks))
first = time.perf_counter() - t
t = time.perf_counter()
jax.block_until_ready(region.open_loop_optima(problem, tasks))
second = time.perf_counter() - t
miss, effort = np.asarray(optima.miss), np.asarray(optima.effort)
history = np.asarray(optima.miss_by_iteration)
reached = miss <= REACHED
iterations = [int(np.argmax(h <= REACHED)) + 1 if (h <= REACHED).any() else None for h in history]
record = {
    "targets": A.targets,
    "seed": A.seed,
    "dt": problem.dt,
    "sqp_iterations": region.OPEN_LOOP_SETTINGS.n_iterations,
    "distance": np.linalg.norm(np.asarray(tasks.target), axis=1),
    "open_loop": {
        "first_call_seconds": first,
        "call_seconds": second,
        "reached": int(reached.sum()),
        "miss": miss,
        "effort": effort,
        "iterations_to_reach": iterations,
        "median_effort": float(np.median(effort[reached])) if reached.any() else None,
    },
}
common.log(
    f"open loop: {reached.sum()} of {A.targets} reached (miss ≤ {REACHED:g}); median effort "
    f"{record['open_loop']['median_effort']}; first call {first:.1f} s, second {second:.2f} s"
)

if A.policy:
    policy, header = load_policy(A.policy)
    dt = header["metadata"].get("dt", problem.dt)
    assert dt == problem.dt, (dt, problem.dt)
    scenarios = draw_scenarios(A.seed, A.targets, A.disturbance, 2, problem.t_end)
    closed = closed_loop_rollout(problem, policy, scenarios, tasks, region.INTERVAL)
    c_miss, c_effort = np.asarray(closed.miss), np.asarray(closed.effort)
    ratio = c_effort[reached] / effort[reached]
    record["policy"] = {
        "file": A.policy,
        "disturbance": A.disturbance,
        "miss": c_miss,
        "effort": c_effort,
        "success": float(np.mean(np.isfinite(c_miss) & (c_miss <= SUCCESS))),
        "median_miss": float(np.median(c_miss)),
        "median_effort": float(np.median(c_effort)),
        "median_effort_ratio": float(np.median(ratio)),
        "ratio_of_median_efforts": float(np.median(c_effort[reached]) / np.median(effort[reached])),
    }
    common.log(
        f"policy {A.policy}: success {record['policy']['success']:.1%}, median miss "
        f"{record['policy']['median_miss']:.3g}, median effort ratio to the optimum "
        f"{record['policy']['median_effort_ratio']:.3g}"
    )

suffix = "" if A.targets == 50 else f"_{A.targets}"
name = f"reach_region_open_loop_{common.device_tag()}{suffix}.json"
path = common.write_results(A.out, name, record, T0)
common.log(f"wrote {path}")
