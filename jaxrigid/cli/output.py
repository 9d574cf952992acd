"""`jaxrigid run`'s results: invariants, the report (JSON), the `.npz`/`.csv`/`.png` files,
warnings and the human summary."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import UsageError, warn

if TYPE_CHECKING:
    from .run import RunSpec, Trajectory


def evaluate_invariants(model, ts, states) -> dict[str, np.ndarray]:
    """`{name: (*ensemble, n_save)}` along the saved trajectory."""
    import jax
    import jax.numpy as jnp

    from ..diagnostics import invariants_along

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


def report(spec: RunSpec, traj: Trajectory, invariants, observables) -> dict:
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
    # numpy's stubs let `**arrays` reach `allow_pickle: bool`
    np.savez(path, t=traj.ts, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]


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
    """Invariant drifts (log scale) and body momentum against t; for a rolling ball (states
    with `q` and a centre `x`) its energy and the contact point's path. False without
    matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return False
    ts = traj.ts
    fig = Figure(figsize=(8, 7), layout="constrained")
    FigureCanvasAgg(fig)
    who = f", member 0 of {spec.ensemble}" if spec.ensemble is not None else ""
    if _is_rolling(traj.states) and "energy" in invariants:
        _draw_rolling(fig, spec, traj, invariants, who)
        fig.savefig(path, dpi=100)
        return True
    top, bottom = fig.subplots(2, 1, sharex=True)
    if _is_chain(traj.states):
        invariants = {k: v for k, v in invariants.items() if "momentum" not in k}
    for name, v in invariants.items():
        drift = np.abs(v - v[..., :1]).reshape(-1, ts.shape[0])[0]
        top.plot(ts[1:], drift[1:], label=name, lw=0.8)
    top.set_yscale("log", nonpositive="mask")
    top.set_ylabel("|I(t) − I(0)|")
    top.legend(fontsize="small", ncol=4)
    # the state's vector components (a rigid body's momentum Π; a Hamiltonian system's q and p)
    fields = ["Pi"] if hasattr(traj.states, "Pi") else list(traj.states._fields)
    if _is_chain(traj.states):  # a chain: each body's transverse displacement
        fields = []
        r = np.asarray(traj.states.r).reshape(-1, *traj.states.r.shape[-3:])[0]
        n_bodies = r.shape[-2]
        for j in range(n_bodies):
            label = f"body {j}" if n_bodies <= 12 else None
            bottom.plot(ts, r[:, j, 1] - r[0, j, 1], label=label, lw=0.8)
        bottom.set_ylabel("r_y(t) − r_y(0) of each body")
    for field in fields:
        values, column = np.asarray(getattr(traj.states, field)), ""
        n = ts.shape[0]
        labels = None
        if values.ndim >= 3 and values.shape[-2] != n and values.shape[-3] == n:
            rows, cols = values.shape[-2:]
            if rows == cols:  # a 3×3 matrix (RATTLE's R, P): its third column, entries i3
                values, column = values[..., 2], "3"
            else:  # one vector per body (coupled bodies' Pi (2, 3)): every component
                labels = [f"{field}{b + 1},{i + 1}" for b in range(rows) for i in range(cols)]
                values = values.reshape(values.shape[:-2] + (rows * cols,))
        values = values.reshape(-1, n, values.shape[-1])[0]
        for i in range(values.shape[-1]):
            label = labels[i] if labels else f"{field}{i + 1}{column}"
            bottom.plot(ts, values[:, i], label=label, lw=0.8)
    bottom.set_xlabel("t")
    if fields:
        bottom.set_ylabel(", ".join(fields))
    if bottom.get_legend_handles_labels()[0]:
        bottom.legend(fontsize="small", ncol=2)
    top.set_title(f"{spec.case.name}, {spec.method}, dt = {spec.dt:g}{who}")
    fig.savefig(path, dpi=100)
    return True


def _is_chain(states) -> bool:
    """A chain of bodies' states: centres `r (..., n_t, N+2, 3)` and momenta `p`."""
    fields = getattr(states, "_fields", ())
    return "r" in fields and "p" in fields and np.ndim(states.r) >= 3


def _is_rolling(states) -> bool:
    """A rolling body's states: an attitude quaternion `q` and a centre `x` (3 components)."""
    fields = getattr(states, "_fields", ())
    return "q" in fields and "x" in fields and np.shape(states.x)[-1:] == (3,)


def _draw_rolling(fig, spec: RunSpec, traj: Trajectory, invariants, who: str) -> None:
    """The rolling ball: its energy against t, and the contact point's path (x1, x2)."""
    ts, n = traj.ts, traj.ts.shape[0]
    top, bottom = fig.subplots(2, 1, height_ratios=(1, 2))
    energy = np.asarray(invariants["energy"]).reshape(-1, n)[0]
    top.plot(ts, energy, lw=0.8)
    top.set_xlabel("t")
    top.set_ylabel("energy")
    top.set_title(f"{spec.case.name}, {spec.method}, dt = {spec.dt:g}{who}")
    x = np.asarray(traj.states.x).reshape(-1, n, 3)[0]
    bottom.plot(x[:, 0], x[:, 1], lw=0.8)
    bottom.plot(x[:1, 0], x[:1, 1], "o", ms=4, label=f"t = {ts[0]:g}")
    bottom.plot(x[-1:, 0], x[-1:, 1], "s", ms=4, label=f"t = {ts[-1]:g}")
    bottom.set_aspect("equal", adjustable="datalim")
    bottom.set_xlabel("x1")
    bottom.set_ylabel("x2")
    bottom.set_title("contact point", fontsize="medium")
    bottom.legend(fontsize="small")


def make_out_dir(out: Path) -> None:
    """Create the output directory before the run (a bad `--out` is bad input)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out {str(out)!r} is not a usable directory: {err}") from None


def write_outputs(spec: RunSpec, traj: Trajectory, invariants) -> list[Path]:
    spec.out.mkdir(parents=True, exist_ok=True)
    name = spec.case.name
    paths = [spec.out / f"{name}.npz", spec.out / f"{name}_invariants.csv"]
    _write_npz(paths[0], traj)
    _write_csv(paths[1], spec, traj.ts, invariants)
    png = spec.out / f"{name}.png"
    if _write_png(png, spec, traj, invariants):
        paths.append(png)
    else:
        warn("matplotlib is not installed; no plot written (pip install 'jaxrigid[plot]')")
    return paths


def warn_failures(spec: RunSpec, traj: Trajectory) -> None:
    if not traj.all_converged:
        from ..results import RESULTS

        step = traj.first_failure
        warn(
            f"some steps failed (first at step {step}, t = {step * spec.dt:g}: "
            f"{RESULTS(traj.result).name}; max Newton residual {traj.max_residual:.3g}); "
            "try a smaller --dt"
        )
    if traj.nonfinite:
        warn("the state became non-finite (NaN/inf) in the run; try a smaller --dt")


def print_summary(report: dict, traj: Trajectory, paths: list[Path]) -> None:
    """The run in a few lines; a failed run names its first failure's cause and its advice."""
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
    if not traj.all_converged:
        from ..results import RESULTS

        cause, step = RESULTS(traj.result), traj.first_failure
        print(f"first failed step: {step} (t = {step * report['dt']:g}), {cause.name}")
        print(f"  {cause.advice}")
    print(f"time: compile {report['compile_seconds']:.2f} s, run {report['run_seconds']:.2f} s")
    print("wrote " + ", ".join(str(p) for p in paths))
