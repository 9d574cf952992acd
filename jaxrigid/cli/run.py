"""`jaxrigid run`: the run's setup, its chunked integration (`jaxrigid.runs`), and the command
itself."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import runs
from ..progress import phase
from ..runs.planning import plan_chunks, saves_for
from . import output
from .chunks import CompileClock, Progress
from .errors import RunError, UsageError
from .lookups import find_case, find_method, parse_sets

FLAGS = ("--t-end", "--dt")  # how the command's messages name t_end and dt


# ----------------------------------------------------------------------------------------
# Setup


@dataclasses.dataclass
class RunSpec:
    case: Any
    method: str
    integrator: Any
    params: dict[str, float]
    dt: float
    t_end: float  # n_steps · dt up to round-off
    n_steps: int
    ensemble: int | None
    seed: int
    out: Path


def _run_spec(args) -> RunSpec:
    case = find_case(args.case)
    method, integrator = find_method(args.method or case.default_method, case)
    try:
        dt, t_end, n_steps = runs.step_plan(case, args.t_end, args.dt, FLAGS)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.ensemble is not None and args.ensemble < 1:
        raise UsageError(f"--ensemble must be a positive integer, got {args.ensemble}")
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    params = case.resolve(parse_sets(args.set, case))
    return RunSpec(
        case,
        method,
        integrator,
        params,
        dt,
        t_end,
        n_steps,
        args.ensemble,
        args.seed,
        Path(args.out),
    )


def program_key(spec: RunSpec) -> str:
    """What determines the run's programs besides jaxrigid's source and the arrays' shapes
    (`program_store`): the case, its parameters and the method build the model, state and
    integrator; the steps give the chunks."""
    fields = {"case": spec.case.name, "method": spec.method, "params": spec.params}
    fields.update(dt=spec.dt, n_steps=spec.n_steps, ensemble=spec.ensemble)
    return json.dumps(["run", fields], sort_keys=True, default=repr)


def _initial(spec: RunSpec):
    """`(model, state0)` of the case, with the ensemble's leading axis if asked."""
    try:
        model, state0 = spec.case.build_for(spec.integrator)(spec.params)
    except ValueError as err:
        raise UsageError(f"case {spec.case.name}: {err}") from None
    if spec.ensemble is not None:
        rng = np.random.default_rng(spec.seed)
        spread = spec.case.ensemble_spread
        # a perturbation that needs the model (Suslov's ξ: Ω projected onto ξ⊥)
        with_model = getattr(spec.case, "perturb_with_model", None)
        if with_model is not None:
            state0 = with_model(model, state0, rng, spread, spec.ensemble)
        else:
            state0 = spec.case.perturb(state0, rng, spread, spec.ensemble)
    return model, state0


# ----------------------------------------------------------------------------------------
# Integration


@dataclasses.dataclass
class Trajectory:
    ts: np.ndarray
    states: Any  # leaves (*ensemble, n_save, *event)
    final: Any
    max_iterations: int
    max_residual: float
    result: int  # the `RESULTS` code (cause) of the run's first failed step, 0 if none
    first_failure: int  # that step's index, −1 if none
    nonfinite: bool
    compile_seconds: float
    run_seconds: float
    observations: Any = None  # the case observer's final carry (None without one)

    @property
    def all_converged(self) -> bool:
        return self.result == 0


def _integrate(spec: RunSpec, model, state0, chunks, progress: Progress) -> Trajectory:
    """Run `chunks` of `spec` from `state0` (`runs.run_chunks`: each chunk continues the last
    one's state, solver state and the case observer's carry; non-finite members restarted and
    masked to NaN), timing the compilation apart. `simulate` refusing the run's input is bad
    input (`UsageError`); refusing a state the run reached, a failed run (`RunError`)."""
    observer = spec.case.observer(spec.params) if spec.case.observer is not None else None
    with CompileClock() as clock:
        start = time.perf_counter()
        progress.update(0)
        try:
            run = runs.run_chunks(
                spec.integrator,
                model,
                state0,
                spec.dt,
                chunks,
                observer=observer,
                on_chunk=progress.update,
            )
        except runs.ChunkInputError as err:
            if err.step == 0:
                raise UsageError(f"case {spec.case.name}: {err}") from None
            raise RunError(f"at t = {err.t:g}: {err}") from None
        wall = time.perf_counter() - start
    progress.close()
    first_failure, result = run.first_failure()
    return Trajectory(
        ts=run.ts,
        states=run.states,
        final=run.final_state,
        max_iterations=int(np.max(run.outcome.max_iterations)),
        max_residual=float(np.max(run.outcome.max_residual)),
        result=result,
        first_failure=first_failure,
        nonfinite=bool(run.restarted.any()),
        compile_seconds=clock.seconds,
        run_seconds=max(0.0, wall - clock.seconds),
        observations=run.observations,
    )


# ----------------------------------------------------------------------------------------
# The command


def cmd_run(args) -> int:
    """Integrate a case; write `.npz`, `.csv` and `.png`; print a summary or JSON. The
    model's invariants are split into those its exact flow conserves (their drift) and
    those the case changes (their range, with the work done on a driven ball)."""
    spec = _run_spec(args)
    output.make_out_dir(spec.out)
    model, state0 = _initial(spec)
    chunks = plan_chunks(spec.n_steps, saves_for(spec.ensemble))
    # a run of one chunk shows its bar only on a terminal (off one, its first line would come
    # with the end); the phases after it are reported everywhere (`phase`)
    progress = Progress(spec.n_steps, enabled=len(chunks) > 1 or sys.stderr.isatty())
    from ..program_store import stored_programs
    from ..xla_options import quick_build

    case = spec.case
    pointwise = None if case.pointwise is None else case.pointwise(model, spec.params)
    with stored_programs(program_key(spec)):
        traj = _integrate(spec, model, state0, chunks, progress)
        with phase("invariants and observables along the run"):
            # one program, run once over the saved states: XLA's quick build (`xla_options`)
            with quick_build():
                values, power, case_values = output.evaluate_along(
                    model, traj.ts, traj.states, pointwise
                )
            conserved, varying = output.split_invariants(model, values)
            varying.update(output.work_along(traj.ts, power))
            observables = case.observe(model, traj.ts, traj.states, spec.params, case_values)
            if traj.observations is not None:
                observables = {
                    **observables,
                    **spec.case.observation_observables(traj.observations, spec.params),
                }
            refine = getattr(spec.case, "refinement_observables", None)  # e.g. Q_II
            if refine is not None:
                extra = refine(spec.integrator, model, state0, spec.dt, spec.n_steps, spec.params)
                observables = {**observables, **extra}
    report = output.report(spec, traj, conserved, varying, observables)
    meta = output.metadata(spec, traj, chunks, conserved, varying)
    try:
        with phase(f"writing {spec.out}"):
            paths = output.write_outputs(spec, traj, conserved, varying, meta)
    except OSError as err:
        raise RunError(f"cannot write into {str(spec.out)!r}: {err}") from None
    output.warn_failures(spec, traj)
    if args.json:
        print(json.dumps(report, allow_nan=False))
    else:
        output.print_summary(report, traj, paths)
    return 0
