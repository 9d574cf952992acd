"""Newton with the block-diagonal linear solver against dense LU, on N weakly coupled bodies.

Each body i has 3 unknowns y_i and the residual y + 0.1 y³ + 0.2 sin(P y) − c_i + ε (y_{i+1} −
y_{i−1}) (P a cyclic shift of the components, ε = 1e-3, a periodic chain: the test problem of
tests/test_linear_solvers.py). Times one compiled solve from y = 0 (median of interleaved
repeats after a warm-up, each ended by `block_until_ready`) for N = 10 … 10⁴ with
`BlockDiagonal()` (and 10⁵, where fixed per-iteration costs no longer hide the linear
growth) and, for N ≤ 1000 (its N² Jacobian and N³ LU), `DenseLU()`; checks
that the roots agree, and fits the exponent p of time ∝ N^p (target for block diagonal: ~1).
Writes `results/newton_block_diagonal_<device>.json`.

    python bench/newton_block_diagonal.py [--quick] [--out DIR]

OpenBLAS runs single-threaded unless OPENBLAS_NUM_THREADS is set: on this shared 2-core machine
its threads spin against the other work (a 300×300 LU took 92 ms threaded, 0.66 ms on one
thread), which would make dense LU look far worse than it is.
"""

import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy / jaxlib load OpenBLAS

from _common import device_tag, enable_x64_for, log, parser, time_compiled, write_results

enable_x64_for("float64")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrigid.linear_solvers import BlockDiagonal, DenseLU  # noqa: E402
from jaxrigid.newton import Newton  # noqa: E402

EPS_COUPLING = 1e-3


def chain_residual(c, eps=EPS_COUPLING):
    def r(y):
        own = y + 0.1 * y**3 + 0.2 * jnp.sin(jnp.roll(y, 1, axis=1)) - c
        return own + eps * (jnp.roll(y, -1, axis=0) - jnp.roll(y, 1, axis=0))

    return r


def solver(linear_solver, c):
    def solve(y0):
        y, info = Newton(linear_solver=linear_solver).solve(chain_residual(c), y0)
        return y, info.iterations, info.converged

    return solve


def fit_exponent(ns, seconds):
    return float(np.polyfit(np.log(ns), np.log(seconds), 1)[0])


def main():
    args = parser(__doc__).parse_args()
    t_start = time.perf_counter()
    sizes = [10, 100, 1000] if args.quick else [10, 100, 1000, 10_000, 100_000]
    dense_max = 100 if args.quick else 1000
    rows = []
    for n in sizes:
        c = jnp.asarray(np.random.default_rng(n).uniform(-1, 1, (n, 3)))
        y0 = jnp.zeros((n, 3))
        row = {"N": n, "unknowns": 3 * n}
        solvers = {"block_diagonal": BlockDiagonal()}
        if n <= dense_max:
            solvers["dense_lu"] = DenseLU()
        for name, ls in solvers.items():
            repeats = 3 if (name == "dense_lu" and n >= 1000) else 20
            timing = time_compiled(solver(ls, c), (y0,), repeats)
            y, iterations, converged = timing.out
            row[name] = timing.record() | {
                "iterations": int(iterations),
                "converged": bool(converged),
            }
            row[name + "_root"] = y
            log(f"N={n:6d} {name:15s} {timing.seconds * 1e3:10.3f} ms  {int(iterations)} updates")
        if "dense_lu" in row:
            diff = float(jnp.abs(row["block_diagonal_root"] - row["dense_lu_root"]).max())
            row["max_abs_root_difference"] = diff
            row["dense_over_block_time"] = (
                row["dense_lu"]["seconds"] / row["block_diagonal"]["seconds"]
            )
        row.pop("block_diagonal_root")
        row.pop("dense_lu_root", None)
        rows.append(row)

    block = [(r["N"], r["block_diagonal"]["seconds"]) for r in rows]
    dense = [(r["N"], r["dense_lu"]["seconds"]) for r in rows if "dense_lu" in r]
    summary = {
        # all sizes, and the large ones only (at N = 10 a solve is mostly fixed overhead)
        "block_diagonal_exponent_all": fit_exponent(*zip(*block)),
        "block_diagonal_exponent_N_ge_100": fit_exponent(*zip(*block[1:])),
        "block_diagonal_exponent_N_ge_1000": fit_exponent(*zip(*block[2:]))
        if len(block) > 3
        else None,
        "block_diagonal_exponent_N_ge_10000": fit_exponent(*zip(*block[3:]))
        if len(block) > 4
        else None,
        "dense_lu_exponent_N_ge_100": fit_exponent(*zip(*dense[1:])) if len(dense) > 2 else None,
    }
    for r in rows:
        line = f"N={r['N']:6d}  block {r['block_diagonal']['seconds'] * 1e3:9.3f} ms"
        if "dense_lu" in r:
            line += f"  dense {r['dense_lu']['seconds'] * 1e3:10.3f} ms"
            line += f"  ratio {r['dense_over_block_time']:8.1f}"
            line += f"  |Δroot| {r['max_abs_root_difference']:.1e}"
        print(line)
    print({k: None if v is None else round(v, 3) for k, v in summary.items()})
    blas_threads = os.environ["OPENBLAS_NUM_THREADS"]
    record = {
        "openblas_num_threads": blas_threads,
        "coupling_eps": EPS_COUPLING,
        "unknowns_per_body": 3,
        "rows": rows,
    } | summary
    path = write_results(
        args.out, f"newton_block_diagonal_{device_tag(quick=args.quick)}.json", record, t_start
    )
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
