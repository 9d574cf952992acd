"""Gradients of a trajectory-optimisation objective against the horizon, and multi-start
throughput (issue 14).

**Gradient against horizon.** The two-circles ball (`control.presets.two_circles_start`)
driven by a quintic B-spline control (8 knot intervals) on `[0, T]`, `T = n_steps·dt`,
`dt = 0.05`, RKMK4, float64, for n_steps = 10², 10³, 10⁴, 10⁵. The objective is reach-point's
augmented Lagrangian at fixed multipliers `λ = 0`, `ρ = 20`: `f(p) = ∫Σθ̈² dt + 10·|x(T)[:2] −
(1, 0.5)|²` (`Effort() + 10·FinalPosition`), through `control.rollout(..., save_every=n_steps)`
with `checkpoint=True` (the default: checkpointed √n scans) and `checkpoint=False` (every
step's residuals stored), at one fixed coefficient set (`initial_guesses(problem, 2, seed=1)[1]`,
normal draws of standard deviation 0.5). For each: `jax.jit(jax.grad(f)).lower(p).compile()`
(`compile_seconds`), its `memory_analysis()` (`temp_bytes`), the run time (one warm-up call,
then `--repeats` calls interleaved between the two variants, median, `block_until_ready`),
and the relative difference of the two gradients. Exponents of power-law fits (log–log least
squares) of temp bytes and run seconds against n_steps. A store-everything point is not run
when its temporaries exceed `--max-memory-fraction` of the available memory, or when its call
is predicted (linearly, from the previous horizon) to exceed `--max-call-seconds`; the reason
is recorded.

**Multi-start throughput.** `control.multi_start` on `reach-point` (dt = 0.05, 100 steps,
RKMK4, float64) with `AugmentedLagrangian(n_outer=1, n_inner=5)` (5 L-BFGS iterations, each
with its zoom line search), K = 1, 10, 100, 1000, 10⁴ starts (`initial_guesses(problem, K)`).
The program is compiled ahead of time once per K through the jitted function `multi_start`
calls (`compile_seconds`; its cache is the one `multi_start` then uses), then `multi_start` is
called once (`first_call_seconds`, the warm-up) and `--repeats` more times (median); a call
predicted to take more than `--long-call-seconds` is timed once, the first call after the
compile. Starts × iterations per second = K·n_outer·n_inner / seconds. A K whose predicted
compile and calls would end the run after `--budget-seconds` (from the start) is skipped, the
reason recorded.

Writes `control_gradients_cpu[_quick].json` (`<device tag>` off the CPU).

    python bench/control_gradients.py                          # ≈ 15 min on 2 CPU cores
    python bench/control_gradients.py --quick --out /tmp/b     # 10², 10³ steps; K = 1, 10 (≈ 3 min)
"""

from __future__ import annotations

import sys
import time

import jax
from _common import (
    aot_compile,
    device_tag,
    enable_x64_for,
    load_average,
    log,
    loglog_slope,
    memory_bytes,
    parser,
    time_interleaved,
    write_results,
)

enable_x64_for("float64")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrigid import control  # noqa: E402
from jaxrigid.control.presets import two_circles_start  # noqa: E402
from jaxrigid.integrators.rkmk import RKMK4  # noqa: E402

DT = 0.05
TARGET = (1.0, 0.5)
PENALTY = 10.0  # (ρ/2)|c|² at ρ = 20, λ = 0
N_BASIS = 8


# ------------------------------------------------------------------------------------------
# Gradient against horizon.


def horizon_problem(n_steps: int) -> control.ControlProblem:
    """reach-point's ball, control and target on T = n_steps·DT, cost effort + penalty."""
    model, state0 = two_circles_start(n_steps * DT, "bspline", N_BASIS)
    target = jnp.asarray(TARGET, model.inertia.dtype)
    return control.ControlProblem(
        model=model,
        state0=state0,
        integrator=RKMK4(),
        cost=control.Effort() + PENALTY * control.FinalPosition(target),
        constraints=(),
        name=f"reach-point-penalty-{n_steps}",
        dt=DT,
        n_steps=n_steps,
        save_every=n_steps,
    )


def objective(problem: control.ControlProblem, checkpoint: bool):
    def f(p):
        traj = control.rollout(
            problem.integrator,
            problem.with_coefficients(p),
            problem.state0,
            problem.dt,
            problem.n_steps,
            save_every=problem.n_steps,
            checkpoint=checkpoint,
        )
        return problem.evaluate(traj, p)[0]

    return f


def available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


VARIANTS = {"checkpointed": True, "store_everything": False}


def gradient_point(n_steps, args, previous) -> dict:
    problem = horizon_problem(n_steps)
    p = control.initial_guesses(problem, 2, seed=1)[1]
    row = {"n_steps": n_steps, "t_end": n_steps * DT, "load_average_before": load_average()}
    runnable = {}
    for name, checkpoint in VARIANTS.items():
        compiled, compile_s = aot_compile(jax.grad(objective(problem, checkpoint)), p)
        rec = {"compile_seconds": compile_s, **memory_bytes(compiled)}
        avail = available_bytes()
        prev = previous.get(name)
        predicted = None if prev is None else prev["seconds"] * n_steps / prev["n_steps"]
        if avail is not None and rec["temp_bytes"] > args.max_memory_fraction * avail:
            rec["skipped"] = (
                f"temporaries {rec['temp_bytes'] / 1e9:.2f} GB exceed "
                f"{args.max_memory_fraction} of the {avail / 1e9:.2f} GB available"
            )
        elif predicted is not None and predicted > args.max_call_seconds:
            rec["skipped"] = (
                f"a call predicted to take {predicted:.0f} s (linear in n_steps from "
                f"{prev['n_steps']}) > --max-call-seconds {args.max_call_seconds}"
            )
        else:
            runnable[name] = compiled
        row[name] = rec
    timings = time_interleaved(runnable, (p,), args.repeats)
    grads = {}
    for name, timing in timings.items():
        grads[name] = np.asarray(timing.out)
        row[name] |= timing.record()
        row[name]["gradient_norm"] = float(np.linalg.norm(grads[name]))
        row[name]["all_finite"] = bool(np.isfinite(grads[name]).all())
    row["objective_value"] = float(jax.jit(objective(problem, True))(p))
    if len(grads) == 2:
        g1, g0 = grads["checkpointed"], grads["store_everything"]
        row["gradient_relative_difference"] = float(np.linalg.norm(g1 - g0) / np.linalg.norm(g0))
    row["load_average_after"] = load_average()
    return row


def fits(rows, name) -> dict:
    out = {}
    for key, field in (("memory", "temp_bytes"), ("run_time", "seconds")):
        pts = [(r["n_steps"], r[name][field]) for r in rows if field in r[name]]
        if len(pts) >= 2:
            n, y = zip(*pts)
            out[f"{key}_exponent"] = loglog_slope(n, y)
            out[f"{key}_local_exponents"] = [
                loglog_slope(n[i : i + 2], y[i : i + 2]) for i in range(len(n) - 1)
            ]
            out[f"{key}_n_steps_fitted"] = list(n)
    return out


def gradient_vs_horizon(args) -> dict:
    rows, previous = [], {}
    for n in args.horizons:
        row = gradient_point(n, args, previous)
        rows.append(row)
        for name in VARIANTS:
            if "seconds" in row[name]:
                previous[name] = {"n_steps": n, "seconds": row[name]["seconds"]}
            r = row[name]
            timing = f"{r['seconds']:.4g} s" if "seconds" in r else f"skipped: {r['skipped']}"
            log(
                f"n = {n:>6d} {name:16s} {r['temp_bytes'] / 1e6:10.3f} MB temp, "
                f"compile {r['compile_seconds']:.1f} s, run {timing}"
            )
        if "gradient_relative_difference" in row:
            diff = row["gradient_relative_difference"]
            log(f"n = {n:>6d} gradient relative difference {diff:.2e}")
    return {
        "problem": {
            "model": "control.presets.two_circles_start(T, 'bspline', 8): the two-circles ball, "
            "quintic B-spline control, masses at rest at θ = −π/2, ball at rest at the origin",
            "objective": f"Effort() + {PENALTY}*FinalPosition({TARGET}): reach-point's augmented "
            "Lagrangian at λ = 0, ρ = 20",
            "integrator": "RKMK4",
            "dt": DT,
            "dtype": "float64",
            "coefficients": "control.initial_guesses(problem, 2, seed=1)[1] (normal, sd 0.5)",
            "rollout": "control.rollout(..., save_every=n_steps, checkpoint=True|False)",
        },
        "repeats": args.repeats,
        "rows": rows,
        "fits": {name: fits(rows, name) for name in VARIANTS},
    }


# ------------------------------------------------------------------------------------------
# Multi-start throughput.


def _multi_jitted():
    """The jitted function `multi_start` calls (private; None if it has moved), so that the
    compile can be timed on its own: its compile cache is the one `multi_start` then uses."""
    module = sys.modules.get("jaxrigid.control.optimise")
    f = getattr(module, "_multi", None)
    return f if hasattr(f, "lower") else None


def multi_start_point(problem, settings, K, args, long_call) -> dict:
    p0s = control.initial_guesses(problem, K, seed=0)
    iterations = settings.n_outer * settings.n_inner
    row = {"K": K, "iterations": iterations, "load_average_before": load_average()}
    jitted = _multi_jitted()
    if jitted is not None:
        t = time.perf_counter()
        compiled = jitted.lower(problem, p0s, settings, None).compile()
        row["compile_seconds"] = time.perf_counter() - t
        row["compile_how"] = "AOT: jaxrigid.control.optimise._multi.lower(...).compile()"
        row |= memory_bytes(compiled)

    def call():
        return jax.block_until_ready(control.multi_start(problem, p0s, settings))

    t = time.perf_counter()
    result = call()
    row["first_call_seconds"] = time.perf_counter() - t
    if long_call:
        timing_wall = [row["first_call_seconds"]]
        row["timed"] = "the first call after the compile only (a long call)"
    else:
        timing = time_interleaved({"multi_start": call}, (), args.repeats, warmup=False)
        timing_wall = timing["multi_start"].wall
        row["timed"] = f"{args.repeats} calls after the first"
    if jitted is None:  # the first call compiled: estimate
        row["compile_seconds"] = row["first_call_seconds"] - float(np.median(timing_wall))
        row["compile_how"] = "estimated: first call minus the median timed call"
    seconds = float(np.median(timing_wall))
    row |= {
        "seconds": seconds,
        "seconds_all": timing_wall,
        "starts_x_iterations_per_s": K * iterations / seconds,
        "seconds_per_start": seconds / K,
        "spread": {k: float(v) for k, v in result.spread.items()},
        "residual_norm_best": float(result.best.residual_norm),
        "load_average_after": load_average(),
    }
    return row


def multi_start_throughput(args, t_start) -> dict:
    problem = control.get_problem("reach-point", dt=DT)
    settings = control.AugmentedLagrangian(n_outer=1, n_inner=5)
    rows, skipped = [], []
    for K in args.starts:
        long_call = False
        if rows:
            prev = rows[-1]
            call_s = prev["seconds_per_start"] * K  # linear in K (overheads make it less)
            long_call = call_s > args.long_call_seconds
            calls = 1 if long_call else 1 + args.repeats
            predicted = prev["compile_seconds"] + calls * call_s
            remaining = args.budget_seconds - (time.perf_counter() - t_start)
            if predicted > remaining:
                reason = (
                    f"predicted {predicted:.0f} s (compile as at K = {prev['K']}, {calls} "
                    f"call(s) of {call_s:.0f} s, linear in K) > the {remaining:.0f} s left of "
                    f"--budget-seconds {args.budget_seconds:.0f}"
                )
                skipped.append({"K": K, "reason": reason})
                log(f"K = {K}: skipped, {reason}")
                continue
        row = multi_start_point(problem, settings, K, args, long_call)
        rows.append(row)
        log(
            f"K = {K:>6d}: {row['seconds']:.4g} s, {row['starts_x_iterations_per_s']:.4g} "
            f"start-iterations/s, {row['seconds_per_start'] * 1e3:.3g} ms/start, "
            f"compile {row['compile_seconds']:.1f} s"
        )
    return {
        "problem": "control.get_problem('reach-point', dt=0.05): T = 5, 100 steps, RKMK4, "
        "float64, B-spline n_basis 8",
        "settings": "AugmentedLagrangian(n_outer=1, n_inner=5): 5 L-BFGS iterations (optax, "
        "zoom line search) per start",
        "starts": "control.initial_guesses(problem, K, seed=0): zero, then normal sd 0.5",
        "repeats": args.repeats,
        "rows": rows,
        "skipped": skipped,
        "largest_K_done": rows[-1]["K"] if rows else None,
    }


# ------------------------------------------------------------------------------------------


def print_tables(doc):
    g = doc["gradient_vs_horizon"]
    print("Gradient against horizon (RKMK4, dt = 0.05, float64):")
    print(f"{'n_steps':>8} {'variant':<17} {'temp MB':>10} {'compile s':>9} {'run s':>9}  rel.diff")
    for r in g["rows"]:
        for name in VARIANTS:
            v = r[name]
            run = f"{v['seconds']:>9.4g}" if "seconds" in v else f"{'skipped':>9}"
            diff = r.get("gradient_relative_difference", float("nan"))
            print(
                f"{r['n_steps']:>8} {name:<17} {v['temp_bytes'] / 1e6:>10.3f} "
                f"{v['compile_seconds']:>9.1f} {run}  {diff:.1e}"
            )
    for name, f in g["fits"].items():
        print(
            f"{name}: memory exponent {f.get('memory_exponent', float('nan')):.3f}, "
            f"run-time exponent {f.get('run_time_exponent', float('nan')):.3f}"
        )
    m = doc["multi_start"]
    print("\nMulti-start (reach-point, 100 steps, AL(1, 5)):")
    print(f"{'K':>6} {'compile s':>9} {'run s':>9} {'start-iter/s':>12} {'ms/start':>9}")
    for r in m["rows"]:
        print(
            f"{r['K']:>6} {r['compile_seconds']:>9.1f} {r['seconds']:>9.4g} "
            f"{r['starts_x_iterations_per_s']:>12.4g} {r['seconds_per_start'] * 1e3:>9.3g}"
        )
    for s in m["skipped"]:
        print(f"{s['K']:>6} skipped: {s['reason']}")


def main():
    p = parser(__doc__)
    p.add_argument("--horizons", default="100,1000,10000,100000", help="n_steps, comma list")
    p.add_argument("--starts", default="1,10,100,1000,10000", help="K, comma list")
    p.add_argument("--repeats", type=int, default=3, help="timed calls after the warm-up")
    p.add_argument("--max-call-seconds", type=float, default=120.0)
    p.add_argument("--max-memory-fraction", type=float, default=0.5)
    p.add_argument("--long-call-seconds", type=float, default=30.0)
    p.add_argument("--budget-seconds", type=float, default=1500.0)
    args = p.parse_args()
    if args.quick:  # smaller defaults; sizes given on the command line are kept
        defaults = {"horizons": "100,1000,10000,100000", "starts": "1,10,100,1000,10000"}
        quick = {"horizons": "100,1000", "starts": "1,10", "repeats": 1}
        for key, value in quick.items():
            if getattr(args, key) == defaults.get(key, 3):
                setattr(args, key, value)
    args.horizons = [int(float(x)) for x in args.horizons.split(",")]
    args.starts = [int(float(x)) for x in args.starts.split(",")]
    t_start = time.perf_counter()
    doc = {
        "note": "2 CPU cores shared with other jobs: read absolute times with the load "
        "averages recorded before and after each point",
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "gradient_vs_horizon": gradient_vs_horizon(args),
    }
    doc["multi_start"] = multi_start_throughput(args, t_start)
    print_tables(doc)
    name = f"control_gradients_{device_tag('float64', args.quick)}.json"
    log(f"wrote {write_results(args.out, name, doc, t_start)}")


if __name__ == "__main__":
    main()
