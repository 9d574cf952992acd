"""Chaurasia (2012) Table 2.1: Poincaré-section points of the galactic orbit for 0 ≤ t ≤ 10⁶.

The case `galactic-orbit` (§2.4: a = 1.25, b = 1, c = 0.5, A = C = 1, Ω = 0.25,
q(0) = (2.5, 0, 0), p(0) = (0, 1.688, 0.2)) is integrated with each method and step of
Table 2.1, and the crossings of the half-plane q₂ = 0, q₁ > 0, q̇₂ > 0 are counted inside the
scan by `jaxrigid.observers.PoincareSection` (crossing located on the step's cubic Hermite
interpolant). The run is split into equal chunks (one compilation per row), the observer's
carry continued with `observations0`, so a progress line advances on stderr.

Count convention: `count` is the number of transits through the section during (0, t_end];
the initial point, which lies on the section (q₂ = 0, q₁ = 2.5, q̇₂ = p₂ − Ω q₁ = 1.063 > 0),
is not counted. `count_with_initial` = `count` + 1 adds it.

The implicit methods use the library's `Newton` (full Newton, stopping rule
`max|Δx| ≤ eps^¾ (1 + max|x|)`); its dense solves of more than 3 unknowns are LU with partial
pivoting (`jnp.linalg.solve`). (The rows in results/galactic_poincare_table.json were run with
an equivalent LAPACK-solved copy of that loop, from before the library switched to LU for
n > 3; they agree with the library over t ≤ 200: identical counts and crossing times.)

    python bench/galactic_poincare_table.py                 # all six rows (≈ 30–60 min, 1 core)
    python bench/galactic_poincare_table.py --rows e,f      # the RK4 rows only (≈ 2 min)
    python bench/galactic_poincare_table.py --t-end 1e4     # a quick check (writes *_quick.json)

Each finished row is merged into the JSON at once (under a file lock), so rows can run in
separate processes and a stopped run keeps the rows it finished.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sys
import tempfile
import time
from pathlib import Path

import jax
from _common import machine  # noqa: E402 (bench/ is the script's folder)

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import jaxrigid as jr  # noqa: E402
from jaxrigid.cases import hamiltonian as cases  # noqa: E402
from jaxrigid.integrators import HAMILTONIAN_METHODS  # noqa: E402
from jaxrigid.observers import PoincareSection  # noqa: E402

# Table 2.1 of the thesis (items, methods, orders, steps), printed counts withheld.
ROWS = {
    "a": ("gauss6", 6, 1 / 5),
    "b": ("gauss6", 6, 2 / 5),
    "c": ("radau5", 5, 1 / 10),
    "d": ("sungeng5", 5, 1 / 5),
    "e": ("rk4", 4, 1 / 40),
    "f": ("rk4", 4, 1 / 10),
}
N_CHUNKS = 100  # equal chunks per row: progress granularity, one compilation
MAX_POINTS = 1000  # section points stored per row (all are counted)


def make_integrator(method: str):
    return HAMILTONIAN_METHODS[method]()


class Progress:
    """One progress line on stderr: redrawn in place on a terminal, else a line every 10 %."""

    def __init__(self, label: str, total: int):
        self.label, self.total, self.t0 = label, total, time.perf_counter()
        self.tty, self.next_pct = sys.stderr.isatty(), 0

    def update(self, done: int, points: int) -> None:
        now, frac = time.perf_counter() - self.t0, done / self.total
        left = f"~{now / frac * (1 - frac):.0f} s left" if done else "compiling"
        bar = "#" * int(30 * frac)
        line = (
            f"{self.label} [{bar:<30}] {100 * frac:5.1f}% step {done}/{self.total}"
            f"  {now:.0f} s  {left}  points {points}"
        )
        if self.tty:
            sys.stderr.write("\r" + line + " " * 4)
        elif 100 * frac >= self.next_pct:
            sys.stderr.write(line + "\n")
            self.next_pct += 10
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def run_row(item: str, t_end: float, overrides: dict | None = None) -> dict:
    method, order, h = ROWS[item]
    case = next(c for c in cases.CASES if c.name == "galactic-orbit")
    params = case.resolve(overrides or {})
    model, state = case.build(params)
    integrator = make_integrator(method)
    n_steps = round(t_end / h)
    if n_steps % N_CHUNKS:
        raise ValueError(f"t_end/h = {n_steps} steps is not a multiple of {N_CHUNKS}")
    chunk = n_steps // N_CHUNKS
    section = PoincareSection(max_points=MAX_POINTS)
    H0 = float(model.energy(state.q, state.p))
    progress = Progress(f"{item}) {method} h={h:g}", n_steps)
    progress.update(0, 0)
    obs, energies, all_converged, max_iter, first_failure = None, [], True, 0, -1
    start = time.perf_counter()
    for k in range(N_CHUNKS):
        sol = jr.simulate(
            integrator,
            model,
            state,
            h,
            chunk,
            t0=k * chunk * h,
            save_every=chunk,
            observer=section,
            observations0=obs,
        )
        state, obs = sol.final_state, sol.observations
        energies.append(float(model.energy(state.q, state.p)))
        if all_converged and not bool(sol.outcome.all_converged):
            first_failure = k * chunk + int(sol.outcome.first_failure)
        all_converged &= bool(sol.outcome.all_converged)
        max_iter = max(max_iter, int(sol.outcome.max_iterations))
        progress.update((k + 1) * chunk, int(obs.count))
    progress.close()
    seconds = time.perf_counter() - start
    count = int(obs.count)
    stored = min(count, MAX_POINTS)
    dH = np.asarray(energies) - H0
    return {
        "item": item,
        "method": method,
        "order": order,
        "h": h,
        "n_steps": n_steps,
        "t_end": n_steps * h,
        "count": count,
        "count_with_initial": count + 1,
        "first_crossing_times": np.asarray(obs.times[: min(stored, 5)]).tolist(),
        "last_stored_point": np.asarray(obs.points[stored - 1]).tolist() if stored else None,
        "H0": H0,
        "H_end_minus_H0": float(dH[-1]),
        "max_abs_H_minus_H0_at_chunk_ends": float(np.max(np.abs(dH))),
        "H_minus_H0_at_chunk_ends": dH.tolist(),
        "newton_all_converged": all_converged,
        "newton_first_failure_step": first_failure,
        "newton_max_iterations": max_iter,
        "seconds": seconds,
        "us_per_step": 1e6 * seconds / n_steps,
        "solver": "library Newton (LU for n > 3)",
        "parameters": dict(params),
        "command": "python bench/galactic_poincare_table.py " + " ".join(sys.argv[1:]),
        "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def merge_row(path: Path, row: dict, header: dict) -> None:
    """Read–merge–write the JSON under an exclusive lock (rows may run in parallel)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = Path(tempfile.gettempdir()) / f"{path.name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(header)
        data.setdefault("rows", {})[row["item"]] = row
        data["rows"] = dict(sorted(data["rows"].items()))
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        tmp.replace(path)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default=",".join(ROWS), help="comma list of items a–f")
    p.add_argument("--t-end", type=float, default=1e6, help="horizon (Table 2.1: 1e6)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a case parameter (e.g. p2=1.6888370059044757, the p2 with H = 2); "
        "the default output name then ends in _<key>_<value>",
    )
    p.add_argument("--out", default=None, help="JSON path (default bench/results/...)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        raise SystemExit(f"unknown rows {unknown}; choose from {list(ROWS)}")
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key.strip()] = float(value)
    quick = args.t_end != 1e6
    suffix = "".join(f"_{k}_{v:g}" for k, v in overrides.items()) + ("_quick" if quick else "")
    default = f"galactic_poincare_table{suffix}.json"
    out = Path(args.out) if args.out else Path(__file__).resolve().parent / "results" / default
    header = {
        "description": "Chaurasia (2012) Table 2.1: Poincaré-section points (q2 = 0, q1 > 0, "
        "dq2/dt > 0) of the galactic orbit, case galactic-orbit, 0 <= t <= t_end",
        "count_convention": "count: transits during (0, t_end], the initial point (on the "
        "section) excluded; count_with_initial = count + 1",
        "command": "python bench/galactic_poincare_table.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(),
    }
    for item in rows:
        row = run_row(item, args.t_end, overrides)
        merge_row(out, row, header)
        print(
            f"{item}) {row['method']:<8} h = {row['h']:<6g} points {row['count']:>6} "
            f"(+1 with the initial point)  max|ΔH| {row['max_abs_H_minus_H0_at_chunk_ends']:.2e}"
            f"  {row['seconds']:.0f} s",
            flush=True,
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
