"""MPC's cost against the number of scenarios: for `K` scenarios (default 1, 16, 256) of
reach-point (RKMK4, dt = 0.05, re-plans every T/10 = 10 steps), the build time (first call,
trace + compile) of each of MPC's three programs — the re-plan (`control.mpc.replan`: 8 SQP
iterations, each one linearisation of the 100-step simulation, `vmap` over the scenarios),
the warm start and the plant segment (10 plant steps) — and then the re-plans per second
(`K` re-plans per call, median of `--repeats` calls) and plant segments per second; beside
the re-plan, its peer `replan_al`: the augmented Lagrangian of 2 × 20 L-BFGS iterations (the
default before 2026-12-01), in the same process, and their ratios `sqp_vs_al`. The plans
are the zero control with zero multipliers: the budget is fixed, so a call costs the same
whatever the plan (the SQP's line search may halve a step more or less often: its calls
are from the same plans as the peer's). Writes `results/feedback_control_<device>.json`.
Run it with `JAXRIGID_NO_COMPILATION_CACHE=1` for cold builds.

`--part policy`: policy training (`control.training`) instead: for a batch of `B` rollouts
(default 1, 16, 256, 1024) of reach-region (RKMK4, dt = 0.05, 10 control intervals of 10
steps, σ = 0.05 scenarios, the command's `MLPPolicy` 64 × 2), the training step's build
split into trace + lower and compile (`eqx.filter_jit(...).lower(...).compile()`), then the
step's seconds (median of `--repeats` calls after a warm-up call) and rollouts with their
gradient per second (`B` / step). Writes `results/feedback_control_policy_<device>.json`.

    python bench/feedback_control.py [--scenarios 1,16,256] [--repeats 2] [--quick]
    python bench/feedback_control.py --part policy [--batches 1,16,256,1024] [--dtype float32]
"""

from __future__ import annotations

import statistics
import time

import _common as common
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

from jaxrigid.control import AugmentedLagrangian, get_problem, mpc  # noqa: E402
from jaxrigid.control.scenarios import draw_scenarios, kick_steps  # noqa: E402
from jaxrigid.program_store import call_filtered  # noqa: E402

p = common.parser(__doc__, dtype=True)
p.add_argument("--scenarios", default="1,16,256", help="comma-separated K")
p.add_argument("--repeats", type=int, default=2)
p.add_argument("--part", choices=("mpc", "policy"), default="mpc")
p.add_argument("--batches", default="1,16,256,1024", help="--part policy: comma-separated B")
A = p.parse_args()
sizes = [1, 4] if A.quick else [int(k) for k in A.scenarios.split(",")]


AL_PEER = AugmentedLagrangian(n_outer=2, n_inner=20)


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

    def replan_al():
        return mpc.replan(problem, plans, states, mult, remaining, AL_PEER)

    def segment():
        return call_filtered(mpc._segment_program, problem, plans, states, scenarios, at, step0, m)

    record = {"scenarios": K}
    programs = {"start": start, "replan": replan, "replan_al": replan_al, "segment": segment}
    for name, fn in programs.items():
        _, build = timed(fn)
        runs = [timed(fn)[1] for _ in range(A.repeats)]
        run = statistics.median(runs)
        record[name] = {"first_call_seconds": build, "call_seconds": run, "calls": runs}
        common.log(f"K = {K}: {name} first call {build:.1f} s, then {run:.3f} s")
    record["replans_per_second"] = K / record["replan"]["call_seconds"]
    record["segments_per_second"] = K / record["segment"]["call_seconds"]
    record["iterations_per_replan"] = mpc.replan_iterations()
    record["sqp_vs_al"] = {
        what: record["replan"][what] / record["replan_al"][what]
        for what in ("first_call_seconds", "call_seconds")
    }
    common.log(f"K = {K}: SQP/AL first call {record['sqp_vs_al']['first_call_seconds']:.2f}, "
               f"call {record['sqp_vs_al']['call_seconds']:.2f}")  # fmt: skip
    return record


def measure_policy(B: int) -> dict:
    import equinox as eqx

    from jaxrigid.control.closed_loop import LossWeights, interval_maps
    from jaxrigid.control.policies import MLPPolicy, active_rows
    from jaxrigid.control.region import RADIUS, reach_region, sample_tasks
    from jaxrigid.control.training import TrainSettings, _step_numbers, _train_step, optimiser

    dtype = jnp.dtype(A.dtype)
    problem = reach_region(dtype=dtype)
    m = mpc.replan_steps(problem, 0.5)
    R = problem.n_steps // m
    policy = MLPPolicy(
        active_rows(problem.control, 0.5), 2, 5.0, RADIUS, key=jax.random.key(0), dtype=dtype
    )
    opt = optimiser(TrainSettings())
    opt_state = opt.init(eqx.filter(policy, eqx.is_inexact_array))
    maps = interval_maps(problem, 0.5)
    scenarios = draw_scenarios(0, B, 0.05, 2, problem.t_end, dtype)
    at = kick_steps(scenarios, problem.dt)
    t = sample_tasks(0, B, dtype=dtype)
    numbers = _step_numbers(TrainSettings(weights=LossWeights()), dtype)
    args = (policy, opt_state, numbers, problem, m, R, maps, scenarios, at, t)
    t0 = time.perf_counter()
    lowered = _train_step.lower(*args)
    lower_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t0
    timed(lambda: compiled(*args))  # warm-up
    runs = [timed(lambda: compiled(*args))[1] for _ in range(A.repeats)]
    step = statistics.median(runs)
    common.log(
        f"B = {B}: trace+lower {lower_s:.1f} s, compile {compile_s:.1f} s, step {step:.3f} s, "
        f"{B / step:.1f} rollouts with gradient / s"
    )
    return {
        "batch": B,
        "dtype": A.dtype,
        "steps_per_rollout": problem.n_steps,
        "trace_lower_seconds": lower_s,
        "compile_seconds": compile_s,
        "step_seconds": step,
        "calls": runs,
        "rollouts_with_gradient_per_second": B / step,
    }


t0 = time.perf_counter()
if A.part == "policy":
    batches = [1, 4] if A.quick else [int(b) for b in A.batches.split(",")]
    records = [measure_policy(B) for B in batches]
    name = f"feedback_control_policy_{common.device_tag(A.dtype, quick=A.quick)}.json"
else:
    records = [measure(K) for K in sizes]
    name = f"feedback_control_{common.device_tag(quick=A.quick)}.json"
path = common.write_results(A.out, name, {"results": records}, t0)
print(path)
