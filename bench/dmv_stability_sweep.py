"""The time-step limit of the DMV integrators (Dixon §9): an ensemble sweep over Δt and orbits.

Dixon reports that near the separatrix "the numerical solution becomes unstable ... unless
the time step is approximately no larger than 0.5". This script measures where jaxrigid's
DMV-body and DMV-spatial stop working, for the two inertia sets of §9.

Orbits: |M| = |M(0)| of the case (1.118 asymmetric, 1.005 symmetric), initial momentum in the
(e₁, e₃) plane at angle θ from e₃ — every orbit of the free body crosses that plane, so
θ ∈ [0, π/2] covers them all (up to symmetry), from the steady rotation about e₃ (θ = 0)
through the separatrix (θ_sep, asymmetric body only) to the one about e₁ (θ = π/2); the grid
is refined near θ_sep. Each (Δt, θ) pair is one ensemble member run for `--steps` steps
(default 1000: t ≥ 50 at the smallest Δt, ≥ 500 from Δt = 0.5 on, many periods), one
`simulate` call per Δt with the θ ensemble.

A member is *unstable* if any Newton solve failed (no root on the branch continuous in Δt:
`sol.outcome.all_converged`), if the component of Π that keeps its sign on the exact orbit
(Π₃ inside the separatrix, Π₁ outside) changed sign at a saved state (a jump across the
saddle), or if |Π|² or the energy drifted by more than 1e-10 relative (blow-up). The DMV
equation involves h and Π only through hΠ, so the region in (h|Π|, θ) is the same for every
|M|; the plot's right axis gives h|Π|.

Closed-form check: at the relative equilibria (θ = 0, π/2) the Moser–Veselov equation has a
real solution iff h|Π| ≤ 𝕀ᵢ (tests/test_dmv_validation.py), drawn as markers.

    python bench/dmv_stability_sweep.py            # ≈ 2 min on 2 quiet cores
    python bench/dmv_stability_sweep.py --quick    # ≈ 30 s, coarse grid

Writes bench/results/dmv_stability_sweep[_quick].json and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
from _common import machine, to_json  # noqa: E402 (bench/ is the script's folder)

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxrigid as jr  # noqa: E402
from jaxrigid.cases.dmv import CASES  # noqa: E402
from jaxrigid.integrators.dmv import DMV_METHODS  # noqa: E402
from jaxrigid.models.rigid_body import RigidBodyState  # noqa: E402

FREE_BODY = ("dmv-free-body-symmetric", "dmv-free-body-asymmetric")  # Dixon §9, Figures 5-8
BLOW_UP = 1e-10  # relative drift of |Π|² or K that counts as "unconservative" (round-off: 1e-14)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="coarse grid, 500 steps")
    p.add_argument("--steps", type=int, default=None, help="steps per run (default 1000)")
    p.add_argument("--dt-max", type=float, default=3.5)
    p.add_argument("--n-dt", type=int, default=None, help="Δt grid points (default 70)")
    p.add_argument("--n-theta", type=int, default=None, help="θ grid points (default 121)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = p.parse_args(argv)
    args.steps = args.steps or (500 if args.quick else 1000)
    args.n_dt = args.n_dt or (24 if args.quick else 70)
    args.n_theta = args.n_theta or (46 if args.quick else 121)
    return args


def separatrix_angle(moments):
    """θ_sep with sin²θ/I₁ + cos²θ/I₃ = 1/I₂ (None if I₂ is not strictly between)."""
    I1, I2, I3 = moments
    x = (1 / I2 - 1 / I3) / (1 / I1 - 1 / I3)
    return float(np.arcsin(np.sqrt(x))) if 0 < x < 1 else None


def theta_grid(n, theta_sep):
    """Uniform in [0, π/2], plus points at θ_sep ± 10^-k (k = 1 … 10) when there is one."""
    theta = np.linspace(0.0, np.pi / 2, n)
    if theta_sep is not None:
        off = np.logspace(-10, -1, 10)
        theta = np.concatenate([theta, theta_sep - off, theta_sep + off])
    return np.unique(theta)


def unstable_members(sol, moments, theta, theta_sep):
    """Boolean per member, and which criterion fired: (newton, lobe_jump, blow_up)."""
    P = np.asarray(sol.states.Pi)  # (n, n_save, 3)
    newton = ~np.asarray(sol.outcome.all_converged)
    finite = np.all(np.isfinite(P), axis=(1, 2))
    if theta_sep is None:
        keep = np.full(theta.shape, 2)
    else:
        keep = np.where(theta < theta_sep, 2, 0)
    s = P[np.arange(len(theta)), :, keep]
    lobe = np.any(np.sign(s) != np.sign(s[:, :1]), axis=1) & (np.abs(s[:, 0]) > 1e-12)
    L2 = np.sum(P**2, axis=-1)
    K = np.sum(P**2 / np.asarray(moments), axis=-1)
    with np.errstate(invalid="ignore"):
        drift = np.maximum(
            np.max(np.abs(L2 / L2[:, :1] - 1), 1), np.max(np.abs(K / K[:, :1] - 1), 1)
        )
    blow = ~finite | ~(drift <= BLOW_UP)
    return newton | lobe | blow, newton, lobe, blow


def sweep(case, method, dts, args):
    params = case.resolve()
    moments = (params["I11"], params["I22"], params["I33"])
    model, state0 = case.build(params)
    L = float(jnp.linalg.norm(state0.Pi))
    theta_sep = separatrix_angle(moments)
    theta = theta_grid(args.n_theta, theta_sep)
    Pi0 = L * np.stack([np.sin(theta), np.zeros_like(theta), np.cos(theta)], axis=-1)
    ens = RigidBodyState(jnp.broadcast_to(jnp.eye(3), (len(theta), 3, 3)), jnp.asarray(Pi0))
    integrator = DMV_METHODS[method]()
    save_every = 10
    out = {
        k: np.zeros((len(dts), len(theta)), bool) for k in ("unstable", "newton", "lobe", "blow")
    }
    iters = np.zeros((len(dts), len(theta)), int)
    t0 = time.perf_counter()
    for i, dt in enumerate(dts):
        sol = jr.simulate(integrator, model, ens, float(dt), args.steps, save_every=save_every)
        u, n, lo, b = unstable_members(sol, moments, theta, theta_sep)
        out["unstable"][i], out["newton"][i], out["lobe"][i], out["blow"][i] = u, n, lo, b
        iters[i] = np.asarray(sol.outcome.max_iterations)
    seconds = time.perf_counter() - t0
    stable = ~out["unstable"]
    # largest Δt of the grid below which every member of that θ is stable
    limit = np.array(
        [
            dts[np.argmax(~stable[:, j])] if (~stable[:, j]).any() else np.inf
            for j in range(len(theta))
        ]
    )
    return {
        "case": case.name,
        "method": method,
        "moments": moments,
        "L": L,
        "theta_sep": theta_sep,
        "theta": theta,
        "dts": np.asarray(dts),
        "first_unstable_dt": limit,
        "first_unstable_dt_min": float(np.min(limit)),
        "theta_at_min": float(theta[np.argmin(limit)]),
        "first_unstable_dt_near_separatrix": (
            None if theta_sep is None else float(np.min(limit[np.abs(theta - theta_sep) <= 0.1]))
        ),
        "relative_equilibrium_limits": {"e3": moments[2] / L, "e1": moments[0] / L},
        "counts": {k: int(v.sum()) for k, v in out.items()},
        # members flagged by a jump or a drift while every Newton solve converged
        "counts_without_newton_failure": {
            k: int((out[k] & ~out["newton"]).sum()) for k in ("lobe", "blow")
        },
        "max_newton_iterations_stable": int(np.max(np.where(stable, iters, 0))),
        # rows: one per Δt, one character per θ ("1": unstable), to keep the JSON small
        "unstable": ["".join("1" if u else "0" for u in row) for row in out["unstable"]],
        "unstable_array": out["unstable"],
        "seconds": seconds,
        "body_steps": int(len(dts) * len(theta) * args.steps),
    }


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    body = [r for r in results if r["method"] == "DMV-body"]
    fig, axes = plt.subplots(1, len(body), figsize=(6 * len(body), 4.4), constrained_layout=True)
    for ax, r in zip(np.atleast_1d(axes), body):
        plot_region(ax, r)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_region(ax, r, paper_limit=0.5):
    """Stable (light) / unstable (dark) over (θ, Δt); relative-equilibrium limits 𝕀ᵢ/|Π|."""
    theta, dts = np.asarray(r["theta"]), np.asarray(r["dts"])
    unstable = np.asarray(r["unstable_array"], float)
    ax.pcolormesh(theta, dts, unstable, cmap="Greys", vmin=0, vmax=1.6, shading="nearest")
    lim = r["relative_equilibrium_limits"]
    ax.plot([0], [lim["e3"]], "rv", ms=9, label=r"$\mathbb{I}_3/|\Pi|$ (closed form)")
    ax.plot([np.pi / 2], [lim["e1"]], "r^", ms=9, label=r"$\mathbb{I}_1/|\Pi|$ (closed form)")
    if r["theta_sep"] is not None:
        ax.axvline(r["theta_sep"], color="tab:blue", ls="--", lw=1, label="separatrix")
    ax.axhline(paper_limit, color="tab:orange", ls=":", lw=1.5, label="paper: Δt ≈ 0.5")
    ax.set_xlabel(r"$\theta$ of $M(0) = |M|(\sin\theta, 0, \cos\theta)$")
    ax.set_ylabel(r"$\Delta t$")
    m = r["moments"]
    ax.set_title(f"{r['method']}, 𝕀 = diag{tuple(m)}, |M| = {r['L']:.3f}\n(dark: unstable)")
    sec = ax.secondary_yaxis("right", functions=(lambda y: y * r["L"], lambda y: y / r["L"]))
    sec.set_ylabel(r"$\Delta t\,|\Pi|$")
    ax.legend(fontsize=8, loc="upper center")


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    t_start = time.perf_counter()
    dts = np.round(np.linspace(args.dt_max / args.n_dt, args.dt_max, args.n_dt), 6)
    results = []
    for case in (c for c in CASES if c.name in FREE_BODY):
        for method in DMV_METHODS:
            r = sweep(case, method, dts, args)
            print(
                f"{case.name:26s} {method:12s} first unstable Δt: min {r['first_unstable_dt_min']}"
                f" at θ = {r['theta_at_min']:.3f}; near separatrix "
                f"{r['first_unstable_dt_near_separatrix']}; without Newton failure "
                f"{r['counts_without_newton_failure']}; closed-form e3/e1 limits "
                f"{r['relative_equilibrium_limits']['e3']:.3f}/"
                f"{r['relative_equilibrium_limits']['e1']:.3f}; counts {r['counts']}; "
                f"{r['body_steps']:.2e} body-steps in {r['seconds']:.1f} s",
                file=sys.stderr,
            )
            results.append(r)
    tag = "_quick" if args.quick else ""
    png = os.path.join(args.out, f"dmv_stability_sweep{tag}.png")
    plot(results, png)
    for r in results:
        del r["unstable_array"]
    doc = {
        "benchmark": "bench/dmv_stability_sweep.py",
        "command": " ".join(["python"] + sys.argv),
        "machine": machine(),
        "config": {
            "steps": args.steps,
            "save_every": 10,
            "dts": dts,
            "blow_up_threshold": BLOW_UP,
            "criteria": "unstable = any Newton failure (incl. off-branch root) | sign change "
            "of the sign-keeping component at a saved state | |Pi|^2 or K relative drift > "
            "blow_up_threshold or non-finite",
        },
        "results": results,
        "plot": os.path.basename(png),
        "total_seconds": time.perf_counter() - t_start,
    }
    path = os.path.join(args.out, f"dmv_stability_sweep{tag}.json")
    with open(path, "w") as fh:
        json.dump(to_json(doc), fh, indent=1)
    print(f"wrote {path} and {png} ({doc['total_seconds']:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
