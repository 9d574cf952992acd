"""Long-run energy error of the passive rolling ball: the discrete Lagrange–d'Alembert
integrator (`NonholonomicDLA`) against explicit methods that preserve nothing.

The question (issue 13): with the masses fixed and no external force the energy is conserved;
is DLA's energy error bounded (oscillating) over 10⁵–10⁶ steps, where an explicit method's
drifts? McLachlan & Perlmutter (2006) observe bounded errors for reversible DLA methods on
reversible systems; Modin & Verdier (Numer. Math. 145 (2020) 405–435) give reversible KAM
theory on *reversible integrable* systems as the reason, and show it can fail outside them.

**Which configurations are reversible.** Every passive configuration of this model is
time-reversible under `R(q, Ω, x) = (q, −Ω, x)`: the kinetic energy is quadratic in the
velocities, the rolling constraint linear and homogeneous, gravity a potential force; no
choice of χ₀, inertia or mass positions breaks it (that would need gyroscopic or dissipative
forces, or a moving plane). What the configurations differ in is integrability and an invariant
measure, so the three studied are:

- `routh`: Routh's sphere — 𝕀 = diag(0.4, 0.4, 0.5), χ₀ = (0, 0, −0.1), both masses at the
  bottom of their circles (on the symmetry axis): reversible and integrable (energy, Jellett's
  and Routh's integrals);
- `chaplygin`: Chaplygin's ball — full non-diagonal 𝕀, χ₀ = 0, the masses at (0, 0, ±½) (centre
  of mass at the centre): reversible, integrable, with an invariant measure;
- `top`: the general case the issue asks for — full non-diagonal 𝕀, χ₀ = (0.05, −0.03, −0.1),
  masses fixed off-axis at θ = (−π/2 + 0.6, −π/2 − 0.4): reversible but not integrable and
  without an invariant measure (the "Chaplygin top", whose reduced flow has attractors paired
  with repellers: Borisov, Kazakov & Sataev, Regul. Chaotic Dyn. 19 (2014), 21 (2016)) —
  outside the class where reversibility is known to give bounded errors.

All three: `two_circles_ball` geometry (r = 1, m₀ = 1, m₁ = m₂ = 0.25 on circles of radius ½,
g = 9.81), masses held by `ConstantControl`, `F = 0`, `q₀ = exp((0.3, −0.2, 0.1))`,
`Ω₀ = (1, 2, 3)`, contact point at the origin; the normal force stays positive (≥ 13; recorded).

**Methods**, each through `jaxrigid.simulate` (one `lax.scan`, every state saved): `DLA`
(default `Newton`); `RK4` and `Heun` — classical RK4 and Heun's second-order method on
`RollingBall.vector_field`, `q` renormalised after each step (written here); `RKMK4` (explicit
Munthe-Kaas RK4 of `jaxrigid.integrators.rkmk`) when that module is present.
dt = 0.01 and 0.02, `--steps` steps (default 10⁶).

**Recorded** per configuration, dt and method: `max|E − E₀|` over the first 10³ steps, the last
10³ steps, the whole run, and over the decades [0, 10³), [10³, 10⁴), …; the signed mean of
`E − E₀` over ten equal windows (the shape of a drift); the mean kinetic energy over the same
windows (whether the trajectory itself migrates); `max ||q| − 1|`, `max |x₃ − r|`; for DLA
the largest discrete-constraint defect (`discrete_rolling_defect`, every step) and Newton's
outcome; the minimum normal force (every 100th state); wall seconds (compile included).
`long_top`: the `top` configuration over `--long-steps` (5·10⁶) steps of 0.02 (t = 10⁵), DLA,
RK4 and RKMK4, every 10th state: `max|E − E₀|`, the mean of `E − E₀` and the mean kinetic
energy over each tenth of the run. Writes `rolling_ball_energy_<device>[_quick].json`.

    python bench/rolling_ball_energy.py            # ≈ 7 min on 2 cores
    python bench/rolling_ball_energy.py --quick --out /tmp/b   # 2·10⁴ steps
"""

from __future__ import annotations

import math
import time
from typing import ClassVar

import _common as common

LONG_DT, LONG_SAVE_EVERY = 0.02, 10

p = common.parser(__doc__)
p.add_argument("--steps", type=int, default=None, help="steps per run, a multiple of 10 (1e6)")
p.add_argument("--dts", type=float, nargs="+", default=[0.01, 0.02])
p.add_argument("--long-steps", type=int, default=None, help="the long `top` run (5e6)")
A = p.parse_args()
A.steps = A.steps or (20_000 if A.quick else 1_000_000)
A.long_steps = A.long_steps or (40_000 if A.quick else 5_000_000)
if A.steps % 10 or A.steps < 2000:
    p.error("--steps must be a multiple of 10, at least 2000")
if A.long_steps % (10 * LONG_SAVE_EVERY):
    p.error(f"--long-steps must be a multiple of {10 * LONG_SAVE_EVERY}")
common.enable_x64_for("float64")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrigid.integrators.base import AbstractIntegrator, explicit_info  # noqa: E402
from jaxrigid.integrators.nonholonomic_lie import (  # noqa: E402
    NonholonomicDLA,
    discrete_rolling_defect,
)
from jaxrigid.lie import quaternion  # noqa: E402
from jaxrigid.models.rolling_ball import (  # noqa: E402
    rolling_ball_state,
    two_circles_ball,
)
from jaxrigid.models.rolling_ball.controls import ConstantControl  # noqa: E402
from jaxrigid.models.structures import AbstractAttitudeQuaternion  # noqa: E402
from jaxrigid.simulation import simulate  # noqa: E402

try:  # the explicit RKMK methods, where that module has landed
    from jaxrigid.integrators.rkmk import RKMK4  # noqa: E402
except ImportError:
    RKMK4 = None

WINDOW = 1000
FULL_INERTIA = ((0.4, 0.03, -0.02), (0.03, 0.45, 0.05), (-0.02, 0.05, 0.5))


class _ExplicitRK(AbstractIntegrator):
    """An explicit Runge–Kutta method on `vector_field` with `q` renormalised after the step."""

    structures = (AbstractAttitudeQuaternion,)

    def step(self, model, state, solver_state, t, dt):
        out = self.increment(model.vector_field, state, t, dt)
        info = explicit_info(state.q.dtype)
        return out._replace(q=quaternion.normalize(out.q)), solver_state, info


def _axpy(y, k, c):
    return jax.tree.map(lambda a, b: a + c * b, y, k)


class RK4(_ExplicitRK):
    """Classical RK4."""

    name: ClassVar[str] = "RK4"
    order: ClassVar[int] = 4

    @staticmethod
    def increment(f, y, t, h):
        k1 = f(t, y)
        k2 = f(t + h / 2, _axpy(y, k1, h / 2))
        k3 = f(t + h / 2, _axpy(y, k2, h / 2))
        k4 = f(t + h, _axpy(y, k3, h))
        return jax.tree.map(
            lambda y, a, b, c, d: y + h / 6 * (a + 2 * b + 2 * c + d), y, k1, k2, k3, k4
        )


class Heun(_ExplicitRK):
    """Heun's method (explicit trapezoid): order 2, like DLA."""

    name: ClassVar[str] = "Heun"
    order: ClassVar[int] = 2

    @staticmethod
    def increment(f, y, t, h):
        k1 = f(t, y)
        k2 = f(t + h, _axpy(y, k1, h))
        return jax.tree.map(lambda y, a, b: y + h / 2 * (a + b), y, k1, k2)


def configuration(name):
    """`(model, state0)` of a configuration of the module's docstring."""
    if name == "routh":
        model, _ = two_circles_ball(inertia=(0.4, 0.4, 0.5))
        theta = (-math.pi / 2, -math.pi / 2)
    elif name == "chaplygin":
        model, _ = two_circles_ball(inertia=FULL_INERTIA, chi0=(0.0, 0.0, 0.0))
        theta = (math.pi / 2, -math.pi / 2)
    else:
        model, _ = two_circles_ball(inertia=FULL_INERTIA, chi0=(0.05, -0.03, -0.1))
        theta = (-math.pi / 2 + 0.6, -math.pi / 2 - 0.4)
    model = eqx.tree_at(lambda m: m.control, model, ConstantControl(jnp.asarray(theta)))
    q0 = quaternion.from_rotation_vector(jnp.asarray([0.3, -0.2, 0.1]))
    return model, rolling_ball_state(model, q=q0, Omega=[1.0, 2.0, 3.0])


def _chunked(fn, *trees, size=100_000):
    """`jax.vmap(fn)` over the leading axis, in chunks (the energy of 10⁶ states)."""
    n = jax.tree.leaves(trees[0])[0].shape[0]
    f = jax.jit(jax.vmap(fn))
    parts = [f(*jax.tree.map(lambda a: a[i : i + size], trees)) for i in range(0, n, size)]
    return np.concatenate([np.asarray(x) for x in parts])


def analyse(model, sol, dt, dla):
    states = sol.states
    E = _chunked(lambda s: model.energy(0.0, s), states)
    resting = eqx.tree_at(lambda m: m.gravity, model, jnp.zeros_like(model.gravity))
    kinetic = _chunked(lambda s: resting.energy(0.0, s), states)
    dE = E - E[0]
    err = np.abs(dE)
    n = len(E) - 1
    rec = {
        "E0": E[0],
        "max_abs_dE_first_window": err[: WINDOW + 1].max(),
        "max_abs_dE_last_window": err[-WINDOW:].max(),
        "max_abs_dE_run": err.max(),
    }
    rec["ratio_last_to_first"] = rec["max_abs_dE_last_window"] / rec["max_abs_dE_first_window"]
    decades, lo, hi = {}, 0, WINDOW
    while lo < n:
        decades[f"[{lo}, {min(hi, n)})"] = err[lo:hi].max()
        lo, hi = hi, hi * 10
    rec["max_abs_dE_by_decade_of_steps"] = decades
    w = n // 10
    rec["window_t_ends"] = [(k + 1) * w * dt for k in range(10)]
    rec["signed_mean_dE_by_window"] = [dE[k * w : (k + 1) * w].mean() for k in range(10)]
    rec["mean_kinetic_energy_by_window"] = [kinetic[k * w : (k + 1) * w].mean() for k in range(10)]
    rec["max_quaternion_norm_error"] = np.abs(np.linalg.norm(states.q, axis=-1) - 1.0).max()
    rec["max_height_error"] = np.abs(np.asarray(states.x[:, 2]) - float(model.radius)).max()
    sample = jax.tree.map(lambda a: a[::100], states)
    rec["min_normal_force"] = _chunked(lambda s: model.normal_force(0.0, s), sample).min()
    if dla:
        pairs = jax.tree.map(lambda a: a[:-1], states), jax.tree.map(lambda a: a[1:], states)
        defect = _chunked(lambda a, b: discrete_rolling_defect(model, a, b), *pairs)
        rec["max_discrete_constraint_defect"] = np.abs(defect).max()
        rec["max_contact_point"] = np.abs(np.asarray(states.x[:, :2])).max()
        out = sol.outcome
        rec["newton"] = {
            "all_converged": bool(out.all_converged),
            "max_iterations": int(out.max_iterations),
            "max_residual": float(out.max_residual),
        }
    return rec


def long_top(methods):
    """The `top` configuration over `--long-steps` steps of 0.02 (t = 10⁵ by default), every
    10th state saved: `max|E − E₀|`, the mean of `E − E₀` and of the kinetic energy over each
    tenth of the run."""
    model, s0 = configuration("top")
    resting = eqx.tree_at(lambda m: m.gravity, model, jnp.zeros_like(model.gravity))
    out = {"dt": LONG_DT, "steps": A.long_steps, "save_every": LONG_SAVE_EVERY, "methods": {}}
    for mname, integrator in methods.items():
        t = time.perf_counter()
        sol = simulate(integrator, model, s0, LONG_DT, A.long_steps, save_every=LONG_SAVE_EVERY)
        jax.block_until_ready(sol.states)
        seconds = time.perf_counter() - t
        dE = _chunked(lambda s: model.energy(0.0, s), sol.states)
        dE = dE - dE[0]
        kinetic = _chunked(lambda s: resting.energy(0.0, s), sol.states)
        w = len(dE) // 10
        tenths = [slice(k * w, (k + 1) * w) for k in range(10)]
        out["methods"][mname] = {
            "max_abs_dE_by_tenth": [np.abs(dE[s]).max() for s in tenths],
            "signed_mean_dE_by_tenth": [dE[s].mean() for s in tenths],
            "mean_kinetic_energy_by_tenth": [kinetic[s].mean() for s in tenths],
            "seconds": seconds,
        }
        common.log(f"long top {mname}: max|dE| {np.abs(dE).max():.3e} ({seconds:.1f} s)")
    return out


def main():
    t_start = time.perf_counter()
    methods = {"DLA": NonholonomicDLA(), "RK4": RK4(), "Heun": Heun()}
    if RKMK4 is not None:
        methods["RKMK4"] = RKMK4()
    runs = {}
    for cname in ("routh", "chaplygin", "top"):
        model, s0 = configuration(cname)
        runs[cname] = {}
        for dt in A.dts:
            runs[cname][str(dt)] = {}
            for mname, integrator in methods.items():
                t = time.perf_counter()
                sol = simulate(integrator, model, s0, dt, A.steps)
                jax.block_until_ready(sol.states)
                seconds = time.perf_counter() - t
                rec = analyse(model, sol, dt, mname == "DLA") | {"seconds": seconds}
                runs[cname][str(dt)][mname] = rec
                common.log(
                    f"{cname} dt={dt} {mname}: first {rec['max_abs_dE_first_window']:.3e} "
                    f"last {rec['max_abs_dE_last_window']:.3e} run {rec['max_abs_dE_run']:.3e} "
                    f"({seconds:.1f} s)"
                )
    long_methods = {k: v for k, v in methods.items() if k in ("DLA", "RK4", "RKMK4")}
    record = {
        "long_top": long_top(long_methods),
        "steps": A.steps,
        "dts": A.dts,
        "window_steps": WINDOW,
        "initial_state": {"q": "exp((0.3, -0.2, 0.1))", "Omega": [1.0, 2.0, 3.0]},
        "methods": list(methods),
        "rkmk4_available": RKMK4 is not None,
        "runs": runs,
    }
    name = f"rolling_ball_energy_{common.device_tag(quick=A.quick)}.json"
    path = common.write_results(A.out, name, record, t_start)
    common.log(f"wrote {path}")
    print(f"{'config':10} {'dt':>5} {'method':6} {'first 1e3':>10} {'last 1e3':>10} {'run':>10}")
    for cname, by_dt in runs.items():
        for dt, by_m in by_dt.items():
            for mname, r in by_m.items():
                print(
                    f"{cname:10} {dt:>5} {mname:6} {r['max_abs_dE_first_window']:10.3e} "
                    f"{r['max_abs_dE_last_window']:10.3e} {r['max_abs_dE_run']:10.3e}"
                )


if __name__ == "__main__":
    main()
