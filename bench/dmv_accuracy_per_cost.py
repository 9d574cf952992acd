"""Accuracy per unit cost on the torque-free body: DMV-body, DMV-spatial and IMIDM (issue 3).

For each method and each Δt of `--dts`, in one run:

* **cost**: body-steps per second of `simulate` on an ensemble of `--members` members (the
  case's own `perturb`: member 0 unperturbed, the others' momenta scaled componentwise by
  1 + spread·N(0, 1), `default_rng(0)`), `--timed-steps` steps per call, jit-compiled
  ahead of time, one warm-up call, best of `--repeats` calls each ended by
  `jax.block_until_ready`, the repeats interleaved across methods. Every Δt is timed
  separately (the Newton iteration count, hence the cost per step, depends on Δt).
* **accuracy**: the error at t = 100 of the first `--accuracy-members` members,
  ‖Π − Π_ref‖₂ and ‖R − R_ref‖₂ (matrix 2-norm), against `jaxrigid.reference`
  (scipy DOP853 on Ṙ = RΩ̂, Π̇ = Π × Ω at rtol = atol = 1e-13, an independent method);
  max over those members.

The plot shows the error against body-steps/s (wall clock) and against the CPU time (process
time, all threads) that one member costs to t = 100, (100/Δt) / (body-steps per CPU second):
on a shared machine the CPU time is far less sensitive to other processes than the wall clock.
A round-off section (`--roundoff-steps`, default 10⁵) runs
one trajectory of each §9 case with each DMV form at Δt = 0.1 and records the growth of the
invariants' errors (|Π|², π = RΠ, K, det and ‖·‖₂ of R J Rᵀ) at 10³, 10⁴, 10⁵ steps: the body
against spatial comparison of Dixon's Figures 7–8.

    python bench/dmv_accuracy_per_cost.py                 # ≈ 2–3 min on 2 cores
    python bench/dmv_accuracy_per_cost.py --quick         # ≈ 30 s
    python bench/dmv_accuracy_per_cost.py --members 1000000 --timed-steps 100   # accelerator

Writes bench/results/dmv_accuracy_per_cost_<device>[_quick].json and .png.
"""

from __future__ import annotations

import os
import time

import jax
from _common import (
    aot_compile,
    device_tag,
    enable_x64_for,
    log,
    machine,
    parser,
    time_interleaved,
    write_results,
)

enable_x64_for("float64")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxrigid as jr  # noqa: E402
from jaxrigid.cases import get_case  # noqa: E402
from jaxrigid.integrators import get_method  # noqa: E402
from jaxrigid.integrators.dmv import mass_matrix  # noqa: E402
from jaxrigid.reference import rigid_body_reference  # noqa: E402

METHODS = ("DMV-body", "DMV-spatial", "IMIDM")
STYLE = {
    "DMV-body": dict(color="tab:blue", marker="o"),
    "DMV-spatial": dict(color="tab:green", marker="s", mfc="none"),
    "IMIDM": dict(color="tab:red", marker="*", ms=9),
}
ROUNDOFF_CASES = ("dmv-free-body-symmetric", "dmv-free-body-asymmetric")


def parse_args(argv=None):
    p = parser(__doc__)
    p.add_argument("--case", default="dmv-free-body-asymmetric", help="a torque-free case")
    p.add_argument("--members", type=int, default=None, help="timed ensemble (default 10⁴)")
    p.add_argument("--timed-steps", type=int, default=None, help="steps per timed call (200)")
    p.add_argument("--dts", default=None, help="comma list (default 0.2,0.1,0.05,0.025,0.0125)")
    p.add_argument("--t-end", type=float, default=100.0)
    p.add_argument("--accuracy-members", type=int, default=8)
    p.add_argument("--repeats", type=int, default=None, help="timed calls after warm-up (3)")
    p.add_argument("--roundoff-steps", type=int, default=None, help="default 10⁵ (0: skip)")
    a = p.parse_args(argv)
    a.members = a.members or (1000 if a.quick else 10_000)
    a.timed_steps = a.timed_steps or (50 if a.quick else 200)
    a.dts = [
        float(x)
        for x in (a.dts or ("0.2,0.1,0.05" if a.quick else "0.2,0.1,0.05,0.025,0.0125")).split(",")
    ]
    a.repeats = a.repeats or (2 if a.quick else 3)
    if a.roundoff_steps is None:
        a.roundoff_steps = 10_000 if a.quick else 100_000
    return a


def timed_runner(integrator, model, ensemble, steps):
    """AOT-compiled `simulate` of `steps` steps; dt is a traced argument."""

    def run(state0, dt):
        sol = jr.simulate(integrator, model, state0, dt, steps, save_every=steps)
        return sol.final_state, sol.outcome.all_converged, sol.outcome.max_iterations

    return aot_compile(run, ensemble, jnp.float64(0.1))


def throughput(compiled, ensemble, dt, steps, repeats, members):
    """Body-steps/s of each method's compiled run at `dt`: one warm-up call each, then
    `repeats` rounds in which every method is timed once (interleaved, so that a change of
    machine load during the run does not favour one method); the best call is kept."""
    timings = time_interleaved(compiled, (ensemble, jnp.float64(dt)), repeats, statistic="best")
    return {
        m: {
            "seconds": t.seconds,
            "body_steps_per_s": members * steps / t.seconds,
            "cpu_seconds": t.cpu_seconds,
            "body_steps_per_cpu_s": members * steps / t.cpu_seconds,
            "all_converged": bool(np.all(t.out[1])),
            "max_newton_iterations": int(np.max(t.out[2])),
        }
        for m, t in timings.items()
    }


def errors_at_t_end(integrator, model, ensemble, dt, t_end, ref):
    """‖Π − Π_ref‖₂ and ‖R − R_ref‖₂ at t_end for each member (chunks of one compiled length)."""
    n = round(t_end / dt)
    assert abs(n * dt - t_end) < 1e-9 * t_end, "t_end must be a multiple of dt"
    chunk = max(c for c in (100, 125, 200, 250, 400, 500) if n % c == 0) if n >= 100 else n
    state, ok = ensemble, True
    for k in range(n // chunk):
        sol = jr.simulate(integrator, model, state, dt, chunk, save_every=chunk, t0=k * chunk * dt)
        state, ok = sol.final_state, ok and bool(np.all(sol.outcome.all_converged))
    ePi = np.linalg.norm(np.asarray(state.Pi) - ref.Pi, axis=-1)
    eR = np.linalg.norm(np.asarray(state.R) - ref.R, ord=2, axis=(-2, -1))
    return ePi, eR, ok


def references(model, ensemble, t_end):
    Pis, Rs = [], []
    for i in range(ensemble.Pi.shape[0]):
        member = jax.tree_util.tree_map(lambda x: x[i], ensemble)
        r = rigid_body_reference(model, member, [t_end])
        Pis.append(np.asarray(r.Pi[-1]))
        Rs.append(np.asarray(r.R[-1]))
    return jr.models.RigidBodyState(np.stack(Rs), np.stack(Pis))


def roundoff(n_steps):
    """Growth of the invariants' errors of one trajectory, DMV body against spatial."""
    marks = [m for m in (1_000, 10_000, 100_000, 1_000_000) if m <= n_steps]
    out = {}
    for name in ROUNDOFF_CASES:
        case = get_case(name)
        model, state0 = case.build(case.resolve())
        J = mass_matrix(model.inertia)
        det0, nrm0 = float(jnp.linalg.det(J)), float(jnp.linalg.norm(J, ord=2))
        out[name] = {}
        for method in ("DMV-body", "DMV-spatial"):
            sol = jr.simulate(get_method(method), model, state0, 0.1, n_steps, save_every=100)
            R, Pi = np.asarray(sol.states.R), np.asarray(sol.states.Pi)
            pi = np.einsum("kij,kj->ki", R, Pi)
            K = 0.5 * np.einsum("ki,ij,kj->k", Pi, np.linalg.inv(np.asarray(model.inertia)), Pi)
            L2 = np.sum(Pi**2, -1)
            Is = R @ np.asarray(J) @ np.swapaxes(R, -1, -2)
            series = {
                "|Pi|^2 rel": np.abs(L2 / L2[0] - 1),
                "pi abs": np.linalg.norm(pi - pi[0], axis=-1),
                "K rel": np.abs(K / K[0] - 1),
                "det(I) rel": np.abs(np.linalg.det(Is) / det0 - 1),
                "|I|_2 rel": np.abs(np.linalg.norm(Is, ord=2, axis=(-2, -1)) / nrm0 - 1),
                "RtR-1": np.linalg.norm(np.swapaxes(R, -1, -2) @ R - np.eye(3), axis=(-2, -1)),
            }
            out[name][method] = {
                key: {str(m): float(np.max(v[: m // 100 + 1])) for m in marks}
                for key, v in series.items()
            }
            out[name][method]["newton_converged"] = bool(sol.outcome.all_converged)
            log(
                f"roundoff {name} {method}: "
                + ", ".join(
                    f"{k} {v[str(marks[-1])]:.1e}"
                    for k, v in out[name][method].items()
                    if isinstance(v, dict)
                )
            )
    return out


def plot(rows, args, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.3), constrained_layout=True)
    for method in METHODS:
        rs = [r for r in rows if r["method"] == method]
        err = [r["error_Pi_max"] for r in rs]
        bsps = [r["body_steps_per_s"] for r in rs]
        cost = [r["cpu_seconds_per_member_to_t_end"] for r in rs]
        axes[0].loglog(bsps, err, label=method, **STYLE[method])
        axes[1].loglog(cost, err, label=method, **STYLE[method])
        for r in rs:
            axes[0].annotate(
                f"{r['dt']:g}",
                (r["body_steps_per_s"], r["error_Pi_max"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    axes[0].set_xlabel("body-steps per second (wall clock, best of repeats)")
    axes[1].set_xlabel(f"CPU seconds per member to t = {args.t_end:g} (all threads; load-robust)")
    for ax in axes:
        ax.set_ylabel(rf"$\|\Pi - \Pi_\mathrm{{ref}}\|_2$ at t = {args.t_end:g}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    d = jax.devices()[0]
    fig.suptitle(
        f"{args.case}: accuracy per cost, {args.members} members, float64, "
        f"{d.device_kind} ({os.cpu_count()} CPUs); labels: Δt",
        fontsize=10,
    )
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)  # the plot goes there first
    t_start = time.perf_counter()
    info = machine()
    case = get_case(args.case)
    model, state0 = case.build(case.resolve())
    ensemble = case.perturb(state0, np.random.default_rng(0), case.ensemble_spread, args.members)
    acc_ens = jax.tree_util.tree_map(lambda x: x[: args.accuracy_members], ensemble)
    t0 = time.perf_counter()
    ref = references(model, acc_ens, args.t_end)
    log(f"reference (DOP853) for {args.accuracy_members} members: {time.perf_counter() - t0:.1f} s")
    compiled, compile_s = {}, {}
    for method in METHODS:
        integrator = get_method(method)
        compiled[method], compile_s[method] = timed_runner(
            integrator, model, ensemble, args.timed_steps
        )
    rows = []
    for dt in args.dts:
        thr = throughput(compiled, ensemble, dt, args.timed_steps, args.repeats, args.members)
        for method in METHODS:
            ePi, eR, ok = errors_at_t_end(get_method(method), model, acc_ens, dt, args.t_end, ref)
            row = {
                "method": method,
                "dt": dt,
                **thr[method],
                "compile_seconds": compile_s[method],
                "steps_to_t_end": round(args.t_end / dt),
                "seconds_per_member_to_t_end": round(args.t_end / dt)
                / thr[method]["body_steps_per_s"],
                "cpu_seconds_per_member_to_t_end": round(args.t_end / dt)
                / thr[method]["body_steps_per_cpu_s"],
                "error_Pi_member0": float(ePi[0]),
                "error_Pi_max": float(np.max(ePi)),
                "error_R_member0": float(eR[0]),
                "error_R_max": float(np.max(eR)),
                "accuracy_run_converged": ok,
            }
            rows.append(row)
            log(
                f"{method:12s} dt {dt:<7g} {row['body_steps_per_s']:.3e} body-steps/s "
                f"({row['body_steps_per_cpu_s']:.3e}/CPU-s, "
                f"iters ≤ {row['max_newton_iterations']}), "
                f"error Π {row['error_Pi_max']:.3e}, "
                f"R {row['error_R_max']:.3e}"
            )
    tag = device_tag(quick=args.quick)
    png = os.path.join(args.out, f"dmv_accuracy_per_cost_{tag}.png")
    plot(rows, args, png)
    ro = roundoff(args.roundoff_steps) if args.roundoff_steps else None
    doc = {
        "machine": info,
        "config": {
            "case": args.case,
            "members_timed": args.members,
            "timed_steps": args.timed_steps,
            "repeats": args.repeats,
            "dts": args.dts,
            "t_end": args.t_end,
            "accuracy_members": args.accuracy_members,
            "ensemble": f"case.perturb(state0, default_rng(0), {case.ensemble_spread}, n)",
            "timing": "jax.jit(simulate).lower().compile(); per dt one warm-up call per method, "
            "then `repeats` rounds timing every method once (interleaved); best call kept, "
            "each ended by jax.block_until_ready; default Newton (tol eps^(3/4), max 20)",
            "reference": "jaxrigid.reference.rigid_body_reference: scipy DOP853, rtol=atol=1e-13",
        },
        "rows": rows,
        "roundoff": ro,
        "plot": os.path.basename(png),
    }
    path = write_results(args.out, f"dmv_accuracy_per_cost_{tag}.json", doc, t_start)
    log(f"wrote {path} and {png}")


if __name__ == "__main__":
    main()
