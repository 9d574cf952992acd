"""Do lineax / optimistix do our Newton's job as fast? Ensembles of small systems, float64.

(a) 10⁴ 3×3 linear solves under `vmap`: `_linalg.solve` (cofactors) against
    `lineax.linear_solve(MatrixLinearOperator(A), b, lineax.LU())` and `jnp.linalg.solve`;
(b) 10⁴ small Newton solves (3 unknowns, the nonlinear system of tests/test_newton.py at
    random parameters) under `vmap`: `Newton()` against `optimistix.root_find(...,
    optimistix.Newton(rtol, atol))` at the same tolerance (eps^(3/4)), default linear solver
    and with `lineax.LU()`.

Each is AOT-compiled, warmed up, then timed in interleaved rounds (median, each call ended by
`block_until_ready`); the answers are compared. Writes `results/newton_lineax_<device>.json`.

    python bench/newton_lineax.py [--quick] [--out DIR]
"""

import importlib.metadata
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as newton_block_diagonal.py (no effect at 3×3)

from _common import aot_compile, device_tag, enable_x64_for, parser, time_interleaved, write_results

enable_x64_for("float64")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import lineax as lx  # noqa: E402
import numpy as np  # noqa: E402
import optimistix as optx  # noqa: E402

from jaxrigid import _linalg  # noqa: E402
from jaxrigid.newton import Newton, default_tolerance  # noqa: E402

TOL = default_tolerance(jnp.float64)


def residual(x, p):
    r0, r1 = x[0] + 0.3 * jnp.sin(x[1]) - p[0], x[1] + 0.2 * x[0] * x[2] - p[1]
    return jnp.stack([r0, r1, x[2] + 0.1 * x[0] ** 2 - p[0] * p[1]])


def ours_newton(p):
    x, info = Newton().solve(lambda x: residual(x, p), jnp.zeros(3))
    return x, info.converged, info.iterations


def optx_newton(linear_solver):
    def solve(p):
        solver = optx.Newton(rtol=TOL, atol=TOL, linear_solver=linear_solver)
        sol = optx.root_find(residual, solver, jnp.zeros(3), args=p, throw=False, max_steps=20)
        return sol.value, sol.result == optx.RESULTS.successful, sol.stats["num_steps"]

    return solve


def lineax_lu(A, b):
    return lx.linear_solve(lx.MatrixLinearOperator(A), b, lx.LU()).value


def timed(fns, args, repeats):
    """({name: timing record}, {name: output}) of `jit(vmap(fn))` on `args`, AOT-compiled."""
    compiled = {k: aot_compile(jax.vmap(f), *args) for k, f in fns.items()}
    timings = time_interleaved({k: c for k, (c, _) in compiled.items()}, args, repeats)
    records = {
        k: t.record()
        | {"per_member_ns": t.seconds / len(args[0]) * 1e9, "compile_seconds": compiled[k][1]}
        for k, t in timings.items()
    }
    return records, {k: t.out for k, t in timings.items()}


def main():
    args = parser(__doc__).parse_args()
    t_start = time.perf_counter()
    members = 1000 if args.quick else 10_000
    repeats = 5 if args.quick else 30
    rng = np.random.default_rng(0)
    q1, _ = np.linalg.qr(rng.standard_normal((members, 3, 3)))
    A = jnp.asarray(q1 * rng.uniform(1, 10, (members, 1, 3)))  # singular values in [1, 10]
    b = jnp.asarray(rng.standard_normal((members, 3)))
    fns = {"jaxrigid_closed_form": _linalg.solve, "lineax_LU": lineax_lu}
    lin, lin_out = timed(fns | {"jnp_linalg_solve": jnp.linalg.solve}, (A, b), repeats)
    for k, x in lin_out.items():
        lin[k]["max_abs_diff_vs_jaxrigid"] = float(
            jnp.abs(x - lin_out["jaxrigid_closed_form"]).max()
        )

    p = jnp.asarray(np.array([0.7, -0.4]) + 0.3 * rng.standard_normal((members, 2)))
    newton, newton_out = timed(
        {
            "jaxrigid_Newton": ours_newton,
            "optimistix_Newton_auto": optx_newton(lx.AutoLinearSolver(well_posed=None)),
            "optimistix_Newton_LU": optx_newton(lx.LU()),
        },
        (p,),
        repeats,
    )
    x_ref = newton_out["jaxrigid_Newton"][0]
    for k, (x, ok, steps) in newton_out.items():
        newton[k]["all_converged"] = bool(jnp.all(ok))
        newton[k]["mean_iterations"] = float(jnp.mean(steps))
        newton[k]["max_abs_diff_vs_jaxrigid"] = float(jnp.abs(x - x_ref).max())
    for table in (lin, newton):
        base = next(iter(table.values()))["seconds"]
        for k, rec in table.items():
            rec["time_vs_jaxrigid"] = rec["seconds"] / base
            ms, ns = rec["seconds"] * 1e3, rec["per_member_ns"]
            print(f"{k:26s} {ms:9.3f} ms  {ns:8.1f} ns/member  ×{rec['time_vs_jaxrigid']:.1f}")
    versions = {m: importlib.metadata.version(m) for m in ("lineax", "optimistix")}
    record = {"versions": versions, "members": members, "linear_3x3": lin}
    name = f"newton_lineax_{device_tag(quick=args.quick)}.json"
    path = write_results(args.out, name, record | {"newton_3_unknowns": newton}, t_start)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
