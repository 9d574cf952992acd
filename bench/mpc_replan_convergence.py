"""How far MPC's re-plans converge: the SQP against the augmented Lagrangian (issue 35).

The problem of `tests/test_control_feedback.py`: reach-point at dt = 0.25 (20 RKMK4 steps),
B-spline plans re-planned every H = 1.0 (`--replan-every`), K = 4 scenarios of σ = 0.05.
For each re-plan solver:

- `al`: the augmented Lagrangian of 2 × 20 L-BFGS iterations per call
  (`AugmentedLagrangian(n_outer=2, n_inner=20)`, the library's re-plan before 2026-12-01);
- `sqp`: the library's re-plan, `control.sqp` (8 iterations per call: each a KKT solve with
  the effort's Hessian and Powell's BFGS update of the constraint's curvature, and a
  backtracking line search on the ℓ1 merit),

it writes the open-loop optimum's effort and miss after each cold-started call at `t = 0`
(`--calls` for the augmented Lagrangian, as the tests' fixture did; `--sqp-calls` for the
SQP), and then, per scenario seed, the closed loop's and the replayed open loop's misses,
their median ratio, the closed loop's efforts and the largest miss any re-plan predicted (a
re-plan that converged predicts ≤ 1e-3, the tolerance). Writes
`results/mpc_replan_convergence_<device>.json`.

    python bench/mpc_replan_convergence.py [--seeds 0,1,2] [--replan-every 1.0]
"""

from __future__ import annotations

import time

import _common as common
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from jaxrigid.control import AugmentedLagrangian, get_problem, mpc  # noqa: E402
from jaxrigid.control.scenarios import draw_scenarios, replay  # noqa: E402

p = common.parser(__doc__)
p.add_argument("--seeds", default="0,1,2")
p.add_argument("--replan-every", type=float, default=1.0)
p.add_argument("--calls", type=int, default=12, help="cold-start calls of the AL at t = 0")
p.add_argument("--sqp-calls", type=int, default=1)
A = p.parse_args()
if A.quick:
    A.seeds, A.calls, A.sqp_calls = "0", 2, 1
K, SIGMA, H = 4, 0.05, A.replan_every
SETTINGS = {"al": AugmentedLagrangian(n_outer=2, n_inner=20), "sqp": mpc.DEFAULT_REPLAN_SETTINGS}


def study(solver: str) -> dict:
    settings = SETTINGS[solver]
    problem = get_problem("reach-point", dt=0.25, n_basis=mpc.basis_size(5.0, H, 8))
    plans, states = mpc._batched(problem.control, K), mpc._batched(problem.state0, K)
    mult = mpc.Multipliers(jnp.zeros((2,)), jnp.zeros((0,)), jnp.asarray(10.0))
    mult = mpc._batched(mult, K)
    t0, calls = time.perf_counter(), []
    for _ in range(A.calls if solver == "al" else A.sqp_calls):
        plans, mult, effort, miss = mpc.replan(
            problem, plans, states, mult, problem.n_steps, settings
        )
        calls.append({"effort": float(effort[0]), "miss": float(miss[0])})
    coefficients = plans.coefficients[0]
    multipliers = jax.tree_util.tree_map(lambda a: a[0], mult)
    seeds = []
    for seed in (int(s) for s in A.seeds.split(",")):
        scenarios = draw_scenarios(seed, K, SIGMA, 2, problem.t_end)
        opened = replay(problem, coefficients, scenarios)
        closed = mpc.run_mpc(problem, coefficients, multipliers, scenarios, H, settings)
        ol, cl = np.asarray(opened.miss), np.asarray(closed.miss)
        seeds.append({
            "seed": seed, "open_loop_miss": ol.tolist(), "closed_loop_miss": cl.tolist(),
            "median_ratio": float(np.median(cl) / np.median(ol)),
            "closed_loop_effort": np.asarray(closed.effort).tolist(),
            "largest_predicted_miss": float(np.max(np.asarray(closed.predicted_miss))),
        })  # fmt: skip
        print(solver, seeds[-1]["seed"], f"ratio {seeds[-1]['median_ratio']:.3f}",
              f"predicted ≤ {seeds[-1]['largest_predicted_miss']:.2e}", flush=True)  # fmt: skip
    return {"open_loop_calls": calls, "seeds": seeds, "seconds": time.perf_counter() - t0}


T0 = time.perf_counter()
record = {"K": K, "sigma": SIGMA, "replan_every": H, "dt": 0.25,
          "sqp_iterations": SETTINGS["sqp"].n_iterations,
          "al": study("al"), "sqp": study("sqp")}  # fmt: skip
for solver in ("al", "sqp"):
    last = record[solver]["open_loop_calls"][-1]
    print(solver, f"open loop: effort {last['effort']:.6f}, miss {last['miss']:.2e}")
path = common.write_results(A.out, f"mpc_replan_convergence_{common.device_tag()}.json", record, T0)
print(path)
