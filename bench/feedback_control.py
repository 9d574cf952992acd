"""MPC's cost against the number of scenarios: for `K` scenarios (default 1, 16, 256) of
reach-point (RKMK4, dt = 0.05, re-plans every T/10 = 10 steps), the build time (first call,
trace + compile) of each of MPC's three programs — the re-plan (`control.mpc.replan`: 2 × 20
L-BFGS iterations, each one gradient of the 100-step simulation, `vmap` over the scenarios),
the warm start and the plant segment (10 plant steps) — and then the re-plans per second
(`K` re-plans per call, median of `--repeats` calls) and plant segments per second. The plans
are the zero control with zero multipliers: the budget is fixed, so a call costs the same
whatever the plan. Writes `results/feedback_control_<device>.json`.

    python bench/feedback_control.py [--scenarios 1,16,256] [--repeats 2] [--quick]
"""

from __future__ import annotations

import statistics
import time

import _common as common
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

from jaxrigid.control import get_problem, mpc  # noqa: E402
from jaxrigid.control.scenarios import draw_scenarios, kick_steps  # noqa: E402
from jaxrigid.program_store import call_filtered  # noqa: E402

p = common.parser(__doc__)
p.add_argument("--scenarios", default="1,16,256", help="comma-separated K")
p.add_argument("--repeats", type=int, default=2)
A = p.parse_args()
sizes = [1, 4] if A.quick else [int(k) for k in A.scenarios.split(",")]


def timed(fn):
    t = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t


def measure(K: int) -> dict:
    problem = get_problem("reach-point", n_basis=mpc.basis_size(5.0, 0.5, 8))
    m = mpc.replan_steps(problem)
    H = m * problem.dt
    scenarios = draw_scenarios(0, K, 0.05, 2, problem.t_end)
    at = kick_steps(scenarios, problem.dt)
    plans = mpc._batched(problem.control, K)
    states = mpc._batched(problem.state0, K)
    d = plans.coefficients.dtype
    mult = mpc._batched(mpc.Multipliers(jnp.zeros(2, d), jnp.zeros(0, d), jnp.asarray(10.0, d)), K)
    remaining = problem.n_steps - m
    step0 = jnp.asarray(0, jnp.int32)

    def start():
        return call_filtered(mpc._start_program, plans, states, H, True)

    def replan():
        return mpc.replan(problem, plans, states, mult, remaining)

    def segment():
        return call_filtered(mpc._segment_program, problem, plans, states, scenarios, at, step0, m)

    record = {"scenarios": K}
    for name, fn in (("start", start), ("replan", replan), ("segment", segment)):
        _, build = timed(fn)
        runs = [timed(fn)[1] for _ in range(A.repeats)]
        run = statistics.median(runs)
        record[name] = {"first_call_seconds": build, "call_seconds": run, "calls": runs}
        common.log(f"K = {K}: {name} first call {build:.1f} s, then {run:.3f} s")
    record["replans_per_second"] = K / record["replan"]["call_seconds"]
    record["segments_per_second"] = K / record["segment"]["call_seconds"]
    record["iterations_per_replan"] = (
        mpc.DEFAULT_REPLAN_SETTINGS.n_outer * mpc.DEFAULT_REPLAN_SETTINGS.n_inner
    )
    return record


t0 = time.perf_counter()
records = [measure(K) for K in sizes]
path = common.write_results(
    A.out, f"feedback_control_{common.device_tag(quick=A.quick)}.json", {"results": records}, t0
)
print(path)
