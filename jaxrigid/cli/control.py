"""`jaxrigid control PROBLEM`: optimise the rolling ball's rail controls for a named problem
(`jaxrigid.control.presets`).

    jaxrigid control PROBLEM [--iterations N] [--starts K] [--method M] [--dt H]
                             [--mode prescribed|dynamic] [--out DIR] [--json]

Runs the augmented-Lagrangian optimiser (`jaxrigid.control.optimise`; `multi_start` when
`K > 1`, the best feasible start kept), shows progress on stderr (a `tqdm` bar,
`jaxrigid.progress.OptimiserProgress`: iterations done of `N`, augmented cost `L_A` (with
several starts the least over them), gradient norm; when stderr is not a terminal a line every
few seconds and always the final one), re-simulates the optimised control with a different
integrator at a 4× finer step (the implicit DLA — `DLA-midpoint` in dynamic mode — for the
RKMK methods, RKMK4 for those; saved at every fine step, so a tracking problem's re-simulated
miss is its max error over the fine times), and writes `DIR/PROBLEM.npz` (`t` every step,
`theta`, `theta_dot`, `theta_ddot` `(n_t, n_masses)`, `x` `(n_t, 3)`, `q`, `Omega`,
`coefficients`, `target`, the re-simulated `resimulated_t`, `resimulated_x`, and the iteration
histories; in dynamic mode also the rail forces `u`) and `DIR/PROBLEM.png` (the path against
the target and the obstacles, the controls θᵢ(t) and θ̈ᵢ(t), or u(t) in dynamic mode).

`--mode prescribed` (default): the controls are the rail positions θᵢ(t); `--mode dynamic`:
they are rail forces uᵢ(t) on masses that are degrees of freedom (`get_problem(...,
mode="dynamic")`, its own default step and settings), θ, θ̇ simulated and θ̈ from the
equations of motion.

`--iterations N` is the number of L-BFGS iterations in all, one gradient evaluation each
(`control.lbfgs`): the problem's inner count (`default_settings`) per multiplier update,
`ceil(N / inner)` updates (an `N` below the inner count: one update of `N`). `--starts K`:
the problem's own guess (masses at rest) and `K − 1` seeded draws (`initial_guesses`,
`--seed`). With `--json` it prints one JSON object on stdout. Exit statuses (`EXIT_HELP`):
0 when the target constraint is met within the problem's tolerance (`converged`: the
optimiser's infeasibility `|c|`, obstacle violations included, and the reported miss both at
most `tolerance`); 3 (`NOT_CONVERGED`) when it is not — the files, the JSON (`converged:
false`) and the npz (`converged`) are written all the same, and one line on stderr says by how
much it was missed; 2 for bad input and 1 for a run that could not be completed (one line on
stderr each).
"""

from __future__ import annotations

import functools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from ..progress import OptimiserProgress, phase
from ..xla_options import quick_build
from . import control_setup
from .control_feedback import add_feedback_arguments, cmd_feedback, wants_feedback
from .control_plot import plot_control
from .control_policy import add_policy_arguments, cmd_train_policy
from .control_policy_eval import cmd_policy
from .control_setup import REFINE
from .errors import RunError, UsageError
from .output import jsonable, make_out_dir, save_with_plot

CASE = "rolling-ball-two-circles"  # the ball every problem uses (its integrators apply)
NOT_CONVERGED = 3  # exit status: the target constraint is not met within its tolerance
EXIT_HELP = (
    "exit status: 0 the target constraint is met within the problem's tolerance (converged); "
    f"{NOT_CONVERGED} it is not (not converged: the outputs are still written, with "
    '"converged": false); 2 bad input; 1 the run could not be completed'
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "control",
        help="optimise the rolling ball's controls for a named problem",
        description="Optimise the rolling ball's rail controls for a named problem "
        "(reach-point, follow-circle, figure-eight, avoid-obstacles).",
        epilog=EXIT_HELP,
    )
    p.add_argument("problem", help="problem name (reach-point, follow-circle, ...)")
    p.add_argument(
        "--iterations",
        type=int,
        help="L-BFGS iterations in all, one gradient evaluation each (default: the problem's)",
    )
    p.add_argument("--starts", type=int, default=1, help="initial guesses optimised at once")
    p.add_argument("--method", help="integrator (default RKMK4)")
    p.add_argument("--dt", type=float, help="step size (default: the problem's mode's)")
    p.add_argument(
        "--mode",
        choices=("prescribed", "dynamic"),
        default="prescribed",
        help="controls: rail positions θ(t) (prescribed) or rail forces u(t) (dynamic)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random starts")
    p.add_argument("--out", default="jaxrigid-out", help="output directory")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_feedback_arguments(p)  # --feedback mpc: `control_feedback`
    add_policy_arguments(p)  # train-policy FAMILY, --feedback policy: `control_policy`


def cmd_control(args) -> int:
    import jax
    import jax.numpy as jnp

    from ..control.presets import get_problem, initial_guesses
    from ..program_store import stored_programs

    if args.problem.lower() == "train-policy":
        return cmd_train_policy(args)
    if wants_feedback(args):
        return cmd_feedback(args)
    if getattr(args, "feedback", "none") == "policy":
        return cmd_policy(args)
    started = time.perf_counter()  # the total the summary reports, building included
    name = control_setup.problem_name(args.problem)
    mode = getattr(args, "mode", "prescribed")
    if args.dt is not None and not (math.isfinite(args.dt) and args.dt > 0):
        raise UsageError(f"--dt must be a positive finite number, got {args.dt}")
    if args.starts < 1:
        raise UsageError(f"--starts must be a positive integer, got {args.starts}")
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    options = {"mode": mode} | ({} if args.dt is None else {"dt": args.dt})
    try:
        problem = get_problem(name, **options)  # its model picks the methods that apply
        method, integrator = control_setup.method(args.method, problem.model)
        problem = get_problem(name, integrator=integrator, **options)
    except (TypeError, ValueError) as err:
        raise UsageError(f"problem {name}: {err}") from None
    settings = control_setup.settings(name, args.iterations, mode)
    out = Path(args.out)
    make_out_dir(out)

    total = settings.n_outer * settings.n_inner
    p0s = initial_guesses(problem, args.starts, seed=args.seed)
    print(
        f"{name}: {method}, dt = {problem.dt:g}, {args.starts} start(s), {total} iterations "
        f"({settings.n_outer} × {settings.n_inner})",
        file=sys.stderr,
        flush=True,
    )
    # the problem, method, step and settings determine every program built here (stored
    # programs: a second process neither traces nor lowers them, `program_store`)
    key = json.dumps(["control", name, mode, method, problem.dt, repr(settings)], default=repr)
    with stored_programs(key):
        res, spread, seconds, traj, resim, re_method = _solve(
            problem, p0s, settings, args.starts, name, method
        )
    p = res.coefficients
    miss, resim_miss = float(problem.miss(traj)), float(problem.miss(resim))
    # the optimiser's infeasibility (obstacle violations included) and the miss reported
    # beside the tolerance: both within it, or the command exits NOT_CONVERGED
    converged = bool(res.converged) and miss <= problem.tolerance
    t = np.asarray(traj.ts)
    theta, theta_dot, theta_ddot, forces = _rails(problem, p, traj)

    report = {
        "problem": name,
        "mode": mode,
        "method": method,
        "dt": problem.dt,
        "t_end": problem.t_end,
        "iterations": total,
        "outer_iterations": settings.n_outer,
        "inner_iterations": settings.n_inner,
        "starts": args.starts,
        "cost_initial": res.cost_initial,
        "cost_final": res.cost,
        "infeasibility": res.residual_norm,
        "final_x": np.asarray(traj.x[-1]),
        "miss": miss,
        "miss_kind": "max tracking error" if problem.target_path() else "distance to target",
        "resimulated_miss": resim_miss,
        "resimulation": {"method": re_method, "dt": problem.dt / REFINE},
        "tolerance": problem.tolerance,
        "converged": converged,
        "seconds": seconds,
    }
    clearance = problem.obstacle_clearance(traj)
    if clearance is not None:
        fine_clearance = problem.obstacle_clearance(resim)
        report["obstacle_clearance"] = float(clearance[0])
        report["obstacle_clearance_guaranteed"] = float(clearance[1])
        report["resimulated_obstacle_clearance"] = float(fine_clearance[0])
        report["resimulated_obstacle_clearance_guaranteed"] = float(fine_clearance[1])
    if spread is not None:
        report["spread"] = spread
    report = jsonable(report)

    arrays = {
        "t": t,
        "theta": theta,
        "theta_dot": theta_dot,
        "theta_ddot": theta_ddot,
        "x": np.asarray(traj.x),
        "q": np.asarray(traj.q),
        "Omega": np.asarray(traj.Omega),
        "coefficients": np.asarray(p),
        "converged": np.asarray(converged),
        **({} if forces is None else {"u": forces}),
        "coefficients_initial": np.asarray(p0s[0] if spread is None else p0s[spread["best_index"]]),
        "resimulated_t": np.asarray(resim.ts),
        "resimulated_x": np.asarray(resim.x),
        "lagrangian_history": np.asarray(res.history["lagrangian"]).ravel(),
        "grad_norm_history": np.asarray(res.history["grad_norm"]).ravel(),
    }
    path = problem.target_path()
    if path is not None:
        arrays["target"] = np.asarray(jax.vmap(path)(jnp.asarray(t)))
    else:
        arrays["target"] = np.asarray(problem.target_point())
    with phase(f"{name}: writing {name}.npz and the plot"):
        paths = save_with_plot(
            out / f"{name}.npz",
            arrays,
            out / f"{name}.png",
            lambda png: plot_control(png, problem, report, arrays, REFINE),
        )
    report["total_seconds"] = time.perf_counter() - started

    if args.json:
        print(json.dumps(report, allow_nan=False))
    else:
        print(
            f"{name}: {method}, dt = {problem.dt:g}, {total} iterations, {args.starts} start(s): "
            f"optimised in {seconds:.1f} s (building included), "
            f"{report['total_seconds']:.1f} s in all"
        )
        # the cost is what is minimised subject to the target: from the initial guess (often
        # zero effort, far from the target) it rises while the infeasibility falls
        print(
            f"cost {report['cost_initial']:.6g} -> {report['cost_final']:.6g} while the "
            f"infeasibility went {float(res.residual_norm_initial):.3e} -> "
            f"{float(res.residual_norm):.3e}"
        )
        finite = math.isfinite(problem.tolerance)
        tol = f" (tolerance {problem.tolerance:g})" if finite else ""
        print(
            f"{report['miss_kind']}: {miss:.3e}{tol}; "
            f"re-simulated ({re_method}, dt/{REFINE}): {resim_miss:.3e}"
        )
        if clearance is not None:
            print(
                f"obstacle clearance: {report['obstacle_clearance']:.4f} at the steps, "
                f"{report['resimulated_obstacle_clearance']:.4f} re-simulated"
            )
        print("converged" if converged else "NOT converged")
        print("wrote " + ", ".join(str(q) for q in paths))
    if converged:
        return 0
    print(
        f"jaxrigid: error: problem {name}: not converged: the target constraint is not met "
        f"within its tolerance {problem.tolerance:g} (infeasibility "
        f"{float(res.residual_norm):.3e}, {report['miss_kind']} {miss:.3e}); exit status "
        f"{NOT_CONVERGED}",
        file=sys.stderr,
    )
    return NOT_CONVERGED


def _solve(problem, p0s, settings, starts: int, name: str, method: str):
    """Optimise from `p0s` (one start or `multi_start`), then simulate the optimum saved at
    every step with the method and re-simulate it with another at a 4× finer step."""
    import jax
    import jax.numpy as jnp

    from ..control.optimise import multi_start, optimise

    start = time.perf_counter()
    re_method, re_integrator = control_setup.resimulation_method(method, problem.model)
    # host arrays here and for the optimum below: a program's output is committed to its
    # device, an initial guess is not, and JAX builds a program anew for either kind
    runs = ((problem.integrator, 1), (re_integrator, REFINE))
    prebuild = control_setup.Prebuild(problem, np.asarray(p0s[0]), runs)
    spread: dict[str, np.ndarray | int] | None  # the starts' results, and the best one's index
    # XLA's quick builds (`xla_options`): the optimiser's iteration, called `n_outer` times,
    # with the cheaper fusion emitter; the two runs below, each run once, cheapest of all
    progress = OptimiserProgress(settings, starts=starts, desc=name, file=sys.stderr)

    def report(*args):  # the optimiser's program is built: the runs' build may start
        prebuild.start()
        progress(*args)

    with progress, quick_build("repeated"):
        if starts == 1:
            res = optimise(problem, p0s[0], settings, callback=report)
            spread = None
        else:
            ms = multi_start(problem, p0s, settings, tolerance=problem.tolerance, callback=report)
            res, spread = ms.best, {k: np.asarray(v) for k, v in ms.spread.items()}
            spread["best_index"] = int(ms.best_index)
        res = jax.block_until_ready(res)
        jax.effects_barrier()  # every progress callback has run before the bar closes
    seconds = time.perf_counter() - start
    p = res.coefficients
    if not bool(jnp.all(jnp.isfinite(p))):
        raise RunError(f"problem {name}: the optimisation produced non-finite coefficients")
    # one forward run per method, saved at every step (the miss and the clearance are read
    # from them: each distinct run is a compilation)
    prebuild.join()  # its programs are the two runs' below (a second build otherwise)
    with phase(f"{name}: simulating the optimum ({method}, saved every step)"), quick_build():
        traj = control_setup.dense(problem, np.asarray(p))
    with phase(f"{name}: re-simulating it ({re_method}, dt/{REFINE})"), quick_build():
        resim = control_setup.dense(problem, np.asarray(p), re_integrator, REFINE)
    return res, spread, seconds, traj, resim, re_method


def _rails(problem, p, traj):
    """`(θ, θ̇, θ̈, u)` at the trajectory's times, each `(n_t, n_masses)`: prescribed, from
    the control (`u` None); dynamic, θ and θ̇ simulated, θ̈ from the equations of motion
    (the unreduced model's `vector_field`) and the forces `u(t)` from the actuation."""
    import jax
    import jax.numpy as jnp

    ts = jnp.asarray(traj.ts)
    parametrised = problem.control.with_coefficients(p)
    if problem.mode == "prescribed":
        return (*(np.asarray(a) for a in _sample_program()(parametrised, ts)), None)
    from ..models.rolling_ball.unreduced import RollingBallUnreducedState

    model = problem.with_coefficients(p)
    states = RollingBallUnreducedState(traj.q, traj.Omega, traj.x, traj.theta, traj.theta_dot)
    rates = jax.vmap(model.vector_field)(ts, states)
    arrays = (traj.theta, traj.theta_dot, rates.theta_dot, _sample_program()(parametrised, ts))
    return tuple(np.asarray(a) for a in arrays)


@functools.cache
def _sample_program():
    """The control sampled at the saved times as one program (op by op it was about 30 small
    programs, each built in every new process)."""
    import equinox as eqx

    return eqx.filter_jit(lambda control, ts: control.sample(ts))
