"""`jaxrigid run`'s results: the invariants split into the conserved and the varying ones,
the report (JSON), the metadata and the `.npz`/`.csv` files (the `.png`: `plots`), warnings
and the human summary."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import plots
from .errors import RunError, UsageError, warn

if TYPE_CHECKING:
    from .run import RunSpec, Trajectory


def evaluate_along(model, ts, states, case_pointwise=None) -> tuple[dict, dict, dict]:
    """`(invariants, power, case_values)` at every saved state, leaves `(*ensemble, n_save)`,
    in ONE program (each program costs its own build, and the power and the contact forces
    share the mass accelerations): the model's invariants, the power of what works on it
    (`work_rates`) and the case's `pointwise` function."""
    import jax

    from ..diagnostics import along
    from ..program_store import call

    rates = work_rates(model)

    def at(t, s):
        return {
            "invariants": model.invariants(t, s),
            "power": {k: f(t, s) for k, f in rates.items()},
            "case": {} if case_pointwise is None else case_pointwise(t, s),
        }

    # inside the command's `stored_programs` block a second process neither traces nor lowers it
    program = jax.jit(lambda ts, states: along(at, model, ts, states))
    out = jax.tree_util.tree_map(np.asarray, call(program, "along", (ts, states)))
    return out["invariants"], out["power"], out["case"]


def jsonable(x):
    """Numbers, arrays and containers as JSON values; non-finite floats become `null`."""
    if isinstance(x, dict) or hasattr(x, "_asdict"):
        items = x._asdict().items() if hasattr(x, "_asdict") else x.items()
        return {str(k): jsonable(v) for k, v in items}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if hasattr(x, "__array__") or isinstance(x, np.generic):
        x = np.asarray(x)
        return jsonable(x.tolist()) if x.ndim else jsonable(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def split_invariants(model, values: dict) -> tuple[dict, dict]:
    """`(conserved, varying)`: `values` (`evaluate_along`) split by what the model's
    exact flow conserves (`conserved_quantities`; `None`: all of them). A conserved quantity's
    drift is the method's error; a varying one changes with the physics (a driving, a torque,
    a held body), so only its range says something."""
    names = model.conserved_quantities()
    if names is None:
        return dict(values), {}
    conserved = {k: v for k, v in values.items() if k in names}
    return conserved, {k: v for k, v in values.items() if k not in names}


def work_rates(model) -> dict:
    """For a model whose energy is not conserved, where it can say the power its actuators
    inject (`actuator_power`, a rolling ball's; `external_power` for a nonzero external
    force): `{"actuator_work": actuator_power, ("external_work": external_power)}`, the rates
    of the work `W(t) = ∫₀ᵗ P dt` (the exact flow has `E(t) − E(0) = W(t)`)."""
    names = model.conserved_quantities()
    if names is None or "energy" in names or not hasattr(model, "actuator_power"):
        return {}
    from ..models.base import known_zero

    rates = {"actuator_work": model.actuator_power}
    if hasattr(model, "external_power") and not known_zero(model.external_force):
        rates["external_work"] = model.external_power
    return rates


def work_along(ts, power: dict) -> dict[str, np.ndarray]:
    """The work `W(t) = ∫₀ᵗ P dt`, `(*ensemble, n_save)`, of each power at the saved states
    (`evaluate_along`), integrated by `cumulative_integral`."""
    return {k: cumulative_integral(ts, p) for k, p in power.items()}


def cumulative_integral(ts, values) -> np.ndarray:
    """`∫_{t₀}^{t_k} v dt` for every `k` (last axis), each interval integrated exactly for
    the cubic through the four nearest samples (fewer if there are fewer): O(Δt⁴) for
    smooth `v`, on any grid (a run's last chunk may save at another stride)."""
    x = np.asarray(ts, dtype=float)
    y = np.asarray(values, dtype=float)
    n, m = x.shape[0], min(4, x.shape[0])
    if n < 2:
        return np.zeros_like(y)
    first = np.clip(np.arange(n - 1) - 1, 0, n - m)  # the window of each interval [k, k+1]
    window = first[:, None] + np.arange(m)  # (n − 1, m)
    h = np.diff(x)
    u = (x[window] - x[:-1, None]) / h[:, None]  # the window's times, the interval as [0, 1]
    V = u[:, :, None] ** np.arange(m)  # V[k, j, i] = u_j^i
    moments = 1.0 / np.arange(1, m + 1)  # ∫₀¹ u^i du
    rhs = np.broadcast_to(moments[:, None], (n - 1, m, 1))
    weights = np.linalg.solve(np.swapaxes(V, 1, 2), rhs)[..., 0]  # Vᵀw = moments
    steps = h * np.sum(weights * y[..., window], axis=-1)  # (..., n − 1)
    return np.concatenate([np.zeros_like(y[..., :1]), np.cumsum(steps, axis=-1)], axis=-1)


def report(spec: RunSpec, traj: Trajectory, conserved, varying, observables) -> dict:
    """The JSON object: `invariants` the conserved quantities' drift (`initial`, `final`,
    `max_abs_drift`); `observables` the varying ones' range (`initial`, `final`, `min`,
    `max` over the run), then the case's own observables. Per ensemble member."""
    drifts = {
        name: {
            "initial": v[..., 0],
            "final": v[..., -1],
            "max_abs_drift": np.max(np.abs(v - v[..., :1]), axis=-1),
        }
        for name, v in conserved.items()
    }
    ranges = {
        name: {
            "initial": v[..., 0],
            "final": v[..., -1],
            "min": np.min(v, axis=-1),
            "max": np.max(v, axis=-1),
        }
        for name, v in varying.items()
    }
    return jsonable(
        {
            "case": spec.case.name,
            "method": spec.method,
            "dt": spec.dt,
            "t_end": spec.t_end,
            "n_steps": spec.n_steps,
            "ensemble": spec.ensemble,
            "parameters": spec.params,
            "final_state": traj.final,
            "invariants": drifts,
            "observables": {**ranges, **observables},
            "newton": {
                "max_iterations": traj.max_iterations,
                "max_residual": traj.max_residual,
                "all_converged": traj.all_converged,
            },
            "compile_seconds": traj.compile_seconds,
            "run_seconds": traj.run_seconds,
        }
    )


def _number(x: float) -> str:
    """`x` as the command line takes it back exactly (Python's shortest round trip)."""
    return repr(float(x)) if not float(x).is_integer() else f"{x:g}"


def command_line(spec: RunSpec) -> str:
    """The `jaxrigid run` command that repeats this run (without `--out`): its case, method,
    step, horizon, ensemble and seed, and the parameters that differ from the defaults."""
    words = ["jaxrigid", "run", spec.case.name, "--method", spec.method]
    words += ["--dt", _number(spec.dt), "--t-end", _number(spec.t_end)]
    if spec.ensemble is not None:
        words += ["--ensemble", str(spec.ensemble), "--seed", str(spec.seed)]
    defaults = spec.case.resolve()
    for name, value in spec.params.items():
        if value != defaults[name]:
            words += ["--set", f"{name}={_number(value)}"]
    return " ".join(words)


def metadata(spec: RunSpec, traj: Trajectory, chunks, conserved, varying) -> dict:
    """What the saved files carry about the run: case, method, steps and saves, parameters,
    ensemble (size, seed, spread; member 0 is the unperturbed case), the conserved and the
    varying quantities' names, the float type, the versions, and the command that repeats
    it."""
    import jax

    import jaxrigid

    strides = sorted({every for _, every in chunks})
    leaf = jax.tree_util.tree_leaves(traj.states)[0]
    ensemble = spec.ensemble is not None
    return {
        "case": spec.case.name,
        "method": spec.method,
        "dt": spec.dt,
        "t_end": spec.t_end,
        "n_steps": spec.n_steps,
        "save_every": strides[0] if len(strides) == 1 else strides,
        "n_saved": int(np.shape(traj.ts)[0]),
        "parameters": spec.params,
        "ensemble": spec.ensemble,
        "seed": spec.seed if ensemble else None,
        "spread": spec.case.ensemble_spread if ensemble else None,
        "conserved": list(conserved),
        "not_conserved": list(varying),
        "dtype": str(np.asarray(leaf).dtype),
        "versions": {"jaxrigid": jaxrigid.__version__, "jax": jax.__version__},
        "command": command_line(spec),
    }


def _write_npz(path: Path, traj: Trajectory, meta: dict) -> None:
    arrays = traj.states._asdict() if hasattr(traj.states, "_asdict") else {"state": traj.states}
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    # numpy's stubs let `**arrays` reach `allow_pickle: bool`
    np.savez(path, t=traj.ts, **arrays, metadata=np.asarray(json.dumps(meta)))  # type: ignore[arg-type]


def _write_csv(path: Path, spec: RunSpec, ts, conserved, varying, meta: dict) -> None:
    """Member 0's time series (the unperturbed case of an ensemble): `t`, the conserved
    quantities, then the varying ones; commented lines first, the last the metadata (JSON)."""
    series = {**conserved, **varying}
    names = list(series)
    table = np.column_stack([ts] + [series[k].reshape(-1, ts.shape[0])[0] for k in names])
    who = f"; ensemble member 0 of {spec.ensemble}" if spec.ensemble is not None else ""
    with open(path, "w") as f:
        f.write(
            f"# jaxrigid run {spec.case.name}: method {spec.method}, dt {spec.dt:g}, "
            f"{spec.n_steps} steps{who}\n"
        )
        f.write(f"# conserved (their drift is the method's error): {', '.join(conserved)}\n")
        f.write(f"# not conserved by this case (they vary): {', '.join(varying) or '-'}\n")
        f.write(f"# metadata: {json.dumps(meta)}\n")
        f.write(",".join(["t"] + names) + "\n")
        np.savetxt(f, table, delimiter=",", fmt="%.17g")


def save_with_plot(npz: Path, arrays: dict, png: Path, draw) -> list[Path]:
    """`arrays` into `npz` and the plot `draw(png)` (False: matplotlib is missing, which is
    warned of): the paths written. Writing that fails is a `RunError` naming the folder."""
    paths = [npz, png]
    try:
        np.savez(npz, **arrays)
        if not draw(png):
            warn("matplotlib is not installed; no plot written (pip install 'jaxrigid[plot]')")
            paths.pop()
    except OSError as err:
        raise RunError(f"cannot write into {str(npz.parent)!r}: {err}") from None
    return paths


def make_out_dir(out: Path) -> None:
    """Create the output directory before the run (a bad `--out` is bad input)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out {str(out)!r} is not a usable directory: {err}") from None


def write_outputs(spec: RunSpec, traj: Trajectory, conserved, varying, meta) -> list[Path]:
    spec.out.mkdir(parents=True, exist_ok=True)
    name = spec.case.name
    paths = [spec.out / f"{name}.npz", spec.out / f"{name}_invariants.csv"]
    _write_npz(paths[0], traj, meta)
    _write_csv(paths[1], spec, traj.ts, conserved, varying, meta)
    png = spec.out / f"{name}.png"
    if plots.write_png(png, spec, traj, conserved, varying):
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


def _extreme(values, reduce) -> float:
    """`reduce` (`np.nanmax`, `np.nanmin`) over the members; NaN where every one is null."""
    x = np.asarray(values, dtype=float)
    return float(reduce(x)) if np.any(np.isfinite(x)) else math.nan


def print_summary(report: dict, traj: Trajectory, paths: list[Path]) -> None:
    """The run in a few lines; a failed run names its first failure's cause and its advice."""
    ens = f", ensemble of {report['ensemble']}" if report["ensemble"] is not None else ""
    print(
        f"{report['case']}: {report['method']}, dt = {report['dt']:g}, "
        f"{report['n_steps']} steps to t = {report['t_end']:g}{ens}"
    )
    drifts = ", ".join(
        f"{k} {_extreme(v['max_abs_drift'], np.nanmax):.2e}"
        for k, v in report["invariants"].items()
    )
    print(f"max |drift| of invariants: {drifts or 'none (this case conserves none)'}")
    ranges = ", ".join(
        f"{k} [{_extreme(v['min'], np.nanmin):.3g}, {_extreme(v['max'], np.nanmax):.3g}]"
        for k, v in report["observables"].items()
        if isinstance(v, dict) and {"min", "max"} <= set(v)
    )
    if ranges:
        print(f"range of observables: {ranges}")
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
