"""The neighbouring-optimal gains' program (`neighbouring._gains_program`, (N1)): its build
(trace, lower, compile, StableHLO lines) and run, as the library forms it against an
alternative, in one process (issue 31's rule: a program's build is measured).

- `two traces` (the library): `J = ∂c/∂(φ, p)` by `jacrev(c)`, then `λ`, then
  `jacfwd(∇ₚ(f + λᵀc))`, a second trace of the remaining horizon's simulation;
- `one trace` (the alternative): `∇²c` of both constraints and, as the primal, `J` from one
  forward-over-reverse trace (`jacfwd(jacrev(c), has_aux=True)`), `∇²L = ∇²f + Σᵢλᵢ∇²cᵢ`:
  fewer lines to build, but two reverse passes under the tangents.

Both on the same `--tasks` held-out reach-region tasks (each task's optimum, from
`region.open_loop_optima`) at each `--dts` step; the gains must agree to rounding (the
largest difference relative to each interval's largest gain is recorded). Builds are cold:
the script turns the persistent cache off for itself. Writes
`results/neighbouring_gains_build_<device>.json`.

    python bench/neighbouring_gains_build.py [--tasks 8] [--dts 0.25,0.05] [--repeats 3]
"""

from __future__ import annotations

import os

os.environ["JAXRIGID_NO_COMPILATION_CACHE"] = "1"  # cold builds: nothing loaded from disk

import time  # noqa: E402

import _common as common  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

from jaxrigid.control import neighbouring, region  # noqa: E402
from jaxrigid.control.closed_loop import interval_sizes  # noqa: E402
from jaxrigid.control.policies import active_rows  # noqa: E402

INTERVAL = 0.5


def one_trace_gain(problem, plan, state, remaining, rows: int):
    """(N1) with `J` and both constraints' Hessians from one forward-over-reverse trace."""
    c, f, z0 = neighbouring._replan_functions(problem, plan, state, remaining)
    F = z0.shape[0] - plan.coefficients.size

    def jacobian(z):
        J = jax.jacrev(c)(z)
        return J, J

    hess_c, J = jax.jacfwd(jacobian, has_aux=True)(z0)  # (2, F + P, F + P), (2, F + P)
    J_p = J[:, F:]
    grad_f = jax.grad(f)(z0)[F:]
    lam = -jnp.linalg.solve(J_p @ J_p.T, J_p @ grad_f)
    H = (jax.hessian(f)(z0) + jnp.tensordot(lam, hess_c, axes=1))[F:]
    K = neighbouring._kkt_gains(H, J, plan.coefficients.shape, rows)
    return K, plan.coefficients[:rows], z0[:F]


def program(problem, gain):
    """The gains of every task (`_gains_program`'s body, `gain` for `interval_gain`)."""
    m, R = interval_sizes(problem, INTERVAL, None)
    rows = active_rows(problem.control, m * problem.dt)
    original = neighbouring.interval_gain

    def run(coefficients, theta0s, targets):
        neighbouring.interval_gain = gain  # while tracing only
        try:
            one = lambda c, th, x: neighbouring._one_task(problem, m, R, rows, c, th, x)  # noqa: E731
            return jax.lax.map(lambda a: one(*a), (coefficients, theta0s, targets), batch_size=8)
        finally:
            neighbouring.interval_gain = original

    return jax.jit(run)


def measure(fn, args, repeats):
    t0 = time.perf_counter()
    traced = fn.trace(*args)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        runs.append(time.perf_counter() - t)
    record = {
        "trace_s": t1 - t0,
        "lower_s": t2 - t1,
        "compile_s": t3 - t2,
        "build_s": t3 - t0,
        "stablehlo_lines": lowered.as_text().count("\n"),
        "run_s": float(np.median(runs)),
    }
    return record, out[0]


def main():
    p = common.parser(__doc__)
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--dts", default="0.25,0.05")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    if args.quick:
        args.tasks, args.dts, args.repeats = 2, "0.25", 1
    started = time.perf_counter()
    rows = []
    for dt in (float(v) for v in args.dts.split(",")):
        problem = region.reach_region(dt=dt, dtype=jnp.dtype("float64"))
        tasks = region.sample_tasks(0, args.tasks, "heldout", 0)
        optima = region.open_loop_optima(problem, tasks)
        inputs = (optima.coefficients, tasks.theta0, tasks.target)
        records, gains = {}, {}
        for name, gain in (
            ("two traces", neighbouring.interval_gain),
            ("one trace", one_trace_gain),
        ):
            common.log(f"dt = {dt}: {name}")
            records[name], gains[name] = measure(program(problem, gain), inputs, args.repeats)
        a, b = np.asarray(gains["one trace"]), np.asarray(gains["two traces"])
        scale = np.abs(b).max(axis=(-2, -1), keepdims=True)
        for name, r in records.items():
            peer = records["two traces"]
            r |= {
                "dt": dt,
                "form": name,
                "tasks": args.tasks,
                "build_ratio": r["build_s"] / peer["build_s"],
                "run_ratio": r["run_s"] / peer["run_s"],
                "gains_max_rel_difference": float(np.max(np.abs(a - b) / scale)),
            }
            rows.append(r)
            print(
                f"dt {dt:5g} {name:10s}: trace {r['trace_s']:5.1f} lower {r['lower_s']:4.1f} "
                f"compile {r['compile_s']:5.1f} = build {r['build_s']:5.1f} s "
                f"({r['build_ratio']:.2f}x), {r['stablehlo_lines']} lines; run {r['run_s']:.3f} s "
                f"({r['run_ratio']:.2f}x); gains differ by {r['gains_max_rel_difference']:.1e}"
            )
    common.write_results(
        args.out,
        f"neighbouring_gains_build_{common.device_tag()}.json",
        {"machine": common.machine(), "rows": rows},
        started,
    )


if __name__ == "__main__":
    main()
