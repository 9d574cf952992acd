"""`BlockDiagonal`'s diagonal blocks by `b` unrolled products or by one `vmap`ped product
(issue 31; `linear_solvers._diagonal_blocks`).

Newton with `BlockDiagonal()` on N weakly coupled bodies of `b` unknowns each
(`newton_block_diagonal.chain_residual`, at `b` components: y +
0.1 y³ + 0.2 sin(P y) − c + ε (y_{i+1} − y_{i−1}), ε = 1e-3), from y = 0 to convergence, one
jitted solve. Each round builds both forms afresh (`jax.clear_caches()`, the persistent cache
off), alternating in one process so that both see the same load: trace, lower + compile,
and the minimum of 5 runs; the minimum over `--rounds`. Also reports whether the two roots
agree to 64 eps (the tests' bound for a converged block iteration) and Newton's iterations.
Writes `results/block_columns_<device>.json`.

    python bench/block_columns.py [--sizes 2,3,4,5,6] [--bodies 10000,100000] [--rounds 3]
"""

from __future__ import annotations

import time

from _common import device_tag, enable_x64_for, log, parser, write_results

enable_x64_for("float64")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from newton_block_diagonal import EPS_COUPLING, chain_residual  # noqa: E402

from jaxrigid import linear_solvers  # noqa: E402
from jaxrigid.newton import Newton  # noqa: E402


def unrolled(lin, x):
    """Column j of every block from its own product, `b` of them."""
    basis = jnp.eye(x.shape[-1], dtype=x.dtype)
    cols = [lin(jnp.broadcast_to(e, x.shape)) for e in basis]
    return jnp.stack(cols, axis=-1)


def vmapped(lin, x):
    """The `b` columns from one product batched over the basis."""
    basis = jnp.eye(x.shape[-1], dtype=x.dtype)
    cols = jax.vmap(lambda e: lin(jnp.broadcast_to(e, x.shape)))(basis)
    return jnp.moveaxis(cols, 0, -1)


FORMS = {"unrolled": unrolled, "vmap": vmapped}


def measure(form, r, y0):
    """`(trace s, lower + compile s, min run s, root, iterations)` of a fresh build."""
    linear_solvers._diagonal_blocks = FORMS[form]
    jax.clear_caches()
    solve = jax.jit(lambda y: Newton(linear_solver=linear_solvers.BlockDiagonal()).solve(r, y))
    t0 = time.perf_counter()
    traced = solve.trace(y0)
    t1 = time.perf_counter()
    compiled = traced.lower().compile()
    t2 = time.perf_counter()
    y, info = jax.block_until_ready(compiled(y0))
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        jax.block_until_ready(compiled(y0))
        runs.append(time.perf_counter() - t)
    return t1 - t0, t2 - t1, min(runs), np.asarray(y), int(info.iterations)


def main():
    p = parser(__doc__)
    p.add_argument("--sizes", default="2,3,4,5,6", help="unknowns per body, b")
    p.add_argument("--bodies", default="10000,100000", help="N")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    sizes = [3] if args.quick else [int(s) for s in args.sizes.split(",")]
    bodies = [100] if args.quick else [int(n) for n in args.bodies.split(",")]
    rounds = 1 if args.quick else args.rounds
    jax.config.update("jax_enable_compilation_cache", False)
    kept = linear_solvers._diagonal_blocks
    t_start = time.perf_counter()
    rows = []
    try:
        for b in sizes:
            for n in bodies:
                c = np.random.default_rng(3).uniform(-1, 1, (n, b))
                r, y0 = chain_residual(jnp.asarray(c)), jnp.zeros((n, b))
                best = {}
                for _ in range(rounds):
                    for form in FORMS:
                        trace, compile_, run, y, its = measure(form, r, y0)
                        old = best.get(form, (np.inf, np.inf, np.inf, y, its))
                        best[form] = (min(old[0], trace), min(old[1], compile_),
                                      min(old[2], run), y, its)  # fmt: skip
                row = {"b": b, "bodies": n}
                for form, (trace, compile_, run, _, its) in best.items():
                    row[form] = {"trace_s": trace, "lower_compile_s": compile_, "run_s": run,
                                 "iterations": its}  # fmt: skip
                diff = float(np.max(np.abs(best["vmap"][3] - best["unrolled"][3])))
                row["roots_max_difference"] = diff
                row["roots_agree_64eps"] = diff <= 64 * np.finfo(np.float64).eps
                row["run_vmap_over_unrolled"] = row["vmap"]["run_s"] / row["unrolled"]["run_s"]
                rows.append(row)
                log(
                    f"b={b} N={n}: run {row['unrolled']['run_s'] * 1e3:.2f} / "
                    f"{row['vmap']['run_s'] * 1e3:.2f} ms (vmap/unrolled "
                    f"{row['run_vmap_over_unrolled']:.2f}), compile "
                    f"{row['unrolled']['lower_compile_s']:.2f} / "
                    f"{row['vmap']['lower_compile_s']:.2f} s, roots differ by {diff:.1e}"
                )
    finally:
        linear_solvers._diagonal_blocks = kept
    path = write_results(
        args.out,
        f"block_columns_{device_tag(quick=args.quick)}.json",
        {
            "config": {"rounds": rounds, "coupling": EPS_COUPLING, "runs_per_build": 5},
            "rows": rows,
        },
        t_start,
    )
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
