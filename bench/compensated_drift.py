"""What compensated summation buys: invariant drift of plain and compensated runs, per dtype.

The torque-free body (`krysl-torque-free`, |Ψ| = |Ω|Δt ≈ 0.094 at Δt = 0.1), an ensemble of
members perturbed by the case's `perturb` (spread 0.1), run by IMIDM and fEM, plain and with
`compensated=True`. Per run: the RMS over members of the maximum over
100 saved points of ‖RΠ − R₀Π₀‖ and of ‖RᵀR − 1‖, and the ratios compensated / plain. Several
seeds show the spread of those ratios (the bounds in tests/test_compensated.py rest on them).

    python bench/compensated_drift.py                    # float32 10⁴ and float64 10⁵ steps
    python bench/compensated_drift.py --seeds 2 --members 8
    python bench/compensated_drift.py --quick --out /tmp/b    # 10³ steps, 1 seed, 4 members
"""

from __future__ import annotations

import time

import jax
from _common import enable_x64_for, machine, parser, write_results

enable_x64_for("float64")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxrigid as jr  # noqa: E402
from jaxrigid.cases import get_case  # noqa: E402
from jaxrigid.integrators.lie_group import ForwardEulerMomentum  # noqa: E402

METHODS = {"IMIDM": jr.IMIDM, "fEM": ForwardEulerMomentum}


def drifts(sol):
    """RMS over members of the max over time of ‖RΠ − π₀‖ and ‖RᵀR − 1‖_F."""
    R = np.asarray(sol.states.R, np.float64)
    Pi = np.asarray(sol.states.Pi, np.float64)
    orth = np.linalg.norm(np.swapaxes(R, -1, -2) @ R - np.eye(3), axis=(-2, -1)).max(-1)
    pi = np.einsum("...ij,...j->...i", R, Pi)
    dpi = np.linalg.norm(pi - pi[:, :1], axis=-1).max(-1)
    return float(np.sqrt(np.mean(dpi**2))), float(np.sqrt(np.mean(orth**2)))


def run(dtype, steps, members, seeds, dt):
    case = get_case("krysl-torque-free")
    model, s0 = case.build(case.resolve())
    model = jr.RigidBody(jnp.asarray(model.inertia, dtype))
    rows = []
    for seed in range(seeds):
        ens = case.perturb(s0, np.random.default_rng(seed), 0.1, members)
        ens = jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), ens)
        for name, cls in METHODS.items():
            rec = {"dtype": dtype, "steps": steps, "seed": seed, "method": name}
            for label, integrator in (("plain", cls()), ("compensated", cls(compensated=True))):
                sol = jr.simulate(integrator, model, ens, dt, steps, save_every=steps // 100)
                rec[f"pi_drift_{label}"], rec[f"orthogonality_{label}"] = drifts(sol)
            rec["ratio_pi"] = rec["pi_drift_compensated"] / rec["pi_drift_plain"]
            rec["ratio_orthogonality"] = (
                rec["orthogonality_compensated"] / rec["orthogonality_plain"]
            )
            print(
                f"{dtype:8} {steps:>7} seed {seed} {name:6} ‖Δπ‖ {rec['pi_drift_plain']:.2e} → "
                f"{rec['pi_drift_compensated']:.2e} ({rec['ratio_pi']:.3f}), ‖RᵀR−1‖ "
                f"{rec['orthogonality_plain']:.2e} → {rec['orthogonality_compensated']:.2e} "
                f"({rec['ratio_orthogonality']:.2f})",
                flush=True,
            )
            rows.append(rec)
    return rows


def main():
    p = parser(__doc__)
    p.add_argument("--members", type=int, default=None, help="16 (quick 4)")
    p.add_argument("--seeds", type=int, default=None, help="4 (quick 1)")
    p.add_argument("--dt", type=float, default=0.1)
    p.add_argument(
        "--runs",
        default=None,
        help="dtype:steps pairs, steps a multiple of 100 (float32:10000,float64:100000; "
        "quick float32:1000,float64:1000)",
    )
    a = p.parse_args()
    a.members = a.members or (4 if a.quick else 16)
    a.seeds = a.seeds or (1 if a.quick else 4)
    a.runs = a.runs or ("float32:1000,float64:1000" if a.quick else "float32:10000,float64:100000")
    info = machine()
    t0 = time.perf_counter()
    rows = []
    for item in a.runs.split(","):
        dtype, steps = item.split(":")
        rows += run(dtype, int(steps), a.members, a.seeds, a.dt)
    out = {
        "case": "krysl-torque-free",
        "dt": a.dt,
        "members": a.members,
        "definition": "RMS over members of max over 100 saved points of |R Pi - R0 Pi0| and "
        "|R^T R - 1|_F; ratio = compensated / plain",
        "rows": rows,
        "machine": info,
    }
    name = f"compensated_drift_{jax.devices()[0].platform}{'_quick' if a.quick else ''}.json"
    print(f"wrote {write_results(a.out, name, out, t0)}")


if __name__ == "__main__":
    main()
