"""The rigid-body benchmark problem and its diffrax peer, shared by `ensemble_throughput.py`,
`ensemble_accuracy.py`, `long_run_drift.py` and `imidm_cost_breakdown.py`.

The torque-free body of Krysl §5.1 (case `krysl-torque-free`: diag 𝕀 = (0.9144, 1.098, 1.66),
Ω₀ = (0.45549, 0.82623, 0.03476), R₀ = 1); ensembles by the case's own `perturb` (member 0
unperturbed, the others' body momenta scaled componentwise by 1 + 0.01·N(0, 1),
`numpy.random.default_rng(seed)`), so the first members are the same for every size.

jaxrigid runs only through `jaxrigid.simulate`; diffrax integrates exactly the same equations,
`Ṙ = R hat(Ω)`, `Π̇ = Π × Ω`, `Ω = 𝕀⁻¹Π`, with the state `(R, Π)` as a pytree: classical RK4
as a `diffrax.ButcherTableau` with `ConstantStepSize`, or Tsit5 with a `PIDController`.
"""

from __future__ import annotations

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import jaxrigid
from jaxrigid.integrators import get_method
from jaxrigid.models.rigid_body import RigidBody, RigidBodyState
from jaxrigid.reference import rigid_body_reference

CASE_NAME = "krysl-torque-free"
# The fast setting for large ensembles (docs/choosing-an-integrator.md, "Large ensembles"):
# two chord updates, no loop; Rodrigues series cut for steps turning by ≤ 0.1 rad (these
# turn by |Ω|Δt ≈ 0.0094 at Δt = 0.01; a member that turned by more would be reported as a
# failed step).
FAST_MAX_ANGLE = 0.1


def chord2():
    return jaxrigid.Newton(chord=True, max_steps=2, peel=2)


# The jaxrigid settings compared; `IMIDM_compensated` is `IMIDM(compensated=True)`.
# `IMIDM` is the default (fast form first, the full settings where a member needs them:
# `IMIDM.fast_variant`); the other settings run as named, without that fast path.
SETTINGS = {
    "IMIDM": lambda: jaxrigid.IMIDM(),
    "IMIDM_no_fast_path": lambda: jaxrigid.IMIDM(fast_path=False),
    "IMIDM_chord": lambda: jaxrigid.IMIDM(newton=jaxrigid.Newton(chord=True), fast_path=False),
    "IMIDM_chord2": lambda: jaxrigid.IMIDM(newton=chord2(), fast_path=False),
    "IMIDM_fast": lambda: jaxrigid.IMIDM(
        newton=chord2(), max_angle=FAST_MAX_ANGLE, fast_path=False
    ),
    "IMIDM_compensated": lambda: jaxrigid.IMIDM(compensated=True),
    "IMID": lambda: jaxrigid.IMID(),
    # the free body's discrete Moser–Veselov (a Newton solve per step) and the best
    # composition of the work–precision frontier (issue 17's 10⁶-member GPU throughput)
    "DMV-body": lambda: get_method("DMV-body"),
    "LP-split:kahan-li8": lambda: get_method("LP-split:kahan-li8"),
}
SETTINGS_DOC = (
    "IMIDM: the default, IMIDM() (its fast form first, redone with the full settings for any "
    "member whose fast steps failed); IMIDM_no_fast_path: IMIDM(fast_path=False), the "
    "default before issue 17; the others with fast_path=False: "
    "IMIDM_chord: IMIDM(newton=Newton(chord=True)); IMIDM_chord2: "
    "IMIDM(newton=Newton(chord=True, max_steps=2, peel=2)) (loop-free, two chord updates); "
    f"IMIDM_fast: that and max_angle={FAST_MAX_ANGLE}; IMIDM_compensated: "
    "IMIDM(compensated=True) (compensated summation); DMV-body and LP-split:kahan-li8: "
    "get_method of those names (the free body's DMV, Newton on the Cayley vector, and the "
    "explicit Lie-Poisson splitting composed by Kahan-Li's order-8 scheme, 17 stages)"
)


class TorqueFree:
    """The case's model and initial state in `dtype`, its ensembles, and the diffrax term."""

    def __init__(self, dtype="float64", seed=0):
        from jaxrigid.cases import get_case

        self.case = get_case(CASE_NAME)
        self.dtype = jnp.dtype(dtype)
        self.seed = seed
        model, s0 = self.case.build(self.case.resolve())
        self.inertia_np = np.asarray(model.inertia, np.float64)
        self.model = RigidBody(jnp.asarray(model.inertia, self.dtype))
        self.state0 = RigidBodyState(jnp.asarray(s0.R, self.dtype), jnp.asarray(s0.Pi, self.dtype))
        self.I_inv = jnp.asarray(np.linalg.inv(self.inertia_np), self.dtype)
        self.term = diffrax.ODETerm(self.vector_field)

    def ensemble(self, n):
        rng = np.random.default_rng(self.seed)
        ens = self.case.perturb(self.state0, rng, self.case.ensemble_spread, n)
        return RigidBodyState(jnp.asarray(ens.R, self.dtype), jnp.asarray(ens.Pi, self.dtype))

    def vector_field(self, t, y, args):
        """Ṙ = R hat(Ω), Π̇ = Π × Ω, Ω = 𝕀⁻¹Π (Krysl eq. 7); one member or a batch."""
        R, Pi = y
        Omega = Pi @ self.I_inv.T
        return R @ hat(Omega), jnp.cross(Pi, Omega)

    def record(self) -> dict:
        return {
            "name": self.case.name,
            "title": self.case.title,
            "inertia_diag": [0.9144, 1.098, 1.66],
            "Omega0": [0.45549, 0.82623, 0.03476],
            "R0": "identity",
            "ensemble": "case.perturb: member 0 unperturbed, momenta of the others scaled by "
            f"1 + {self.case.ensemble_spread}*N(0,1), numpy default_rng({self.seed})",
        }


def hat(w):
    z = jnp.zeros_like(w[..., 0])
    rows = ([z, -w[..., 2], w[..., 1]], [w[..., 2], z, -w[..., 0]], [-w[..., 1], w[..., 0], z])
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


# ------------------------------------------------------------------------------------------
# Runners: jitted `fn(R, Pi) -> (R1, Pi1, stats)`.


def initial_state(R, Pi):
    return RigidBodyState(R, Pi)


def jaxrigid_runner(problem, integrator, dt, steps, checks=None):
    """`jax.jit(simulate(integrator, model, state0_batch, dt, steps, save_every=steps))`
    (`checks`: simulate's, default `"raise"`)."""

    def fn(R, Pi):
        sol = jaxrigid.simulate(
            integrator,
            problem.model,
            initial_state(R, Pi),
            dt,
            steps,
            save_every=steps,
            checks=checks,
        )
        final = sol.final_state
        stats = {
            "newton_max_iterations": jnp.max(sol.outcome.max_iterations),
            "newton_all_converged": jnp.all(sol.outcome.all_converged),
        }
        return final.R, final.Pi, stats

    return jax.jit(fn)


def setting_runner(problem, name, dt, steps):
    return jaxrigid_runner(problem, SETTINGS[name](), dt, steps)


# diffrax peers by name: (method, batched). `diffrax_RK4_batched` is supplementary, in no
# target: one diffeqsolve on the whole (members, ...) state, the same arithmetic per member.
DIFFRAX = {"diffrax_RK4": ("RK4", False), "diffrax_Tsit5": ("Tsit5", False)}
DIFFRAX["diffrax_RK4_batched"] = ("RK4", True)


def parse_methods(p, args):
    """`args.methods`, a comma list, as a list of names of `SETTINGS` or `DIFFRAX`."""
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if unknown := set(args.methods) - set(SETTINGS) - set(DIFFRAX):
        p.error(f"unknown methods {sorted(unknown)}; known {sorted(SETTINGS) + list(DIFFRAX)}")


def method_runner(problem, name, dt, steps, rtol=1e-8, atol=1e-8):
    """A setting of `SETTINGS` or a peer of `DIFFRAX`, as `fn(R, Pi) -> (R1, Pi1, stats)`."""
    if name in SETTINGS:
        return setting_runner(problem, name, dt, steps)
    method, batched = DIFFRAX[name]
    ctl = tsit5_controller(rtol, atol) if method == "Tsit5" else None
    return diffrax_runner(problem, method, dt, steps, batched, ctl)


class RK4(diffrax.AbstractERK):
    """Classical RK4 as a diffrax Butcher tableau (zero error weights: `ConstantStepSize` only)."""

    tableau = diffrax.ButcherTableau(
        c=np.array([0.5, 0.5, 1.0]),
        b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
        b_error=np.zeros(4),
        a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    )
    interpolation_cls = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        return 4


def tsit5_controller(rtol=1e-8, atol=1e-8, step_ts=None):
    pid = diffrax.PIDController(rtol=rtol, atol=atol)
    if step_ts is None:
        return pid
    # step exactly to the save times, so that saved states are step values, not interpolants
    return diffrax.ClipStepSizeController(pid, step_ts=step_ts)


def diffrax_solve(problem, method, R, Pi, t1, dt0, saveat, max_steps, controller=None):
    """One `diffeqsolve` from (R, Pi) at t = 0 to t1; method "RK4" or "Tsit5"."""
    if method == "RK4":
        solver, controller = RK4(), diffrax.ConstantStepSize()
    else:
        solver, controller = diffrax.Tsit5(), controller or tsit5_controller()
    dt = problem.dtype
    return diffrax.diffeqsolve(
        problem.term,
        solver,
        jnp.asarray(0.0, dt),
        jnp.asarray(t1, dt),
        jnp.asarray(dt0, dt),
        (R, Pi),
        saveat=saveat,
        stepsize_controller=controller,
        max_steps=max_steps,
        throw=False,
    )


def diffrax_runner(problem, method, dt, steps, batched=False, controller=None):
    """`jax.vmap(diffeqsolve)` over members to t = steps·dt (or, `batched`, one diffeqsolve on
    the whole batched state), saving the end only."""
    t1 = steps * dt
    max_steps = steps + 16 if method == "RK4" else max(64 * steps, 4096)

    def one(R, Pi):
        sol = diffrax_solve(
            problem, method, R, Pi, t1, dt, diffrax.SaveAt(t1=True), max_steps, controller
        )
        stats = {
            "num_steps": sol.stats["num_steps"],
            "num_accepted_steps": sol.stats["num_accepted_steps"],
            "successful": sol.result == diffrax.RESULTS.successful,
        }
        return sol.ys[0][-1], sol.ys[1][-1], stats

    if batched:
        return jax.jit(one)

    def fn(R, Pi):
        R1, Pi1, st = jax.vmap(one)(R, Pi)
        n, acc = st["num_steps"], st["num_accepted_steps"]
        stats = {
            "num_steps_sum": jnp.sum(n),
            "num_steps_max": jnp.max(n),
            "num_steps_min": jnp.min(n),
            "num_accepted_steps_sum": jnp.sum(acc),
            "successful": jnp.all(st["successful"]),
        }
        return R1, Pi1, stats

    return jax.jit(fn)


# ------------------------------------------------------------------------------------------
# Invariants (float64 numpy) and the reference solution.


def invariants_np(problem, R, Pi):
    """Kinetic energy, spatial momentum RΠ, ‖RᵀR − 1‖_F; leading axes kept."""
    R, Pi = np.asarray(R, np.float64), np.asarray(Pi, np.float64)
    K = 0.5 * np.einsum("...i,ij,...j->...", Pi, np.linalg.inv(problem.inertia_np), Pi)
    pi = np.einsum("...ij,...j->...i", R, Pi)
    E = np.swapaxes(R, -1, -2) @ R - np.eye(3)
    return K, pi, np.sqrt(np.sum(E * E, axis=(-2, -1)))


def endpoint_drift(problem, ens, R1, Pi1) -> dict:
    """Max over members of |K − K₀|/K₀, ‖RΠ − R₀Π₀‖₂, ‖RᵀR − 1‖_F at the end of a run."""
    K0, pi0, _ = invariants_np(problem, ens.R, ens.Pi)
    K1, pi1, orth = invariants_np(problem, R1, Pi1)
    finite = np.isfinite(np.asarray(R1)).all() and np.isfinite(np.asarray(Pi1)).all()
    return {
        "energy_rel_drift_max": float(np.max(np.abs(K1 - K0) / np.abs(K0))),
        "spatial_momentum_drift_max": float(np.max(np.linalg.norm(pi1 - pi0, axis=-1))),
        "orthogonality_error_max": float(np.max(orth)),
        "all_finite": bool(finite),
    }


def drift_summary(rec) -> dict:
    """Maxima of a `history_drift` record (with its seconds, steps, t_end)."""
    out = {
        "spatial_momentum_drift_max": float(np.max(rec["spatial_momentum"])),
        "orthogonality_error_max": float(np.max(rec["orthogonality"])),
        "energy_rel_drift_max": float(np.max(rec["energy_rel"])),
    }
    return out | {k: rec[k] for k in ("seconds", "steps", "t_end") if k in rec}


def history_drift(problem, R, Pi) -> dict:
    """Drift histories along the time axis of one member's saved states."""
    K, pi, orth = invariants_np(problem, R, Pi)
    return {
        "energy_rel": np.abs(K - K[0]) / abs(K[0]),
        "spatial_momentum": np.linalg.norm(pi - pi[0], axis=-1),
        "orthogonality": orth,
    }


def reference_at(problem, R, Pi, t_end):
    """(R, Π) at t_end by `jaxrigid.reference.rigid_body_reference` (scipy DOP853, rtol = atol
    = 1e-13, float64) from one member's state."""
    with jax.enable_x64(True):
        model64 = RigidBody(jnp.asarray(problem.inertia_np))
        s = RigidBodyState(
            jnp.asarray(np.asarray(R, np.float64)), jnp.asarray(np.asarray(Pi, np.float64))
        )
        ref = rigid_body_reference(model64, s, [t_end])
        return np.asarray(ref.R[-1]), np.asarray(ref.Pi[-1])


def print_throughput(rows):
    """The throughput table of `ensemble_throughput.py`'s rows on stdout."""
    print(
        f"{'members':>8} {'method':<20} {'steps':>6} {'seconds':>9} {'body-steps/s':>13} "
        f"{'xRK4':>6} {'compile s':>9}  endpoint drift (π, RᵀR)"
    )
    for row in rows:
        for name, r in row["methods"].items():
            d = r["final_state_drift"]
            ratio = r.get("ratio_body_steps_vs_diffrax_RK4", float("nan"))
            print(
                f"{row['members']:>8} {name:<20} {row['steps']:>6} {r['seconds']:>9.4g} "
                f"{r['body_steps_per_s']:>13.3e} {ratio:>6.2f} {r['compile_seconds']:>9.1f}  "
                f"{d['spatial_momentum_drift_max']:.1e}, {d['orthogonality_error_max']:.1e}"
            )


def print_drift_table(long):
    """The table of a long run's methods (steps, t_end, seconds, maximal drifts) on stdout."""
    print(f"Long run, one trajectory, dt = {long['dt']}:")
    print(
        f"{'method':<18} {'steps':>9} {'t_end':>9} {'seconds':>8} {'max|Δπ|':>9} "
        f"{'maxRᵀR-1':>9} {'maxΔK/K':>9}"
    )
    for name, r in long["methods"].items():
        s = drift_summary(r)
        print(
            f"{name:<18} {r['steps']:>9} {r['t_end']:>9.0f} {r['seconds']:>8.2f} "
            f"{s['spatial_momentum_drift_max']:>9.2e} {s['orthogonality_error_max']:>9.2e} "
            f"{s['energy_rel_drift_max']:>9.2e}"
        )


def plot_drift_histories(long, path, title, tolerance=None, floor=1e-18):
    """Spatial-momentum, orthogonality and energy drift against t, one curve per method of
    `long["methods"]` (records with `ts` and the `history_drift` keys); zeros drawn at floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {"IMIDM_compensated": ("C0", "-"), "IMIDM": ("C0", ":")}
    styles |= {"diffrax_RK4": ("C3", "-"), "diffrax_Tsit5": ("C2", "--")}
    keys = [
        ("spatial_momentum", "spatial momentum drift ‖RΠ − R₀Π₀‖"),
        ("orthogonality", "orthogonality error ‖RᵀR − 1‖_F"),
        ("energy_rel", "relative energy drift |K − K₀|/K₀"),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, (key, label) in zip(axes, keys):
        for name, rec in long["methods"].items():
            c, ls = styles.get(name, ("k", ":"))
            lab = f"{name} ({rec['steps']:.3g} steps, {rec['seconds']:.1f} s)"
            ax.semilogy(rec["ts"][1:], np.maximum(rec[key][1:], floor), color=c, ls=ls, label=lab)
        if tolerance is not None and key != "energy_rel":
            ax.axhline(tolerance, color="k", lw=0.8, ls=":", label=f"{tolerance:g}")
        ax.set_xlabel("t")
        ax.set_title(label, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend(fontsize=8, loc="best")
    kind = jax.devices()[0].device_kind
    fig.suptitle(f"{title}; {kind}; zeros drawn at {floor:g}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
