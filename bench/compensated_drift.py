"""What compensated summation buys: invariant drift of plain and compensated runs, per dtype.

The torque-free body (`krysl-torque-free`, |Ψ| = |Ω|Δt ≈ 0.094 at Δt = 0.1), an ensemble of
members perturbed by the case's `perturb` (spread 0.1), run by IMIDM and fEM from the plain
state and from `jaxrigid.compensate(state)`. Per run: the RMS over members of the maximum over
100 saved points of ‖RΠ − R₀Π₀‖ and of ‖RᵀR − 1‖, and the ratios compensated / plain. Several
seeds show the spread of those ratios (the bounds in tests/test_compensated.py rest on them).

    python bench/compensated_drift.py                    # float32 10⁴ and float64 10⁵ steps
    python bench/compensated_drift.py --seeds 2 --members 8
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import machine, to_json  # noqa: E402

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
            for label, state in (("plain", ens), ("compensated", jr.compensate(ens))):
                sol = jr.simulate(cls(), model, state, dt, steps, save_every=steps // 100)
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
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=16)
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--dt", type=float, default=0.1)
    p.add_argument(
        "--runs",
        default="float32:10000,float64:100000",
        help="dtype:steps pairs (steps a multiple of 100)",
    )
    p.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
    )
    a = p.parse_args()
    t0 = time.perf_counter()
    rows = []
    for item in a.runs.split(","):
        dtype, steps = item.split(":")
        rows += run(dtype, int(steps), a.members, a.seeds, a.dt)
    out = {
        "benchmark": "compensated_drift",
        "command": "python bench/compensated_drift.py",
        "case": "krysl-torque-free",
        "dt": a.dt,
        "members": a.members,
        "definition": "RMS over members of max over 100 saved points of |R Pi - R0 Pi0| and "
        "|R^T R - 1|_F; ratio = compensated / plain",
        "rows": rows,
        "machine": machine(),
        "total_seconds": time.perf_counter() - t0,
    }
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"compensated_drift_{jax.devices()[0].platform}.json")
    with open(path, "w") as fh:
        json.dump(to_json(out), fh, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
