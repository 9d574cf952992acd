"""The `jaxrigid` command: list the built-in cases and methods, and run a case.

    jaxrigid cases [CASE]
    jaxrigid methods
    jaxrigid run CASE [--method M] [--dt H] [--t-end T] [--ensemble N] [--seed S]
                      [--set NAME=VALUE ...] [--out DIR] [--json]

`run` writes `<case>.npz`, `<case>_invariants.csv` and `<case>.png` into DIR; with `--json` it
prints exactly one JSON object on stdout (progress and warnings go to stderr). Bad input exits
with status 2 and one line `jaxrigid: error: ...` on stderr that says what would be valid.
The command computes in float64.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

MAX_SAVES = 2000  # at most about this many saved states per run
CHUNK_STEPS = 2000  # aim for chunks of about this many steps (progress-bar granularity)
MAX_CHUNKS = 50
_INT32_MAX = 2**31 - 1
_COMPILE_EVENTS = frozenset(
    {
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    }
)


class UsageError(Exception):
    """Bad input: reported as one line on stderr, exit status 2."""


class RunError(Exception):
    """A run that could not be completed (not bad input): one line on stderr, exit status 1."""


# ----------------------------------------------------------------------------------------
# Argument parsing


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="jaxrigid", description="Structure-preserving rigid-body integrators in JAX."
    )
    parser.add_argument("--version", action="version", version=f"jaxrigid {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{cases,methods,run}")

    p = sub.add_parser("cases", help="list the built-in cases, or show one")
    p.add_argument("case", nargs="?", help="a case name: show its description and parameters")

    sub.add_parser("methods", help="list the integrators and the cases they apply to")

    p = sub.add_parser("run", help="integrate a case and write its trajectory, table and plot")
    p.add_argument("case", help="case name (see `jaxrigid cases`)")
    p.add_argument("--method", help="integrator (default: the case's default method)")
    p.add_argument("--dt", type=float, help="step size (default: the case's)")
    p.add_argument("--t-end", type=float, help="final time (default: the case's)")
    p.add_argument("--ensemble", type=int, help="integrate N perturbed copies (member 0 exact)")
    p.add_argument("--seed", type=int, default=0, help="seed of the ensemble perturbation")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a parameter of the case (repeatable)",
    )
    p.add_argument("--out", default="jaxrigid-out", help="output directory")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `jaxrigid` command. Returns the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # argparse's own errors (status 2), --help and --version
        return exit_.code if isinstance(exit_.code, int) else 2

    import jax

    jax.config.update("jax_enable_x64", True)
    commands = {"cases": cmd_cases, "methods": cmd_methods, "run": cmd_run}
    try:
        return commands[args.command](args)
    except UsageError as err:
        _error_line(err)
        return 2
    except RunError as err:
        _error_line(err)
        return 1


def _error_line(err: Exception) -> None:
    message = " ".join(str(err).split())
    print(f"jaxrigid: error: {message}", file=sys.stderr)


def _warn(message: str) -> None:
    print(f"jaxrigid: warning: {message}", file=sys.stderr)


# ----------------------------------------------------------------------------------------
# Lookups


def _find_case(name: str):
    from .cases import CASES

    for key, case in CASES.items():
        if key.lower() == name.lower():
            return case
    raise UsageError(f"unknown case {name!r}; valid cases: {', '.join(CASES)}")


def _find_method(name: str, case) -> tuple[str, Any]:
    """Canonical name and a fresh integrator of `name` for `case`'s family."""
    from .integrators import METHODS_BY_FAMILY

    own = METHODS_BY_FAMILY.get(case.family, {})
    valid = ", ".join(own)
    for family, methods in METHODS_BY_FAMILY.items():
        for key, factory in methods.items():
            if key.lower() == name.lower():
                if family != case.family:
                    raise UsageError(
                        f"method {key} is for {family} cases and does not apply to case "
                        f"{case.name} ({case.family}); valid methods for it: {valid}"
                    )
                return key, factory()
    raise UsageError(f"unknown method {name!r} for case {case.name}; valid methods: {valid}")


def _parse_sets(items: list[str], case) -> dict[str, float]:
    """`NAME=VALUE` overrides, names matched case-insensitively to the case's parameters."""
    names = {k.lower(): k for k in case.parameters}
    valid = ", ".join(case.parameters)
    overrides = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise UsageError(
                f"--set {item!r} must be NAME=VALUE; parameters of {case.name}: {valid}"
            )
        key = name if name in case.parameters else names.get(name.lower())
        if key is None:
            raise UsageError(f"case {case.name} has no parameter {name!r}; valid: {valid}")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise UsageError(f"--set {key}={value!r}: the value must be a finite number")
        overrides[key] = number
    return overrides


def _positive(value: float | None, default: float, flag: str) -> float:
    value = default if value is None else value
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} must be a positive finite number, got {value}")
    return float(value)


# ----------------------------------------------------------------------------------------
# `jaxrigid cases`, `jaxrigid methods`


def cmd_cases(args) -> int:
    """List the cases, or describe one."""
    from .cases import CASES

    if args.case is None:
        width = max(map(len, CASES))
        for name, case in CASES.items():
            print(f"{name:<{width}}  {case.title}")
        return 0
    case = _find_case(args.case)
    n_steps = max(1, round(case.default_t_end / case.default_dt))
    print(f"{case.name}: {case.title}")
    print()
    print(case.description)
    print()
    print(f"reference:       {case.reference}")
    print(f"family:          {case.family} (see `jaxrigid methods`)")
    print(f"default method:  {case.default_method}")
    print(f"dt:              {case.default_dt:g}")
    print(f"t_end:           {case.default_t_end:g} ({n_steps} steps)")
    print(f"ensemble spread: {case.ensemble_spread:g}")
    print()
    print("parameters (override with --set NAME=VALUE):")
    width = max(map(len, case.parameters))
    for name, param in case.parameters.items():
        print(f"  {name:<{width}}  {param.default:<10g}  {param.doc}")
    return 0


def cmd_methods(args) -> int:
    """List the integrators of each family and the cases they apply to."""
    from .cases import CASES
    from .integrators import METHODS_BY_FAMILY

    for family, methods in METHODS_BY_FAMILY.items():
        cases = [name for name, case in CASES.items() if case.family == family]
        print(f"{family} methods (apply to: {', '.join(cases) or 'no built-in case'}):")
        rows = [_method_row(name, factory()) for name, factory in methods.items()]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            cells = [cell.ljust(w) for cell, w in zip(row, widths)]
            print("  " + "  ".join(cells + [row[4]]))
    return 0


def _method_row(name: str, integrator) -> list[str]:
    tableau = getattr(integrator, "tableau", None)  # MKRK with an explicit tableau
    implicit = integrator.implicit and not getattr(tableau, "explicit", False)
    kind = "implicit" if implicit else "explicit"
    keeps = ",".join(sorted(integrator.preserves)) or "-"
    return [name, f"order {integrator.order}", kind, f"keeps {keeps}", integrator.reference]


# ----------------------------------------------------------------------------------------
# `jaxrigid run`: setup


@dataclasses.dataclass
class RunSpec:
    case: Any
    method: str
    integrator: Any
    params: dict[str, float]
    dt: float
    n_steps: int
    ensemble: int | None
    seed: int
    out: Path

    @property
    def t_end(self) -> float:
        return self.n_steps * self.dt


def _run_spec(args) -> RunSpec:
    case = _find_case(args.case)
    method, integrator = _find_method(args.method or case.default_method, case)
    dt = _positive(args.dt, case.default_dt, "--dt")
    t_end = _positive(args.t_end, case.default_t_end, "--t-end")
    if args.ensemble is not None and args.ensemble < 1:
        raise UsageError(f"--ensemble must be a positive integer, got {args.ensemble}")
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    ratio = t_end / dt
    if not math.isfinite(ratio) or ratio > _INT32_MAX:
        raise UsageError(f"--t-end / --dt = {ratio:g} steps; at most {_INT32_MAX} are supported")
    params = case.resolve(_parse_sets(args.set, case))
    return RunSpec(
        case,
        method,
        integrator,
        params,
        dt,
        max(1, round(ratio)),
        args.ensemble,
        args.seed,
        Path(args.out),
    )


def _initial(spec: RunSpec):
    """`(model, state0)` of the case, with the ensemble's leading axis if asked."""
    try:
        model, state0 = spec.case.build(spec.params)
    except ValueError as err:
        raise UsageError(f"case {spec.case.name}: {err}") from None
    if spec.ensemble is not None:
        rng = np.random.default_rng(spec.seed)
        state0 = spec.case.perturb(state0, rng, spec.case.ensemble_spread, spec.ensemble)
    return model, state0


# ----------------------------------------------------------------------------------------
# Chunking: equal chunks (one compile) and at most one shorter tail chunk.


def _divisors(n: int) -> list[int]:
    """The divisors of `n`, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _smallest_divisor_from(n: int, k: int) -> int:
    """The smallest divisor of `n` that is at least `k` (`n` itself at worst)."""
    return next(d for d in _divisors(n) if d >= k)


def plan_chunks(n_steps: int) -> list[tuple[int, int]]:
    """`[(steps, save_every), ...]` covering `n_steps`: equal chunks (one compilation), then
    maybe a shorter tail; about `CHUNK_STEPS` steps a chunk, at most ~`MAX_SAVES` saves.

    The save stride is a divisor of `n_steps` when one lies within twice the smallest stride
    allowed, and the saves per chunk a divisor of the saves when one lies within a factor 2
    of the wanted number: then there is no tail.
    """
    s = -(-n_steps // MAX_SAVES)
    d = _smallest_divisor_from(n_steps, s)
    s = d if d <= 2 * s else s
    n_save = n_steps // s
    k = max(1, n_save // min(MAX_CHUNKS, max(1, n_steps // CHUNK_STEPS)))
    k = max([d for d in _divisors(n_save) if k // 2 <= d <= k] or [k])
    chunks = [(k * s, s)] * (n_steps // (k * s))
    tail = n_steps % (k * s)
    if tail:  # saved at most as densely as the other chunks
        chunks.append((tail, _smallest_divisor_from(tail, min(s, -(-tail // k)))))
    return chunks


class _Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal). The estimate of
    the time left uses the chunks after the first, which includes the compilation."""

    def __init__(self, total: int, enabled: bool, width: int = 30):
        self.total, self.width, self.first = total, width, None
        self.t0 = time.perf_counter()
        self.enabled = enabled and sys.stderr.isatty()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now, frac = time.perf_counter(), done / self.total
        if done == 0:
            note = "compiling"
        elif self.first is None:
            self.first, note = (done, now), ""
        else:
            rate = (done - self.first[0]) / max(now - self.first[1], 1e-9)
            note = f"~{(self.total - done) / rate:.0f} s left"
        bar = "#" * int(self.width * frac)
        sys.stderr.write(
            f"\r[{bar:<{self.width}}] {100 * frac:5.1f}%  step {done}/{self.total}"
            f"  {now - self.t0:.1f} s  {note:<16}"
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


class _CompileClock:
    """Wall time JAX spends tracing, lowering and compiling while active (union of spans)."""

    def __enter__(self):
        import jax.monitoring as monitoring

        self.spans: list[tuple[float, float]] = []
        self.durations = 0.0
        self._spans = hasattr(monitoring, "register_event_time_span_listener")
        if self._spans:
            monitoring.register_event_time_span_listener(self._on_span)
        else:  # older jax: durations (nested traces may be counted twice)
            monitoring.register_event_duration_secs_listener(self._on_duration)
        return self

    def __exit__(self, *exc):
        import jax.monitoring as monitoring

        if self._spans:
            monitoring.unregister_event_time_span_listener(self._on_span)
        else:
            monitoring.unregister_event_duration_listener(self._on_duration)

    def _on_span(self, event, start, end, **kwargs):
        if event in _COMPILE_EVENTS:
            self.spans.append((start, end))

    def _on_duration(self, event, duration, **kwargs):
        if event in _COMPILE_EVENTS:
            self.durations += duration

    @property
    def seconds(self) -> float:
        total, reach = self.durations, -math.inf
        for start, end in sorted(self.spans):
            total += max(0.0, end - max(start, reach))
            reach = max(reach, end)
        return total


# ----------------------------------------------------------------------------------------
# `jaxrigid run`: integration


@dataclasses.dataclass
class Trajectory:
    ts: np.ndarray
    states: Any  # leaves (*ensemble, n_save, *event)
    final: Any
    max_iterations: int
    max_residual: float
    all_converged: bool
    first_failure: int  # step index, −1 if none
    nonfinite: bool
    compile_seconds: float
    run_seconds: float


def _nonfinite_members(state, ndims) -> np.ndarray:
    """Per member (or scalar): any non-finite value in the state."""
    import jax

    def bad(x, e):
        x = np.asarray(x)
        return ~np.isfinite(x).all(axis=tuple(range(x.ndim - e, x.ndim)))

    flags = jax.tree_util.tree_leaves(jax.tree_util.tree_map(bad, state, ndims))
    return np.logical_or.reduce(flags)


def _where_members(mask, a, b, ndims):
    """Members of `a` where `mask`, else of `b` (leaves with `(*ensemble, ...)` axes)."""
    import jax

    def pick(x, y, e):
        x, y = np.asarray(x), np.asarray(y)
        m = np.reshape(mask, np.shape(mask) + (1,) * (x.ndim - np.ndim(mask)))
        return np.where(m, x, y)

    return jax.tree_util.tree_map(pick, a, b, ndims)


def _time_axis_op(fn, ndims, *trees):
    """Apply `fn(leaves..., axis)` with `axis` the time axis of each leaf."""
    import jax

    return jax.tree_util.tree_map(lambda e, *xs: fn(*xs, axis=xs[0].ndim - e - 1), ndims, *trees)


def _nan_like(tree):
    import jax

    return jax.tree_util.tree_map(lambda x: np.full(np.shape(x), np.nan), tree)


class _Chunks:
    """Accumulates the chunks' saved states, times and Newton summaries."""

    def __init__(self, ndims):
        self.ndims, self.ts, self.states, self.newton, self.first_failure = ndims, [], [], [], -1

    def add(self, sol, masked, offset: int) -> None:
        import jax

        states = jax.tree_util.tree_map(np.asarray, sol.states)
        if masked.any():
            states = _where_members(masked, _nan_like(states), states, self.ndims)
        first = 0 if not self.ts else 1  # later chunks repeat their initial state
        self.ts.append(np.asarray(sol.ts)[first:])
        self.states.append(
            _time_axis_op(
                lambda x, axis: np.take(x, np.arange(first, x.shape[axis]), axis=axis),
                self.ndims,
                states,
            )
        )
        newton = jax.tree_util.tree_map(np.asarray, sol.newton)
        if masked.any():  # restarted members: their outcomes are not the run's
            newton = newton._replace(
                max_iterations=np.where(masked, 0, newton.max_iterations),
                max_residual=np.where(masked, 0.0, newton.max_residual),
                all_converged=np.where(masked, True, newton.all_converged),
                first_failure=np.where(masked, -1, newton.first_failure),
            )
        self.newton.append(newton)
        f = self.newton[-1].first_failure
        if self.first_failure < 0 and (f >= 0).any():
            self.first_failure = offset + int(f[f >= 0].min())

    def concatenated(self):
        joined = _time_axis_op(
            lambda *xs, axis: np.concatenate(xs, axis=axis), self.ndims, *self.states
        )
        return np.concatenate(self.ts), joined


def _simulate_chunk(spec: RunSpec, model, state, steps, save_every, done: int):
    import jax

    from .simulate import simulate

    try:
        sol = simulate(
            spec.integrator, model, state, spec.dt, steps, t0=done * spec.dt, save_every=save_every
        )
    except ValueError as err:
        if done == 0:
            raise UsageError(f"case {spec.case.name}: {err}") from None
        raise RunError(f"at t = {done * spec.dt:g}: {err}") from None
    return jax.block_until_ready(sol)


def _integrate(spec: RunSpec, model, state0, progress: _Progress) -> Trajectory:
    """Run `simulate` chunk by chunk from `state0`. A member whose state turned non-finite is
    restarted from `state0` (`simulate` rejects non-finite states) and masked to NaN."""
    import jax

    ndims = model.state_event_ndims()
    acc = _Chunks(ndims)
    state, done, masked = state0, 0, np.zeros((), bool)
    with _CompileClock() as clock:
        start = time.perf_counter()
        progress.update(0)
        for steps, save_every in plan_chunks(spec.n_steps):
            masked = masked | _nonfinite_members(state, ndims)
            if masked.any():
                state = _where_members(masked, state0, state, ndims)
            sol = _simulate_chunk(spec, model, state, steps, save_every, done)
            acc.add(sol, masked, done)
            state, done = sol.final_state, done + steps
            progress.update(done)
        wall = time.perf_counter() - start
    progress.close()
    final = jax.tree_util.tree_map(np.asarray, state)
    masked = masked | _nonfinite_members(final, ndims)
    if masked.any():
        final = _where_members(masked, _nan_like(final), final, ndims)
    ts, states = acc.concatenated()
    newton = acc.newton
    return Trajectory(
        ts=ts,
        states=states,
        final=final,
        max_iterations=int(max(np.max(n.max_iterations) for n in newton)),
        max_residual=float(max(np.max(n.max_residual) for n in newton)),
        all_converged=bool(all(np.all(n.all_converged) for n in newton)),
        first_failure=acc.first_failure,
        nonfinite=bool(masked.any()),
        compile_seconds=clock.seconds,
        run_seconds=max(0.0, wall - clock.seconds),
    )


# ----------------------------------------------------------------------------------------
# `jaxrigid run`: results


def _invariants(model, ts, states) -> dict[str, np.ndarray]:
    """`{name: (*ensemble, n_save)}` along the saved trajectory."""
    import jax
    import jax.numpy as jnp

    from .diagnostics import invariants_along

    values = jax.jit(invariants_along)(model, jnp.asarray(ts), states)
    return {k: np.asarray(v) for k, v in values.items()}


def _jsonable(x):
    """Numbers, arrays and containers as JSON values; non-finite floats become `null`."""
    if isinstance(x, dict) or hasattr(x, "_asdict"):
        items = x._asdict().items() if hasattr(x, "_asdict") else x.items()
        return {str(k): _jsonable(v) for k, v in items}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "__array__") or isinstance(x, np.generic):
        x = np.asarray(x)
        return _jsonable(x.tolist()) if x.ndim else _jsonable(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _report(spec: RunSpec, traj: Trajectory, invariants, observables) -> dict:
    summary = {
        name: {
            "initial": v[..., 0],
            "final": v[..., -1],
            "max_abs_drift": np.max(np.abs(v - v[..., :1]), axis=-1),
        }
        for name, v in invariants.items()
    }
    return _jsonable(
        {
            "case": spec.case.name,
            "method": spec.method,
            "dt": spec.dt,
            "t_end": spec.t_end,
            "n_steps": spec.n_steps,
            "ensemble": spec.ensemble,
            "parameters": spec.params,
            "final_state": traj.final,
            "invariants": summary,
            "observables": observables,
            "newton": {
                "max_iterations": traj.max_iterations,
                "max_residual": traj.max_residual,
                "all_converged": traj.all_converged,
            },
            "compile_seconds": traj.compile_seconds,
            "run_seconds": traj.run_seconds,
        }
    )


def _write_npz(path: Path, traj: Trajectory) -> None:
    arrays = traj.states._asdict() if hasattr(traj.states, "_asdict") else {"state": traj.states}
    np.savez(path, t=traj.ts, **{k: np.asarray(v) for k, v in arrays.items()})


def _write_csv(path: Path, spec: RunSpec, ts, invariants) -> None:
    names = list(invariants)
    table = np.column_stack([ts] + [invariants[k].reshape(-1, ts.shape[0])[0] for k in names])
    who = f"; ensemble member 0 of {spec.ensemble}" if spec.ensemble is not None else ""
    with open(path, "w") as f:
        f.write(
            f"# jaxrigid run {spec.case.name}: method {spec.method}, dt {spec.dt:g}, "
            f"{spec.n_steps} steps{who}\n"
        )
        f.write(",".join(["t"] + names) + "\n")
        np.savetxt(f, table, delimiter=",", fmt="%.17g")


def _write_png(path: Path, spec: RunSpec, traj: Trajectory, invariants) -> bool:
    """Invariant drifts (log scale) and body momentum against t. False without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return False
    ts = traj.ts
    fig = Figure(figsize=(8, 7), layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    for name, v in invariants.items():
        drift = np.abs(v - v[..., :1]).reshape(-1, ts.shape[0])[0]
        top.plot(ts[1:], drift[1:], label=name, lw=0.8)
    top.set_yscale("log", nonpositive="mask")
    top.set_ylabel("|I(t) − I(0)|")
    top.legend(fontsize="small", ncol=4)
    Pi = np.asarray(getattr(traj.states, "Pi", np.zeros((0, 3))))
    Pi = Pi.reshape(-1, ts.shape[0], 3)[0] if Pi.size else np.zeros((ts.shape[0], 0))
    for i in range(Pi.shape[1]):
        bottom.plot(ts, Pi[:, i], label=f"Π{i + 1}", lw=0.8)
    bottom.set_xlabel("t")
    bottom.set_ylabel("body momentum Π")
    bottom.legend(fontsize="small")
    who = f", member 0 of {spec.ensemble}" if spec.ensemble is not None else ""
    top.set_title(f"{spec.case.name}, {spec.method}, dt = {spec.dt:g}{who}")
    fig.savefig(path, dpi=100)
    return True


def _writable(out: Path) -> None:
    """Create the output directory before the run (a bad `--out` is bad input)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out {str(out)!r} is not a usable directory: {err}") from None


def _write_outputs(spec: RunSpec, traj: Trajectory, invariants) -> list[Path]:
    spec.out.mkdir(parents=True, exist_ok=True)
    name = spec.case.name
    paths = [spec.out / f"{name}.npz", spec.out / f"{name}_invariants.csv"]
    _write_npz(paths[0], traj)
    _write_csv(paths[1], spec, traj.ts, invariants)
    png = spec.out / f"{name}.png"
    if _write_png(png, spec, traj, invariants):
        paths.append(png)
    else:
        _warn("matplotlib is not installed; no plot written (pip install 'jaxrigid[plot]')")
    return paths


def _warn_failures(spec: RunSpec, traj: Trajectory) -> None:
    if not traj.all_converged:
        step = traj.first_failure
        _warn(
            f"Newton did not converge in some steps (first at step {step}, "
            f"t = {step * spec.dt:g}; max residual {traj.max_residual:.3g}); "
            "try a smaller --dt"
        )
    if traj.nonfinite:
        _warn("the state became non-finite (NaN/inf) in the run; try a smaller --dt")


def _print_summary(report: dict, paths: list[Path]) -> None:
    ens = f", ensemble of {report['ensemble']}" if report["ensemble"] is not None else ""
    print(
        f"{report['case']}: {report['method']}, dt = {report['dt']:g}, "
        f"{report['n_steps']} steps to t = {report['t_end']:g}{ens}"
    )
    drifts = ", ".join(
        f"{k} {np.nanmax(np.asarray(v['max_abs_drift'], dtype=float)):.2e}"
        for k, v in report["invariants"].items()
    )
    print(f"max |drift|: {drifts}")
    nw = report["newton"]
    if nw["max_iterations"]:
        ok = "all converged" if nw["all_converged"] else "SOME FAILED"
        print(
            f"Newton: {ok}, at most {nw['max_iterations']} iterations, "
            f"max residual {nw['max_residual']:.2e}"
        )
    print(f"time: compile {report['compile_seconds']:.2f} s, run {report['run_seconds']:.2f} s")
    print("wrote " + ", ".join(str(p) for p in paths))


def cmd_run(args) -> int:
    """Integrate a case; write `.npz`, `.csv` and `.png`; print a summary or JSON."""
    spec = _run_spec(args)
    _writable(spec.out)
    model, state0 = _initial(spec)
    progress = _Progress(spec.n_steps, enabled=len(plan_chunks(spec.n_steps)) > 1)
    traj = _integrate(spec, model, state0, progress)
    invariants = _invariants(model, traj.ts, traj.states)
    observables = spec.case.observables(model, traj.ts, traj.states, spec.params)
    report = _report(spec, traj, invariants, observables)
    try:
        paths = _write_outputs(spec, traj, invariants)
    except OSError as err:
        raise RunError(f"cannot write into {str(spec.out)!r}: {err}") from None
    _warn_failures(spec, traj)
    if args.json:
        print(json.dumps(report, allow_nan=False))
    else:
        _print_summary(report, paths)
    return 0
