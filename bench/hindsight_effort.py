"""The hindsight optimum's effort (`control.hindsight`, (H1)) on reach-region's held-out
rollouts: how little effort any feedback law of the closed loop's form could spend on each
disturbed plant, against the task's open-loop optimum `E*` and the controllers of
`neighbouring_feedback.py` (issue 35's effort target, median ≤ 1.5× `E*`); and the causal
reference `hindsight.informed_replanner` (the plant known, each kick seen at the next
interval, the rest re-planned) on the same rollouts.

The rollouts are `neighbouring_feedback.py`'s: held-out tasks `region.sample_tasks(--seed,
--tasks, "heldout", 0)` (`--shard START:STOP` of them), `--eval-per-task E` scenarios each,
`draw_scenarios(--seed, tasks·E, σ)` (their rows of it), σ = `--sigma`. With `--from FILE`
(a `neighbouring_feedback` result written with its `rollouts`) the arguments are read from
the file, each task's optimum is checked against the file's, and every controller of the file
is compared rollout by rollout with `E_h(0.05)`:

- `E_h(0)` and `E_h(0.05)` per rollout over `E*` (median, and the 45th percentile: a
  controller that succeeds on ≥ 95 % of the rollouts spends at least `E_h(0.05)` on each of
  them, so its median effort ratio is at least the 45th percentile of `E_h(0.05)/E*`);
- per controller: success, median effort / `E*`, median effort / `E_h(0.05)` over its
  successes, and how many successes spent less than `E_h(0.05)` (SQP's solution then was not
  the global one for that plant);
- `informed_replanner` at r = 0 and 0.05: success, effort / `E*` as above;
- the hindsight program's first call (build and run) and second call (run), the informed
  re-planner's first calls;
- for each `--identify-at k` (default 1,3): `hindsight.identifying_replanner` (the plant
  fitted (I1) from the measured states at interval `k` and after each kick) and the informed
  re-planner told the plant at the same interval, at r = `--aim` (default 0.05): success
  (miss ≤ 0.05), effort / `E*`, the fit's error in the plant's scales and kicks, first and
  second call.

`--identifying-only` runs the last item alone (no hindsight, no informed re-planner from 0);
`--once` also leaves out its second call and the informed re-planner (the 1000-target run);
`--sqp-iterations N` gives those re-plans `SQP(n_iterations=N)` (default: 30, (H1)'s).

Writes `results/hindsight_effort_<device>.json`.

    python bench/hindsight_effort.py [--tasks 32] [--eval-per-task 8] [--sigma 0.05] [--from FILE]
        [--identify-at 1,3] [--identifying-only] [--once]
"""

from __future__ import annotations

import json
import time

import _common as common
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from jaxrigid.control import region  # noqa: E402
from jaxrigid.control.closed_loop import Tasks  # noqa: E402
from jaxrigid.control.hindsight import (  # noqa: E402
    hindsight_optima,
    identifying_replanner,
    informed_replanner,
)
from jaxrigid.control.scenarios import draw_scenarios  # noqa: E402
from jaxrigid.control.sqp import SQP  # noqa: E402

SUCCESS = 0.05

p = common.parser(__doc__)
p.add_argument("--tasks", type=int, default=32)
p.add_argument("--shard", default=None, help="START:STOP, only these tasks of --tasks")
p.add_argument("--eval-per-task", type=int, default=8)
p.add_argument("--sigma", type=float, default=0.05)
p.add_argument("--dt", type=float, default=0.05)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--from", dest="source", default=None, help="a neighbouring_feedback result")
p.add_argument("--identify-at", default="1,3", help="intervals at which the plant is identified")
p.add_argument("--identifying-only", action="store_true", help="only the --identify-at runs")
p.add_argument("--once", action="store_true", help="with --identifying-only: one call each")
p.add_argument("--aim", type=float, default=SUCCESS, help="the re-planners' r (--identify-at)")
p.add_argument("--sqp-iterations", type=int, default=None, help="the --identify-at re-plans'")
A = p.parse_args()
source = None
if A.source is not None:
    source = json.loads(open(A.source).read())
    A.tasks, A.eval_per_task, A.dt, A.seed = (
        source["tasks"], source["eval_per_task"], source["dt"], source["seed"],
    )  # fmt: skip
    A.shard = "{}:{}".format(*source.get("shard", [0, A.tasks]))
if A.quick:
    A.tasks, A.eval_per_task, A.dt, A.shard = 2, 2, 0.25, None
FIRST, LAST = (0, A.tasks) if A.shard is None else (int(x) for x in A.shard.split(":"))
E = A.eval_per_task
T0 = time.perf_counter()


def timed(f, *args, **kwargs):
    t = time.perf_counter()
    out = jax.block_until_ready(f(*args, **kwargs))
    return out, time.perf_counter() - t


problem = region.reach_region(dt=A.dt)
tasks = region.sample_tasks(A.seed, A.tasks, "heldout", 0)
tasks = Tasks(*(a[FIRST:LAST] for a in tasks))
optima, t_optima = timed(region.open_loop_optima, problem, tasks)
if source is not None:  # the same tasks and optima as the file's
    np.testing.assert_allclose(optima.effort, source["optimum_effort"], rtol=1e-9)
common.log(f"optima: {t_optima:.1f} s")


def each(a):  # every task's row E times: the evaluation's rollouts
    return jnp.repeat(a, E, axis=0)


tasks_e, coefficients = Tasks(*map(each, tasks)), each(optima.coefficients)
e_star = np.repeat(np.asarray(optima.effort), E)
scenarios = draw_scenarios(A.seed, A.tasks * E, A.sigma, 2, problem.t_end)
scenarios = jax.tree_util.tree_map(lambda a: a[FIRST * E : LAST * E], scenarios)
found, seconds, informed = {}, {}, {}
for r in () if A.identifying_only else (0.0, SUCCESS):
    found[r], seconds[f"first call, r = {r:g}"] = timed(
        hindsight_optima, problem, tasks_e, coefficients, scenarios, r
    )
    common.log(f"r = {r:g}: {seconds[f'first call, r = {r:g}']:.1f} s")
if not A.identifying_only:
    _, seconds["second call"] = timed(
        hindsight_optima, problem, tasks_e, coefficients, scenarios, 0.0
    )
for r in () if A.identifying_only else (0.0, SUCCESS):
    informed[r], seconds[f"informed, first call, r = {r:g}"] = timed(
        informed_replanner, problem, tasks_e, coefficients, scenarios, r
    )
    common.log(f"informed, r = {r:g}: {seconds[f'informed, first call, r = {r:g}']:.1f} s")
if not A.identifying_only:
    _, seconds["informed, second call"] = timed(
        informed_replanner, problem, tasks_e, coefficients, scenarios, SUCCESS
    )
identified, told = {}, {}
budget = {} if A.sqp_iterations is None else {"settings": SQP(n_iterations=A.sqp_iterations)}
rollouts = (problem, tasks_e, coefficients, scenarios, A.aim)
for k in (int(k) for k in A.identify_at.split(",")):
    name = f"identifying at {k}"
    identified[k], seconds[f"{name}, first call"] = timed(
        identifying_replanner, *rollouts, identify_at=k, **budget
    )
    if A.once:
        continue
    _, seconds[f"{name}, second call"] = timed(
        identifying_replanner, *rollouts, identify_at=k, **budget
    )
    told[k], seconds[f"informed at {k}, first call"] = timed(
        informed_replanner, *rollouts, identified_at=k, **budget
    )
    common.log(f"{name}: {seconds[f'{name}, first call']:.1f} s")


def fit_error(run) -> dict:
    """The last fit's largest error per rollout in the scales and the kicks: median, max."""
    fitted, true = run.plant, scenarios
    scales = np.maximum(
        np.abs(np.asarray(fitted.mass_scale - true.mass_scale)).max(-1),
        np.abs(np.asarray(fitted.inertia_scale - true.inertia_scale)).max(-1),
    )
    kicks = np.abs(np.asarray(fitted.kicks - true.kicks)).max((-1, -2))
    return {
        "scales_median": float(np.median(scales)),
        "scales_max": float(np.max(scales)),
        "kicks_median": float(np.median(kicks)),
        "kicks_max": float(np.max(kicks)),
        "residual_max": float(np.max(np.asarray(run.residual))),
    }


def ratios(res, r: float) -> dict:
    q = np.asarray(res.effort) / e_star
    out = {
        "median": float(np.nanmedian(q)),
        "p45": float(np.nanpercentile(q, 45)),
        "p10": float(np.nanpercentile(q, 10)),
        "p90": float(np.nanpercentile(q, 90)),
        "not_reached": int(np.sum(~(np.asarray(res.miss) <= r + 1e-8))),
    }
    if hasattr(res, "zero"):
        out["zero"] = int(np.sum(np.asarray(res.zero)))
    return out


record = {
    "tasks": A.tasks,
    "shard": [FIRST, LAST],
    "eval_per_task": E,
    "sigma": A.sigma,
    "dt": A.dt,
    "seed": A.seed,
    "sqp_iterations": A.sqp_iterations,
    "source": A.source,
    "seconds": seconds,
    "optima_seconds": t_optima,
    "hindsight_over_optimum": {f"r = {r:g}": ratios(found[r], r) for r in found},
    "informed_over_optimum": {f"r = {r:g}": ratios(informed[r], r) for r in informed},
    "identifying_over_optimum": {
        f"identify at {k}, r = {A.aim:g}": {
            **ratios(identified[k], A.aim),
            "success": float(np.mean(np.asarray(identified[k].miss) <= SUCCESS)),
            "fit_error": fit_error(identified[k]),
            **(
                {}
                if k not in told
                else {
                    "informed_at_same_interval": ratios(told[k], A.aim),
                    "effort_over_informed_median": float(
                        np.nanmedian(np.asarray(identified[k].effort) / np.asarray(told[k].effort))
                    ),
                }
            ),
        }
        for k in identified
    },
    "rollouts": {
        "optimum_effort": e_star,
        **{f"hindsight effort, r = {r:g}": found[r].effort for r in found},
        **{f"informed effort, r = {r:g}": informed[r].effort for r in informed},
        **{f"informed miss, r = {r:g}": informed[r].miss for r in informed},
        **{f"identifying at {k} effort": identified[k].effort for k in identified},
        **{f"identifying at {k} miss": identified[k].miss for k in identified},
        **{f"informed at {k} effort": told[k].effort for k in told},
    },
}
common.log(json.dumps(common.to_json(record["hindsight_over_optimum"]), indent=1))
common.log(json.dumps(common.to_json(record["informed_over_optimum"]), indent=1))
common.log(json.dumps(common.to_json(record["identifying_over_optimum"]), indent=1))
if source is not None and not A.identifying_only:
    bound = np.asarray(found[SUCCESS].effort)
    controllers = {}
    for name, run in source["rollouts"].items():
        if not name.startswith(f"{A.sigma:g}, "):
            continue
        miss = np.asarray(run["miss"], float)
        effort = np.asarray(run["effort"], float)
        ok = np.isfinite(miss) & (miss <= SUCCESS)
        controllers[name] = {
            "success": float(np.mean(ok)),
            "median_effort_ratio": float(np.median(effort / e_star)),
            "median_effort_over_hindsight": float(np.median(effort[ok] / bound[ok])),
            "successes_below_hindsight": int(np.sum(ok & (effort < bound * (1 - 1e-9)))),
        }
    record["controllers"] = controllers
    common.log(json.dumps(controllers, indent=1))
name = "identifying" if A.identifying_only else "hindsight_effort"
name = f"{name}_{common.device_tag(quick=A.quick)}"
name += "" if A.shard is None else f"_tasks{FIRST}-{LAST}"
common.log(f"wrote {common.write_results(A.out, name + '.json', record, T0)}")
