"""`jaxrigid control PROBLEM --feedback mpc`: the open-loop optimum and receding-horizon
control (`jaxrigid.control.mpc`) on the same disturbed scenarios (`jaxrigid.control.scenarios`).

    jaxrigid control PROBLEM --feedback {none,mpc,policy} [--scenarios K]
                             [--disturbance SIGMA] [--replan-every H] [--seed S] ...

`--feedback none` (the default) is the open-loop command of `cli.control`, unchanged; the
feedback options need `--feedback mpc` (or `policy`). `--feedback policy` evaluates a trained
policy (`cli.control_policy`). With `--feedback mpc` the command optimises the
open loop (the problem's settings, `--iterations`; on a B-spline whose knot spacing divides
`H`, `mpc.basis_size`), draws `K` scenarios of size `SIGMA` from `--seed`, replays the
open-loop optimum on them and runs MPC on them, then reports the medians and writes
`DIR/PROBLEM-mpc.npz` (both loops' paths, misses, efforts) and `DIR/PROBLEM-mpc.png` (the
scenarios' paths, closed loop against open loop). Exit status as the open-loop command's:
0 when the open-loop optimum meets the target on the model, 3 when it does not.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from .errors import RunError, UsageError, warn
from .output import jsonable, make_out_dir, save_with_plot

FEEDBACK = ("none", "mpc", "policy")
DEFAULT_SCENARIOS = 16
DEFAULT_DISTURBANCE = 0.05


def add_feedback_arguments(p) -> None:
    """The feedback options of `jaxrigid control`."""
    g = p.add_argument_group("feedback (the control closed on disturbed scenarios)")
    g.add_argument(
        "--feedback",
        choices=FEEDBACK,
        default="none",
        help="none: the open-loop optimum (default); mpc: receding-horizon control; "
        "policy: a trained policy (--policy FILE, from train-policy)",
    )
    g.add_argument(
        "--scenarios", type=int, help=f"disturbed scenarios (default {DEFAULT_SCENARIOS})"
    )
    g.add_argument(
        "--disturbance",
        type=float,
        help="σ: masses and principal moments scaled by 1 + σN(0, 1), kicks of σ rad/s "
        f"at T/4 and T/2 (default {DEFAULT_DISTURBANCE})",
    )
    g.add_argument("--replan-every", type=float, help="re-plan interval H (default T/10)")


def wants_feedback(args) -> bool:
    """Whether the run closes the loop by MPC; `UsageError` for feedback options without
    `--feedback mpc` or `policy`."""
    feedback = getattr(args, "feedback", "none")
    given = [
        flag
        for flag, name in (
            ("--scenarios", "scenarios"),
            ("--disturbance", "disturbance"),
            ("--replan-every", "replan_every"),
        )
        if getattr(args, name, None) is not None
    ]
    if feedback == "none" and given:
        raise UsageError(f"{', '.join(given)} need --feedback mpc or policy")
    return feedback == "mpc"


def _options(args):
    K = DEFAULT_SCENARIOS if args.scenarios is None else args.scenarios
    sigma = DEFAULT_DISTURBANCE if args.disturbance is None else args.disturbance
    if K < 1:
        raise UsageError(f"--scenarios must be a positive integer, got {K}")
    if not (math.isfinite(sigma) and sigma >= 0):
        raise UsageError(f"--disturbance must be a finite number ≥ 0, got {sigma}")
    if args.replan_every is not None and not (
        math.isfinite(args.replan_every) and args.replan_every > 0
    ):
        raise UsageError(f"--replan-every must be a positive number, got {args.replan_every}")
    if args.dt is not None and not (math.isfinite(args.dt) and args.dt > 0):
        raise UsageError(f"--dt must be a positive finite number, got {args.dt}")
    if args.starts < 1:
        raise UsageError(f"--starts must be a positive integer, got {args.starts}")
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    return K, sigma


def _problem(args, name: str, mode: str):
    """The problem on an MPC-ready B-spline, its method's name, and `H`."""
    from ..control import mpc, presets
    from ..control.scenarios import target_of
    from . import control_setup

    options = {"mode": mode} | ({} if args.dt is None else {"dt": args.dt})
    try:
        base = presets.get_problem(name, **options)
        target_of(base)
        method, integrator = control_setup.method(args.method, base.model)
        H = base.t_end / 10 if args.replan_every is None else args.replan_every
        per = base.t_end / H
        if abs(per - round(per)) > 1e-9 * per:
            raise ValueError(f"--replan-every {H:g} does not divide T = {base.t_end:g}")
        n = mpc.basis_size(base.t_end, H, getattr(base.control, "n_intervals", 1))
        problem = presets.get_problem(name, integrator=integrator, n_basis=n, **options)
        mpc.replan_steps(problem, H)
    except (TypeError, ValueError) as err:
        raise UsageError(f"problem {name}: {err}") from None
    return problem, method, H


def _summary(values) -> tuple[float, float]:
    values = np.asarray(values)
    return float(np.median(values)), float(np.percentile(values, 90))


def cmd_feedback(args) -> int:
    """`jaxrigid control PROBLEM --feedback mpc`."""
    import jax

    from ..control import mpc
    from ..control.optimise import multi_start, optimise
    from ..control.presets import initial_guesses
    from ..control.scenarios import draw_scenarios, replay, target_of
    from ..program_store import stored_programs
    from ..progress import OptimiserProgress, phase
    from ..xla_options import quick_build
    from . import control_setup
    from .control import NOT_CONVERGED
    from .control_plot import plot_feedback

    started = time.perf_counter()
    name = control_setup.problem_name(args.problem)
    mode = getattr(args, "mode", "prescribed")
    K, sigma = _options(args)
    problem, method, H = _problem(args, name, mode)
    settings = control_setup.settings(name, args.iterations, mode)
    out = Path(args.out)
    make_out_dir(out)
    m = mpc.replan_steps(problem, H)
    print(
        f"{name}: {method}, dt = {problem.dt:g}, MPC every {H:g} ({problem.n_steps // m - 1} "
        f"re-plans) on {K} scenario(s) of σ = {sigma:g}",
        file=sys.stderr,
        flush=True,
    )
    key = json.dumps(["control-mpc", name, mode, method, problem.dt, H, repr(settings)])
    # XLA's quick build for programs called many times (`xla_options`): the optimiser's
    # iteration, the re-plans and the plant's segments
    with stored_programs(key), quick_build("repeated"):
        t0 = time.perf_counter()
        p0s = initial_guesses(problem, args.starts, seed=args.seed)
        with OptimiserProgress(settings, starts=args.starts, desc=name, file=sys.stderr) as bar:
            if args.starts == 1:
                res = optimise(problem, p0s[0], settings, callback=bar)
            else:
                res = multi_start(problem, p0s, settings, problem.tolerance, callback=bar).best
            res = jax.block_until_ready(res)
        open_seconds = time.perf_counter() - t0
        if not bool(np.all(np.isfinite(np.asarray(res.coefficients)))):
            raise RunError(f"problem {name}: the optimisation produced non-finite coefficients")
        scenarios = draw_scenarios(args.seed, K, sigma, problem.model.n_masses, problem.t_end)
        with phase(f"{name}: the open-loop optimum on {K} scenario(s)"):
            opened = jax.block_until_ready(replay(problem, res.coefficients, scenarios))
        t0 = time.perf_counter()
        multipliers = mpc.Multipliers(res.multipliers, res.inequality_multipliers, res.penalty)
        with phase(f"{name}: MPC on {K} scenario(s)"):
            closed = jax.block_until_ready(
                mpc.run_mpc(problem, res.coefficients, multipliers, scenarios, H)
            )
        seconds = time.perf_counter() - t0
    converged = bool(res.converged)
    for loop, miss in (("closed", closed.miss), ("open", opened.miss)):
        if failed := int(np.sum(np.isnan(np.asarray(miss)))):
            warn(
                f"{failed} of {K} scenario(s) failed in {loop} loop (a plant step failed or its "
                "state left the finite numbers): their miss is NaN, the medians null"
            )
    cl_miss, cl_p90 = _summary(closed.miss)
    ol_miss, ol_p90 = _summary(opened.miss)
    report = jsonable(
        {
            "problem": name,
            "mode": mode,
            "method": method,
            "dt": problem.dt,
            "t_end": problem.t_end,
            "feedback": "mpc",
            "scenarios": K,
            "disturbance": sigma,
            "seed": args.seed,
            "replan_every": H,
            "replans": problem.n_steps // m - 1,
            "replan_iterations": mpc.replan_iterations(),
            "n_basis": problem.control.n_intervals,
            "closed_loop_miss": cl_miss,
            "closed_loop_miss_p90": cl_p90,
            "open_loop_miss": ol_miss,
            "open_loop_miss_p90": ol_p90,
            "closed_loop_effort": float(np.median(np.asarray(closed.effort))),
            "open_loop_effort": float(np.median(np.asarray(opened.effort))),
            "open_loop_cost": res.cost,
            "open_loop_infeasibility": res.residual_norm,
            "open_loop_converged": converged,
            "iterations": settings.n_outer * settings.n_inner,
            "open_loop_seconds": open_seconds,
            "seconds": seconds,
        }
    )
    arrays = {
        "closed_loop_x": np.asarray(closed.path),
        "open_loop_x": np.asarray(opened.path),
        "closed_loop_miss": np.asarray(closed.miss),
        "open_loop_miss": np.asarray(opened.miss),
        "closed_loop_effort": np.asarray(closed.effort),
        "open_loop_effort": np.asarray(opened.effort),
        "coefficients": np.asarray(res.coefficients),
        "target": np.asarray(target_of(problem)),
    }
    paths = save_with_plot(
        out / f"{name}-mpc.npz",
        arrays,
        out / f"{name}-mpc.png",
        lambda png: plot_feedback(png, report, arrays),
    )
    report["total_seconds"] = time.perf_counter() - started
    if args.json:
        print(json.dumps(report, allow_nan=False))
    else:
        print(
            f"{name}: MPC every {H:g} on {K} scenario(s), σ = {sigma:g}: median miss "
            f"{cl_miss:.3e} closed loop, {ol_miss:.3e} open loop (90th percentile "
            f"{cl_p90:.3e}, {ol_p90:.3e}); median effort {report['closed_loop_effort']:.4g} "
            f"closed, {report['open_loop_effort']:.4g} open; MPC {seconds:.1f} s"
        )
        print("wrote " + ", ".join(str(q) for q in paths))
    if converged:
        return 0
    print(
        f"jaxrigid: error: problem {name}: not converged: the open-loop optimum misses the "
        f"target (infeasibility {float(res.residual_norm):.3e}, tolerance "
        f"{problem.tolerance:g}); exit status {NOT_CONVERGED}",
        file=sys.stderr,
    )
    return NOT_CONVERGED
