"""Experiment: where the time of the library's IMIDM goes (target (a) of issue 2).

Times, in one process with interleaved repeats (best kept), the torque-free body at Δt = 0.01
on 10⁴ members (`_harness.py`'s problem and runners) for

* the Rodrigues coefficients as they are (`exact`, every angle), without the 2π reduction
  (`no-reduction`, θ ≤ π only), as 5-term series (`5-term`, small angles only) and as constants
  (`constant`: wrong numbers, a lower bound on their cost): swapped in for
  `jaxrigid.lie.so3._rodrigues_coefficients` (with `jax.clear_caches()` after each swap: without
  it the jitted driver reuses its first trace and every variant times the same program — the
  error behind an earlier "the coefficients do not matter");
* the library's own cut series, `IMIDM(max_angle=0.5 or 0.1)`;
* the library's `Newton` (full and chord; also with 1 or 2 iterations peeled out of its loop),
  the chord one without `custom_root`, without
  `solve_on_branch`'s check, and loop-free (`max_steps = peel = 2`: no `while_loop`), against
  `FixedNewton`, a bare fixed-count iteration with no stopping rule, no loop, no
  `custom_root` (2 full or chord iterations, or 1 full iteration, which is *not* a converged
  solve: a lower bound);

and diffrax's fixed-step RK4 as the yardstick; the seconds to lower and compile each run are
recorded too. Writes `results/imidm_cost_breakdown_<device>.json`
and prints body-steps/s and the ratio to RK4. Not library code.

    python bench/imidm_cost_breakdown.py [--members 10000] [--steps 300] [--repeats 5]
    python bench/imidm_cost_breakdown.py --quick --out /tmp/b    # smoke test
"""

from _common import (
    aot_compile,
    device_tag,
    enable_x64_for,
    machine,
    parser,
    time_interleaved,
    write_results,
)

enable_x64_for("float64")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _harness import TorqueFree, diffrax_runner, jaxrigid_runner  # noqa: E402

import jaxrigid  # noqa: E402
from jaxrigid import _linalg  # noqa: E402
from jaxrigid import newton as nw  # noqa: E402
from jaxrigid.integrators import lie_group  # noqa: E402
from jaxrigid.lie import _rodrigues, so3  # noqa: E402

EXACT = so3._rodrigues_coefficients


def no_reduction(x, max_angle=None):
    y = 0.25 * x
    s = _rodrigues.poly(y, _rodrigues.SIN_SERIES)
    a = s * (1.0 - y * _rodrigues.poly(y, _rodrigues.VERSIN_SERIES))
    return a, 0.5 * s * s, _rodrigues.poly(x, _rodrigues.C_SERIES)


def five_terms(x, max_angle=None):
    return tuple(
        _rodrigues.poly(x, c[:5])
        for c in (_rodrigues.SIN_SERIES, _rodrigues.VERSIN_SERIES, _rodrigues.C_SERIES)
    )


def constant(x, max_angle=None):
    return jnp.ones_like(x), jnp.full_like(x, 0.5), jnp.full_like(x, 1 / 6)


COEFFICIENTS = {"exact": EXACT, "no-reduction": no_reduction, "5-term": five_terms}
COEFFICIENTS["constant"] = constant


class FixedNewton(eqx.Module):
    """`iterations` Newton (or chord) updates from the guess, nothing else."""

    iterations: int = eqx.field(static=True, default=2)
    chord: bool = eqx.field(static=True, default=False)

    def solve(self, f, x):
        J = nw.value_and_jacobian(f, x)[1] if self.chord else None
        for _ in range(self.iterations):
            r, J = (f(x), J) if self.chord else nw.value_and_jacobian(f, x)
            x = x - _linalg.solve(J, r)
        return x, nw.NewtonInfo(jnp.int32(self.iterations), jnp.zeros((), x.dtype), jnp.int32(0))


class WithoutCustomRoot(eqx.Module):
    """The library's iteration (`newton._newton_loop`) called directly, not via `custom_root`."""

    inner: jaxrigid.Newton

    def solve(self, f, x0):
        tol = nw.default_tolerance(x0.dtype)
        n = self.inner
        x, aux = nw._newton_loop(f, x0, tol, tol, n.max_steps, n.chord, n.peel)
        return x, nw.NewtonInfo(aux[0].astype(jnp.int32), aux[1], aux[2].astype(jnp.int32))


FAST = "Newton chord, max_steps = peel = 2 (no loop emitted)"
SOLVERS = {
    "Newton": jaxrigid.Newton(),
    "Newton chord": jaxrigid.Newton(chord=True),
    "Newton chord without custom_root": WithoutCustomRoot(jaxrigid.Newton(chord=True)),
    "Newton chord, max_steps = peel = 2 (no loop emitted)": jaxrigid.Newton(
        chord=True, max_steps=2, peel=2
    ),
    "Newton, peel = 1": jaxrigid.Newton(peel=1),
    "Newton, peel = 2": jaxrigid.Newton(peel=2),
    "Newton chord, peel = 1": jaxrigid.Newton(chord=True, peel=1),
    "Newton chord, peel = 2": jaxrigid.Newton(chord=True, peel=2),
    "fixed 2 full": FixedNewton(2),
    "fixed 2 chord": FixedNewton(2, chord=True),
    "fixed 1 full (not a converged solve)": FixedNewton(1),
}


def main():
    p = parser(__doc__)
    p.add_argument("--members", type=int, default=None, help="10000 (quick 1000)")
    p.add_argument("--steps", type=int, default=None, help="300 (quick 20)")
    p.add_argument("--repeats", type=int, default=None, help="5 (quick 1); the best is kept")
    args = p.parse_args()
    args.members = args.members or (1000 if args.quick else 10_000)
    args.steps = args.steps or (20 if args.quick else 300)
    args.repeats = args.repeats or (1 if args.quick else 5)
    dt, info, problem = 0.01, machine(), TorqueFree("float64")
    ens = problem.ensemble(args.members)
    xs = (ens.R, ens.Pi)

    runs, compile_seconds = {}, {}

    def add(name, jitted):
        runs[name], compile_seconds[name] = aot_compile(jitted, *xs)

    def imidm(integrator):
        return jaxrigid_runner(problem, integrator, dt, args.steps)

    add("diffrax RK4", diffrax_runner(problem, "RK4", dt, args.steps))
    for name, coefficients in COEFFICIENTS.items():
        so3._rodrigues_coefficients = coefficients  # traced now, so compiled in
        jax.clear_caches()  # else `simulate`'s jitted runner reuses the trace of the last swap
        for solver in ("Newton", "Newton chord", FAST):
            add(
                f"IMIDM, {solver}, coefficients {name}",
                imidm(jaxrigid.IMIDM(newton=SOLVERS[solver])),
            )
    so3._rodrigues_coefficients = EXACT
    jax.clear_caches()
    for max_angle in (0.5, 0.1):  # the library's own cut series (`max_angle`)
        for solver in ("Newton", FAST):
            integrator = jaxrigid.IMIDM(newton=SOLVERS[solver], max_angle=max_angle)
            add(f"IMIDM, {solver}, max_angle = {max_angle}", imidm(integrator))
    for solver in [s for s in SOLVERS if s not in ("Newton", "Newton chord", FAST)]:
        add(f"IMIDM, {solver}, coefficients exact", imidm(jaxrigid.IMIDM(newton=SOLVERS[solver])))
    # the branch check of `solve_on_branch` removed (IMIDM looks it up in its module)
    with_branch_check = lie_group.solve_on_branch
    lie_group.solve_on_branch = lambda newton, residual, guess, start: newton.solve(residual, guess)
    jax.clear_caches()
    add(
        "IMIDM, Newton chord without the branch check",
        imidm(jaxrigid.IMIDM(newton=SOLVERS["Newton chord"])),
    )
    lie_group.solve_on_branch = with_branch_check
    jax.clear_caches()
    add("IMID, Newton", imidm(jaxrigid.IMID()))

    # interleaved, so a change of load favours no variant; the best call is kept
    timings = time_interleaved(runs, xs, args.repeats, statistic="best")
    best = {name: t.seconds for name, t in timings.items()}
    body_steps = args.members * args.steps
    rows = {
        name: {
            "seconds": s,
            "body_steps_per_s": body_steps / s,
            "ratio_vs_diffrax_RK4": best["diffrax RK4"] / s,
            "compile_seconds": compile_seconds[name],
        }
        for name, s in best.items()
    }
    for name, r in rows.items():
        print(
            f"{name:60s} {r['body_steps_per_s']:9.3g}  x{r['ratio_vs_diffrax_RK4']:.2f}"
            f"  compile {r['compile_seconds']:.1f} s"
        )
    record = {"members": args.members, "steps": args.steps, "dt": dt, "repeats": args.repeats}
    record |= {"machine": info, "runs": rows}
    name = f"imidm_cost_breakdown_{device_tag(quick=args.quick)}.json"
    print("wrote", write_results(args.out, name, record))


if __name__ == "__main__":
    main()
