"""Accuracy at t = 100 and drift over every step: the IMIDM settings, IMID, diffrax RK4, Tsit5.

The torque-free body (`_harness.TorqueFree`), members 0–3 (the same initial conditions in
every ensemble size of `ensemble_throughput.py`), Δt = 0.01 to t = 100 (10⁴ steps; Tsit5 its
own steps), every step saved (`simulate(save_every=1)`, diffrax `SaveAt(t0=True, steps=True)`,
nothing interpolated). `error_Pi` = ‖Π − Π_ref‖₂, `error_R` = ‖R − R_ref‖_F at t_end against
`jaxrigid.reference.rigid_body_reference` (scipy DOP853, rtol = atol = 1e-13, float64); the
drifts |K − K₀|/K₀, ‖RΠ − R₀Π₀‖₂ and ‖RᵀR − 1‖_F are maxima over every step.
Writes `ensemble_accuracy_<device>[_<dtype>][_quick].json` (key `accuracy`).

    python bench/ensemble_accuracy.py                       # ≈ 1 min on 2 cores
    python bench/ensemble_accuracy.py --quick --out /tmp/b  # t_end = 10
"""

from __future__ import annotations

import time

import _common as common

ALL = "IMIDM,IMIDM_chord,IMIDM_chord2,IMIDM_fast,IMIDM_compensated,IMID,diffrax_RK4,diffrax_Tsit5"

p = common.parser(__doc__, dtype=True)
p.add_argument("--t-end", type=float, default=None, help="horizon (100; quick 10)")
p.add_argument("--dt", type=float, default=0.01)
p.add_argument("--accuracy-members", type=int, default=4, help="members 0, 1, ... (4)")
p.add_argument("--methods", default=ALL, help=f"comma list (default {ALL})")
p.add_argument("--tsit5-rtol", type=float, default=1e-8)
p.add_argument("--tsit5-atol", type=float, default=1e-8)
p.add_argument("--seed", type=int, default=0)
A = p.parse_args()
A.t_end = A.t_end or (10.0 if A.quick else 100.0)
common.enable_x64_for(A.dtype)

import _harness as harness  # noqa: E402
import diffrax  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxrigid  # noqa: E402

harness.parse_methods(p, A)
PROBLEM = harness.TorqueFree(A.dtype, A.seed)


def histories(name, ens, n):
    """Each member's saved states, a list of (R, Pi) histories, and its step counts."""
    k = ens.R.shape[0]
    if name in harness.SETTINGS:

        def run(R, Pi):
            s0 = harness.initial_state(R, Pi)
            return jaxrigid.simulate(harness.SETTINGS[name](), PROBLEM.model, s0, A.dt, n).states

        Rs, Pis = (np.asarray(x) for x in jax.block_until_ready(jax.jit(run)(ens.R, ens.Pi)))
        return [(Rs[i], Pis[i]) for i in range(k)], [n] * k
    method, _ = harness.DIFFRAX[name]
    max_steps = n + 16 if method == "RK4" else max(50 * n, 4096)
    ctl = harness.tsit5_controller(A.tsit5_rtol, A.tsit5_atol) if method == "Tsit5" else None

    def one(R, Pi):
        save = diffrax.SaveAt(t0=True, steps=True)
        sol = harness.diffrax_solve(PROBLEM, method, R, Pi, A.t_end, A.dt, save, max_steps, ctl)
        return sol.ts, sol.ys, sol.stats["num_steps"]

    ts, (Rs, Pis), nst = jax.block_until_ready(jax.jit(jax.vmap(one))(ens.R, ens.Pi))
    ok = np.isfinite(np.asarray(ts))
    hist = [(np.asarray(Rs[i])[ok[i]], np.asarray(Pis[i])[ok[i]]) for i in range(k)]
    return hist, [int(v) for v in np.asarray(nst)]


def accuracy():
    k, n = A.accuracy_members, int(round(A.t_end / A.dt))
    ens = PROBLEM.ensemble(k)  # the first k members of every ensemble size
    common.log(f"reference (DOP853, rtol 1e-13) for {k} members at t = {A.t_end} ...")
    t = time.perf_counter()
    refs = [harness.reference_at(PROBLEM, ens.R[i], ens.Pi[i], A.t_end) for i in range(k)]
    res = {
        "members": list(range(k)),
        "t_end": A.t_end,
        "dt": A.dt,
        "steps": n,
        "reference": "jaxrigid.reference.rigid_body_reference: scipy DOP853, rtol = atol = "
        "1e-13, float64",
        "reference_seconds": time.perf_counter() - t,
        "drift_definition": "max over every step to t_end: |K - K0|/K0 (kinetic energy), "
        "||R Pi - R0 Pi0||_2 (spatial momentum), ||R^T R - 1||_F",
        "error_definition": "||Pi - Pi_ref||_2 and ||R - R_ref||_F at t_end",
        "methods": {},
    }
    for name in [m for m in A.methods if m != "diffrax_RK4_batched"]:
        common.log(f"{name} to t = {A.t_end} ...")
        t = time.perf_counter()
        hist, n_steps = histories(name, ens, n)
        run_s = time.perf_counter() - t
        keys = ("error_Pi", "error_R", "energy_rel_drift", "spatial_momentum_drift")
        rec = {key: [] for key in (*keys, "orthogonality_error")}
        for (R, Pi), (R_ref, Pi_ref) in zip(hist, refs):
            rec["error_Pi"].append(float(np.linalg.norm(np.asarray(Pi[-1], np.float64) - Pi_ref)))
            rec["error_R"].append(float(np.linalg.norm(np.asarray(R[-1], np.float64) - R_ref)))
            h = harness.history_drift(PROBLEM, R, Pi)
            rec["energy_rel_drift"].append(float(h["energy_rel"].max()))
            rec["spatial_momentum_drift"].append(float(h["spatial_momentum"].max()))
            rec["orthogonality_error"].append(float(h["orthogonality"].max()))
        rec |= {key + "_member0": rec[key][0] for key in ("error_Pi", "error_R")}
        rec |= {key + "_max": max(rec[key]) for key in rec if isinstance(rec[key], list)}
        rec |= {"steps_taken": n_steps, "seconds_incl_compile": run_s}
        res["methods"][name] = rec
    return res


def main():
    t0, info = time.perf_counter(), common.machine()
    acc = accuracy()
    config = {"dtype": A.dtype, "tsit5_rtol": A.tsit5_rtol, "tsit5_atol": A.tsit5_atol}
    record = {"machine": info, "case": PROBLEM.record(), "config": config, "accuracy": acc}
    name = f"ensemble_accuracy_{common.device_tag(A.dtype, A.quick)}.json"
    path = common.write_results(A.out, name, record, t0)
    print(f"Accuracy at t = {acc['t_end']} (members {acc['members']}, against DOP853)")
    print(
        f"{'method':<18} {'|ΔΠ| m0':>9} {'|ΔR| m0':>9} {'|ΔΠ| max':>9} {'|ΔR| max':>9} "
        f"{'ΔK/K':>9} {'|Δπ|':>9} {'RᵀR-1':>9} {'steps':>7}"
    )
    for name, r in acc["methods"].items():
        cols = ("error_Pi_member0", "error_R_member0", "error_Pi_max", "error_R_max")
        cols += ("energy_rel_drift_max", "spatial_momentum_drift_max", "orthogonality_error_max")
        print(
            f"{name:<18} " + " ".join(f"{r[c]:>9.2e}" for c in cols), f"{max(r['steps_taken']):>7}"
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
