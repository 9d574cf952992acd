"""`jaxrigid run`: the run's setup, its chunked integration, and the command itself."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from . import output
from .chunks import (
    CompileClock,
    Progress,
    fresh_solver_state,
    nan_like,
    nonfinite_members,
    plan_chunks,
    saves_for,
    where_members,
)
from .errors import RunError, UsageError
from .lookups import find_case, find_method, parse_sets, positive

_INT32_MAX = 2**31 - 1
# How far t_end / dt may be from a whole number n of steps, relative to n. A decimal --t-end
# and --dt are each rounded to the nearest double (relative error ≤ eps/2) and their quotient
# is rounded once more, so an exact decimal multiple (1 / 0.1, 0.3 / 0.1, 5 / 0.005) gives
# t_end / dt within 1.5 eps·n of n (to first order; 360,000 random multiples of 18 decimal
# steps, n up to 2³¹, gave at most 1.0 eps·n). 8 eps leaves room for that, and what it
# accepts differs from n·dt by a few ulps of t_end: round-off, never a changed t_end.
_WHOLE_RTOL = 8 * sys.float_info.epsilon


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


def _number(x: float) -> str:
    """`x` as the user would write it: short when that is exact, else its full repr."""
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


def _multiple(dt: float, k: int) -> str:
    """`k · dt` in decimal (0.3 · 3 is 0.9, not 0.8999999999999999)."""
    return f"{float(Decimal(repr(dt)) * k):.15g}"


def whole_steps(t_end: float, dt: float, what: str | None = None) -> int:
    """The number of steps of `dt` that make `t_end` (both positive and finite). Bad input
    (`UsageError`) unless that is a whole number, up to decimal round-off (`_WHOLE_RTOL`);
    the message names the nearest valid values. `what` names `t_end` in it (default
    `--t-end T`)."""
    what = what or f"--t-end {_number(t_end)}"
    ratio = t_end / dt
    if not math.isfinite(ratio) or ratio > _INT32_MAX:
        raise UsageError(f"--t-end / --dt = {ratio:g} steps; at most {_INT32_MAX} are supported")
    n = round(ratio)
    if n >= 1 and abs(ratio - n) <= _WHOLE_RTOL * n:
        return n
    if ratio < 1:
        raise UsageError(
            f"{what} is shorter than one step of --dt {_number(dt)}; "
            f"nearest valid: {_multiple(dt, 1)}"
        )
    raise UsageError(
        f"{what} is not a whole number of steps of --dt {_number(dt)}; nearest valid: "
        f"{_multiple(dt, math.floor(ratio))} or {_multiple(dt, math.ceil(ratio))}"
    )


def step_plan(case, t_end: float | None, dt: float | None) -> tuple[float, float, int]:
    """`(dt, t_end, n_steps)` of a run of `case` for `--t-end`/`--dt` (None: the case's).

    A `--t-end` must be a whole number of steps of `--dt` (`whole_steps`); so must the case's
    default t_end with a `--dt` other than the case's. The case's own pair runs as `jaxrigid
    cases CASE` shows it: its default t_end may be nominal (the harmonic oscillator's 50π in
    steps of 0.01), and then runs the nearest whole number of steps, with t_end = n_steps·dt.
    """
    dt = positive(dt, case.default_dt, "--dt")
    if t_end is not None:
        t_end = positive(t_end, case.default_t_end, "--t-end")
        return dt, t_end, whole_steps(t_end, dt)
    t_end = positive(None, case.default_t_end, "--t-end")
    if dt != case.default_dt:
        what = f"the default --t-end {_number(t_end)} of case {case.name}"
        return dt, t_end, whole_steps(t_end, dt, what)
    n = max(1, round(t_end / dt))
    if abs(t_end / dt - n) > _WHOLE_RTOL * n:
        t_end = n * dt
    return dt, t_end, n


def _run_spec(args) -> RunSpec:
    case = find_case(args.case)
    method, integrator = find_method(args.method or case.default_method, case)
    dt, t_end, n_steps = step_plan(case, args.t_end, args.dt)
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


def _time_axis_op(fn, ndims, *trees):
    """Apply `fn(leaves..., axis)` with `axis` the time axis of each leaf."""
    import jax

    return jax.tree_util.tree_map(lambda e, *xs: fn(*xs, axis=xs[0].ndim - e - 1), ndims, *trees)


class _Chunks:
    """Accumulates the chunks' saved states, times and outcomes, and the run's first failed
    step (`first_failure`) with its cause (`result`)."""

    def __init__(self, ndims):
        self.ndims, self.ts, self.states, self.outcomes = ndims, [], [], []
        self.first_failure, self.result = -1, 0

    def add(self, sol, masked, offset: int) -> None:
        import jax

        states = jax.tree_util.tree_map(np.asarray, sol.states)
        if masked.any():
            states = where_members(masked, nan_like(states), states)
        first = 0 if not self.ts else 1  # later chunks repeat their initial state
        self.ts.append(np.asarray(sol.ts)[first:])
        self.states.append(
            _time_axis_op(
                lambda x, axis: np.take(x, np.arange(first, x.shape[axis]), axis=axis),
                self.ndims,
                states,
            )
        )
        outcome = jax.tree_util.tree_map(np.asarray, sol.outcome)
        if masked.any():  # restarted members: their outcomes are not the run's
            outcome = outcome._replace(
                max_iterations=np.where(masked, 0, outcome.max_iterations),
                max_residual=np.where(masked, 0.0, outcome.max_residual),
                result=np.where(masked, 0, outcome.result),
                first_failure=np.where(masked, -1, outcome.first_failure),
            )
        self.outcomes.append(outcome)
        f = np.ravel(outcome.first_failure)
        if self.first_failure < 0 and (f >= 0).any():
            step = f[f >= 0].min()
            member = np.flatnonzero(f == step)[0]  # of those failing first, the lowest index
            self.first_failure = offset + int(step)
            self.result = int(np.ravel(outcome.result)[member])

    def concatenated(self):
        joined = _time_axis_op(
            lambda *xs, axis: np.concatenate(xs, axis=axis), self.ndims, *self.states
        )
        return np.concatenate(self.ts), joined


def _simulate_chunk(
    spec: RunSpec,
    model,
    state,
    steps,
    save_every,
    done: int,
    observer=None,
    observations=None,
    solver_state=None,
):
    import jax

    from ..simulation import simulate

    # every chunk's inputs committed to one device, as the outputs of a stored program are
    # (`program_store`): one program for all chunks, not one for the first and one for the rest
    state, observations, solver_state = jax.device_put(
        (state, observations, solver_state), jax.devices()[0]
    )
    try:
        sol = simulate(
            spec.integrator,
            model,
            state,
            spec.dt,
            steps,
            t0=done * spec.dt,
            save_every=save_every,
            observer=observer,
            observations0=observations,
            solver_state0=solver_state,
        )
    except ValueError as err:
        if done == 0:
            raise UsageError(f"case {spec.case.name}: {err}") from None
        raise RunError(f"at t = {done * spec.dt:g}: {err}") from None
    return jax.block_until_ready(sol)


def _integrate(spec: RunSpec, model, state0, progress: Progress) -> Trajectory:
    """Run `simulate` chunk by chunk from `state0`, each chunk continuing the last's state and
    solver state (a method's warm starts, a compensated sum's rounding error): the run is the
    one `simulate` call it splits. A member whose state turned non-finite is restarted from
    `state0` (`simulate` rejects non-finite states), with a fresh solver state, and masked to
    NaN. The case's observer, if any, runs in every chunk, its carry continued from chunk to
    chunk; a restarted member's observations are NaN."""
    import jax

    ndims = model.state_event_ndims()
    acc = _Chunks(ndims)
    state, done, masked = state0, 0, np.zeros((), bool)
    observer = spec.case.observer(spec.params) if spec.case.observer is not None else None
    observations = solver_state = None
    with CompileClock() as clock:
        start = time.perf_counter()
        progress.update(0)
        for steps, save_every in plan_chunks(spec.n_steps, saves_for(spec.ensemble)):
            masked = masked | nonfinite_members(state, ndims)
            if masked.any():
                state = where_members(masked, state0, state)
                if solver_state is not None:
                    fresh = fresh_solver_state(spec, model, state, done)
                    solver_state = where_members(masked, fresh, solver_state)
            sol = _simulate_chunk(
                spec, model, state, steps, save_every, done, observer, observations, solver_state
            )
            acc.add(sol, masked, done)
            state, done, observations = sol.final_state, done + steps, sol.observations
            solver_state = sol.solver_state
            progress.update(done)
        wall = time.perf_counter() - start
    progress.close()
    final = jax.tree_util.tree_map(np.asarray, state)
    masked = masked | nonfinite_members(final, ndims)
    if masked.any():
        final = where_members(masked, nan_like(final), final)
    ts, states = acc.concatenated()
    outcomes = acc.outcomes
    observations = jax.tree_util.tree_map(np.asarray, observations)
    if masked.any():
        observations = jax.tree_util.tree_map(
            lambda x: np.where(
                np.reshape(masked, masked.shape + (1,) * (x.ndim - masked.ndim)), np.nan, x
            ),
            observations,
        )
    return Trajectory(
        ts=ts,
        states=states,
        final=final,
        max_iterations=int(max(np.max(n.max_iterations) for n in outcomes)),
        max_residual=float(max(np.max(n.max_residual) for n in outcomes)),
        result=acc.result,
        first_failure=acc.first_failure,
        nonfinite=bool(masked.any()),
        compile_seconds=clock.seconds,
        run_seconds=max(0.0, wall - clock.seconds),
        observations=observations,
    )


# ----------------------------------------------------------------------------------------
# The command


def cmd_run(args) -> int:
    """Integrate a case; write `.npz`, `.csv` and `.png`; print a summary or JSON."""
    spec = _run_spec(args)
    output.make_out_dir(spec.out)
    model, state0 = _initial(spec)
    chunks = plan_chunks(spec.n_steps, saves_for(spec.ensemble))
    progress = Progress(spec.n_steps, enabled=len(chunks) > 1)
    from ..program_store import stored_programs

    with stored_programs(program_key(spec)):
        traj = _integrate(spec, model, state0, progress)
    invariants = output.evaluate_invariants(model, traj.ts, traj.states)
    observables = spec.case.observables(model, traj.ts, traj.states, spec.params)
    if traj.observations is not None:
        observables = {
            **observables,
            **spec.case.observation_observables(traj.observations, spec.params),
        }
    refine = getattr(spec.case, "refinement_observables", None)  # e.g. Q_II (director cases)
    if refine is not None:
        extra = refine(spec.integrator, model, state0, spec.dt, spec.n_steps, spec.params)
        observables = {**observables, **extra}
    report = output.report(spec, traj, invariants, observables)
    try:
        paths = output.write_outputs(spec, traj, invariants)
    except OSError as err:
        raise RunError(f"cannot write into {str(spec.out)!r}: {err}") from None
    output.warn_failures(spec, traj)
    if args.json:
        print(json.dumps(report, allow_nan=False))
    else:
        output.print_summary(report, traj, paths)
    return 0
