"""The rolling ball with prescribed internal masses (`jaxrigid.models.rolling_ball`), its rails
and controls, against hand-written numpy and physics.

- Ω̇ against (B.8) of the model note written by hand in numpy (`hand_*`, below: quaternion
  matrix (D.15), `Γ = Λᵀe₃`, `sᵢ = rΓ + χᵢ`, rails' and controls' derivatives by their
  closed forms, `np.linalg.solve`), at random states and random parameters (full inertia,
  offset χ₀, four rail kinds, external force). Tolerance `RTOL = 1e-11` relative to the size
  of the terms: both sides evaluate the same closed form in float64 in a different order
  (cofactors against LAPACK, autodiff against closed-form derivatives), a few ulps times the
  condition number of `𝕀 − Σmŝ²` (≤ 8 for these draws); measured ≤ 9e-16 (Ω̇, contact
  force), ≤ 5e-17 (`dE/dt`). A wrong sign in any term of (B.8) is an O(1) mismatch.
- Energy: `dE/dt` along the exact flow (by `jax.jvp`) is zero with the masses fixed and
  `F = 0`, and equals the actuators' power (`hand_power`, derived in
  `RollingBall.actuator_power`) plus `F·ẋ` when they move — pointwise to round-off, and
  integrated over `t = 10` with scipy's DOP853 at `rtol = atol = 1e-12` (tolerance 1e-9
  relative: the integrator's global error, measured ≤ 1.3e-12 relative). Plausible sign
  errors in (B.8) break `dE/dt = 0` by O(1) (≥ 0.03 of the energy scale,
  `test_energy_catches_sign_errors`).
- Homogeneous ball rolls straight at constant speed; Routh's sphere conserves energy and
  Jellett's integral `⟨K, s₀⟩` (`K` the angular momentum about the contact point).
- Contact force against Newton's second law by hand; `N = Mg` at rest in equilibrium; the
  lift-off flag.
- Bad inputs raise, naming the problem; `jit` = eager, `vmap` = loop, `grad` = finite
  differences.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.interpolate import CubicSpline

from jaxrigid import _checks
from jaxrigid.lie import quaternion
from jaxrigid.models.rolling_ball import (
    TWO_CIRCLES_T_END,
    RollingBall,
    RollingBallState,
    check_rolling_ball_state,
    rolling_ball_state,
    two_circles_ball,
    vertical,
)
from jaxrigid.models.rolling_ball.controls import (
    ConstantControl,
    PiecewiseCubicControl,
    SinusoidControl,
    ZeroControl,
)
from jaxrigid.models.rolling_ball.rails import (
    CircleRail,
    EllipseRail,
    FigureEightRail,
    FunctionRail,
    SegmentRail,
    max_radius,
)

RTOL = 1e-11
E3 = np.array([0.0, 0.0, 1.0])
SEEDS = range(5)


# --- hand-written numpy: the note's equations, nothing imported from jaxrigid ---------------


def hand_matrix(q):
    """(D.15)."""
    q0, q1, q2, q3 = q
    return np.array(
        [
            [1 - 2 * (q2**2 + q3**2), 2 * (q1 * q2 - q0 * q3), 2 * (q1 * q3 + q0 * q2)],
            [2 * (q1 * q2 + q0 * q3), 1 - 2 * (q1**2 + q3**2), 2 * (q2 * q3 - q0 * q1)],
            [2 * (q1 * q3 - q0 * q2), 2 * (q2 * q3 + q0 * q1), 1 - 2 * (q1**2 + q2**2)],
        ]
    )


def hand_hat(v):
    return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])


def hand_rail(kind, p, th):
    """`(ζ, ζ′, ζ″)` of the rails in closed form."""
    c, s = np.cos(th), np.sin(th)
    if kind == "circle":
        z = p["centre"] + p["radius"] * (c * p["e1"] + s * p["e2"])
        dz = p["radius"] * (-s * p["e1"] + c * p["e2"])
        return z, dz, p["centre"] - z
    if kind == "ellipse":
        z = p["centre"] + p["a"] * c * p["e1"] + p["b"] * s * p["e2"]
        dz = -p["a"] * s * p["e1"] + p["b"] * c * p["e2"]
        return z, dz, p["centre"] - z
    if kind == "eight":
        z = p["centre"] + p["a"] * s * p["e1"] + p["b"] * s * c * p["e2"]
        dz = p["a"] * c * p["e1"] + p["b"] * np.cos(2 * th) * p["e2"]
        ddz = -p["a"] * s * p["e1"] - 2 * p["b"] * np.sin(2 * th) * p["e2"]
        return z, dz, ddz
    if kind == "segment":
        d = p["end"] - p["start"]
        return p["start"] + th * d, d, np.zeros(3)
    raise ValueError(kind)


def hand_control(p, t):
    """`θ, θ̇, θ̈` of `offset + amplitude sin(frequency t + phase)`."""
    arg = p["frequency"] * t + p["phase"]
    A, w = p["amplitude"], p["frequency"]
    return p["offset"] + A * np.sin(arg), A * w * np.cos(arg), -A * w**2 * np.sin(arg)


def hand_kinematics(P, t):
    """`m (n+1,)`, `χ, χ̇, χ̈ (n+1, 3)`, row 0 the shell (`χ̇₀ = χ̈₀ = 0`)."""
    m, chi, chid, chidd = [P["m0"]], [P["chi0"]], [np.zeros(3)], [np.zeros(3)]
    if P["rails"]:
        th, dth, ddth = hand_control(P["control"], t)
        for i, (kind, rp) in enumerate(P["rails"]):
            z, dz, ddz = hand_rail(kind, rp, th[i])
            m.append(P["masses"][i])
            chi.append(z)
            chid.append(dz * dth[i])
            chidd.append(ddz * dth[i] ** 2 + dz * ddth[i])
    return np.array(m), np.array(chi), np.array(chid), np.array(chidd)


def hand_omega_dot(P, t, q, Om, sign=None):
    """(B.8) solved for Ω̇. `sign` flips one term, for `test_energy_catches_sign_errors`."""
    sign = sign or {}
    m, chi, chid, chidd = hand_kinematics(P, t)
    L = hand_matrix(q)
    G = L.T @ E3
    Gt = L.T @ P["F"]
    I, r, g = P["inertia"], P["r"], P["g"]
    A = I.copy()
    rhs = -(sign.get("gyro", 1) * np.cross(Om, I @ Om) + r * np.cross(Gt, G))
    for i in range(len(m)):
        s = r * G + chi[i]
        A = A - sign.get("inertia", 1) * m[i] * hand_hat(s) @ hand_hat(s)
        w = (
            sign.get("gravity", 1) * g * G
            + sign.get("centripetal", 1) * np.cross(Om, np.cross(Om, chi[i]))
            + sign.get("coriolis", 1) * 2 * np.cross(Om, chid[i])
            + chidd[i]
        )
        rhs = rhs - m[i] * np.cross(s, w)
    return np.linalg.solve(A, rhs)


def hand_accelerations(P, t, q, Om):
    """Body accelerations `Λᵀaᵢ` of `yᵢ = x + Λχᵢ` with `ẋ = rΛ(Ω × Γ)`, `Λ̇ = ΛΩ̂`:
    `Ω̇ × sᵢ + Ω × (Ω × χᵢ) + 2Ω × χ̇ᵢ + χ̈ᵢ`."""
    m, chi, chid, chidd = hand_kinematics(P, t)
    G = hand_matrix(q).T @ E3
    Omd = hand_omega_dot(P, t, q, Om)
    s = P["r"] * G + chi
    acc = np.cross(Omd, s) + np.cross(Om, np.cross(Om, chi)) + 2 * np.cross(Om, chid) + chidd
    return m, acc, chid, G


def hand_contact_force(P, t, q, Om):
    """Newton's second law for ball and masses: `Σmᵢaᵢ = F_c + F − (Σmᵢ)g e₃`."""
    m, acc, _, G = hand_accelerations(P, t, q, Om)
    L = hand_matrix(q)
    return L @ np.sum(m[:, None] * (acc + P["g"] * G), axis=0) - P["F"]


def hand_power(P, t, q, Om):
    """The rails' power on the masses minus on the shell: `Σmᵢ(aᵢ + g e₃)·Λχ̇ᵢ`, in body axes."""
    m, acc, chid, G = hand_accelerations(P, t, q, Om)
    return float(np.sum(m * np.sum((acc + P["g"] * G) * chid, axis=-1)))


def hand_energy(P, t, q, Om, x):
    """`½Ω·𝕀Ω + Σ½mᵢ|vᵢ|² + gΣmᵢ e₃·yᵢ`, `vᵢ = ẋ + Λ(Ω × χᵢ + χ̇ᵢ)` spatial."""
    m, chi, chid, _ = hand_kinematics(P, t)
    L = hand_matrix(q)
    xdot = P["r"] * np.cross(L @ Om, E3)
    K = 0.5 * Om @ P["inertia"] @ Om
    V = 0.0
    for i in range(len(m)):
        v = xdot + L @ (np.cross(Om, chi[i]) + chid[i])
        K += 0.5 * m[i] * v @ v
        V += P["g"] * m[i] * (x + L @ chi[i])[2]
    return K + V


# --- random problems -----------------------------------------------------------------------


def random_rotation(rng):
    Q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    Q = Q * np.sign(np.diag(r))
    return Q if np.linalg.det(Q) > 0 else -Q


def random_inertia(rng, scale=0.4):
    """`tr(J) − J` of a random SPD second moment (a rigid body's), rotated: full, SPD."""
    Q = random_rotation(rng)
    J = Q @ np.diag(rng.uniform(0.5, 2.0, 3)) @ Q.T
    return scale * (np.trace(J) * np.eye(3) - J)


def random_params(rng, n_rails=4, force=True, actuated=True):
    """Random ball: radius, m₀, full 𝕀, χ₀, rails (circle, ellipse, figure eight, segment),
    masses, a sinusoid control, and an external force."""
    r = rng.uniform(0.8, 1.5)
    rails = []
    kinds = ["circle", "ellipse", "eight", "segment"][:n_rails]
    for kind in kinds:
        Q = random_rotation(rng)
        c = rng.uniform(-0.15, 0.15, 3) * r
        if kind == "circle":
            rails.append((kind, dict(centre=c, radius=rng.uniform(0.2, 0.5) * r, e1=Q[0], e2=Q[1])))
        elif kind in ("ellipse", "eight"):
            a, b = rng.uniform(0.2, 0.5, 2) * r
            rails.append((kind, dict(centre=c, a=a, b=b, e1=Q[0], e2=Q[1])))
        else:
            rails.append((kind, dict(start=c - 0.4 * r * Q[2], end=c + 0.4 * r * Q[2])))
    n = len(rails)
    control = dict(
        offset=rng.uniform(-1, 1, n),
        amplitude=rng.uniform(0.2, 1.0, n) if actuated else np.zeros(n),
        frequency=rng.uniform(0.5, 2.0, n),
        phase=rng.uniform(0, 2 * np.pi, n),
    )
    for k, (kind, _) in enumerate(rails):  # keep the segments' θ inside [0, 1]
        if kind == "segment":
            control["offset"][k] = 0.5
            control["amplitude"][k] = min(control["amplitude"][k], 0.4)
    return dict(
        r=r,
        m0=rng.uniform(0.5, 2.0),
        inertia=random_inertia(rng),
        chi0=rng.uniform(-0.2, 0.2, 3) * r,
        masses=rng.uniform(0.1, 1.0, n),
        rails=rails,
        control=control,
        g=9.81,
        F=rng.standard_normal(3) if force else np.zeros(3),
    )


def build_rail(kind, p):
    a = {k: jnp.asarray(v) for k, v in p.items()}
    if kind == "circle":
        return CircleRail(a["centre"], a["radius"], a["e1"], a["e2"])
    if kind == "ellipse":
        return EllipseRail(a["centre"], a["a"], a["b"], a["e1"], a["e2"])
    if kind == "eight":
        return FigureEightRail(a["centre"], a["a"], a["b"], a["e1"], a["e2"])
    return SegmentRail(a["start"], a["end"])


def build_model(P):
    c = {k: jnp.asarray(v) for k, v in P["control"].items()}
    return RollingBall(
        radius=jnp.asarray(P["r"]),
        mass=jnp.asarray(P["m0"]),
        inertia=jnp.asarray(P["inertia"]),
        chi0=jnp.asarray(P["chi0"]),
        masses=jnp.asarray(P["masses"]),
        rails=tuple(build_rail(k, p) for k, p in P["rails"]),
        control=SinusoidControl(c["offset"], c["amplitude"], c["frequency"], c["phase"]),
        gravity=jnp.asarray(P["g"]),
        external_force=jnp.asarray(P["F"]),
    )


def random_state(rng, r, omega_scale=2.0):
    q = rng.standard_normal(4)
    q /= np.linalg.norm(q)
    x = np.array([*rng.standard_normal(2), r])
    return q, omega_scale * rng.standard_normal(3), x


def as_state(q, Om, x):
    return RollingBallState(jnp.asarray(q), jnp.asarray(Om), jnp.asarray(x))


def rel_err(got, want, scale=None):
    got, want = np.asarray(got), np.asarray(want)
    scale = np.max(np.abs(want)) if scale is None else scale
    return float(np.max(np.abs(got - want)) / scale)


# --- compiled helpers: one compile per model structure --------------------------------------


def _compiled(fn):
    """`fn(model, *args)` compiled once per model structure: the model and every argument
    traced (Python floats as arrays, which `filter_jit` would otherwise take as static)."""
    jitted = eqx.filter_jit(fn)
    return lambda model, *args: jitted(model, *(jax.tree.map(jnp.asarray, a) for a in args))


vector_field = _compiled(lambda m, t, s: m.vector_field(t, s))
omega_dot = _compiled(lambda m, t, s: m.omega_dot(t, s))
contact_force = _compiled(lambda m, t, s: m.contact_force(t, s))
contact_observables = _compiled(lambda m, *a: m.contact_observables(*a))
energy = _compiled(lambda m, t, s: m.energy(t, s))
power = _compiled(lambda m, t, s: m.actuator_power(t, s) + m.external_power(t, s))


@_compiled
def _flow_rhs(model, t, y):
    s = RollingBallState(y[:4], y[4:7], y[7:10])
    f = model.vector_field(t, s)
    power = model.actuator_power(t, s) + model.external_power(t, s)
    return jnp.concatenate([f.q, f.Omega, f.x, power[None]])


@_compiled
def _energy(model, t, y):
    return model.energy(t, RollingBallState(y[:4], y[4:7], y[7:10]))


@_compiled
def _energy_rate(model, t, s, f=None):
    """`dE/dt` along the exact flow (or along the field `f`), by `jax.jvp` (independent of
    any power formula)."""
    t = jnp.asarray(t)
    f = model.vector_field(t, s) if f is None else f
    return jax.jvp(model.energy, (t, s), (jnp.ones_like(t), f))[1]


def integrate(model, state, t_end, n_out=11):
    """DOP853 at rtol = atol = 1e-12 on the model's vector field, with the work
    `W = ∫ (actuator_power + external_power) dt` as an 11th component."""
    y0 = np.concatenate([np.asarray(v) for v in state] + [np.zeros(1)])
    sol = solve_ivp(
        lambda t, y: np.asarray(_flow_rhs(model, t, y)),
        (0.0, t_end),
        y0,
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=np.linspace(0.0, t_end, n_out),
    )
    assert sol.success
    return sol.t, sol.y.T


# --- Ω̇, the contact force, the energy and the power against the hand-written note ---------


@pytest.mark.parametrize("seed", SEEDS)
def test_omega_dot_is_B8_by_hand(seed):
    rng = np.random.default_rng(seed)
    P = random_params(rng)
    model = build_model(P)
    for _ in range(4):
        t = rng.uniform(0, 10)
        q, Om, x = random_state(rng, P["r"])
        got = omega_dot(model, t, as_state(q, Om, x))
        want = hand_omega_dot(P, t, q, Om)
        assert rel_err(got, want, np.max(np.abs(want)) + 1.0) < RTOL


# --- the component-wise Ω̇ against a dense evaluation of (B.8) ------------------------------


def dense_hat(v):
    """`v̂`, `hat(v) @ a = v × a`, as a dense matrix."""
    zero = jnp.zeros_like(v[0])
    return jnp.array([[zero, -v[2], v[1]], [v[2], zero, -v[0]], [-v[1], v[0], zero]])


def dense_omega_dot(model, t, state):
    """(B.8) solved for `Ω̇` in dense `jnp` algebra, term by term from the equation: `Λ` (D.15),
    `Γ = Λᵀe₃`, `Γ̃ = ΛᵀF`, `sᵢ = rΓ + χᵢ`, `𝕀Ω̇ − Σ mᵢ ŝᵢŝᵢ Ω̇ = −[Ω × 𝕀Ω + rΓ̃ × Γ +
    Σ mᵢ sᵢ × (gΓ + Ω × (Ω × χᵢ + 2χ̇ᵢ) + χ̈ᵢ)]` with `jnp.cross`, `@` and `jnp.linalg.solve`
    (LU). The kinematics `χ, χ̇, χ̈` are the model's (checked by hand in
    `test_omega_dot_is_B8_by_hand`): what is compared is the assembly and the solve."""
    m = model.weights()
    chi, chid, chidd = model.mass_kinematics(t)
    Lam = quaternion.to_matrix(state.q)
    Gamma = Lam.T @ jnp.asarray([0.0, 0.0, 1.0], Lam.dtype)
    Gamma_tilde = Lam.T @ model.external_force
    Om, r, g = state.Omega, model.radius, model.gravity
    A = model.inertia
    rhs = -(jnp.cross(Om, model.inertia @ Om) + r * jnp.cross(Gamma_tilde, Gamma))
    for i in range(m.shape[0]):
        s = r * Gamma + chi[i]
        A = A - m[i] * dense_hat(s) @ dense_hat(s)
        brace = g * Gamma + jnp.cross(Om, jnp.cross(Om, chi[i]) + 2.0 * chid[i]) + chidd[i]
        rhs = rhs - m[i] * jnp.cross(s, brace)
    return jnp.linalg.solve(A, rhs)


dense = _compiled(dense_omega_dot)


def _random_states(rng, r, n):
    q, Om, x = zip(*(random_state(rng, r) for _ in range(n)))
    return RollingBallState(*(jnp.asarray(np.stack(a)) for a in (q, Om, x)))


def _scale(model, t, states):
    """`1 + max|Ω̇|` over the states: the scale of `Ω̇`'s round-off (`1 +` where it is small)."""
    return 1.0 + float(np.max(np.abs(jax.vmap(dense_omega_dot, (None, None, 0))(model, t, states))))


@pytest.mark.parametrize("seed", SEEDS)
def test_omega_dot_equals_dense_B8(seed):
    """`RollingBall.omega_dot` (mass by mass, cofactors) = `dense_omega_dot` (dense matrices,
    LU) at 8 random states and random parameters (full 𝕀, χ₀, four rails, external force), to
    `1e-13` relative to `1 + max|Ω̇|`: the same float64 closed form summed in another order, a
    few ulps times `cond(A)` (≤ 8 for these draws); measured ≤ 7e-16. Also under `vmap` over
    the states and over a control amplitude swept per member (`vmap` = the dense members)."""
    rng = np.random.default_rng(300 + seed)
    P = random_params(rng)
    model = build_model(P)
    t = rng.uniform(0, 10)
    states = _random_states(rng, P["r"], 8)
    scale = _scale(model, t, states)
    for j in range(8):
        s = jax.tree.map(lambda a: a[j], states)  # noqa: B023
        assert rel_err(omega_dot(model, t, s), dense(model, t, s), scale) < 1e-13
    fast = jax.jit(jax.vmap(RollingBall.omega_dot, (None, None, 0)))(model, t, states)
    want = np.stack([dense(model, t, jax.tree.map(lambda a: a[j], states)) for j in range(8)])  # noqa: B023
    assert rel_err(fast, want, scale) < 1e-13

    amps = jnp.asarray(rng.uniform(0.2, 1.0, (8, len(P["masses"]))))

    def swept(amp, s):
        m = eqx.tree_at(lambda m: m.control.amplitude, model, amp)
        return m.omega_dot(t, s), dense_omega_dot(m, t, s)

    fast, want = jax.jit(jax.vmap(swept))(amps, states)
    assert fast.shape == (8, 3)
    assert rel_err(fast, want, 1.0 + np.max(np.abs(want))) < 1e-13


@pytest.mark.parametrize("seed", SEEDS)
def test_omega_dot_float32_equals_dense_B8(seed):
    """In float32 (model and state cast; x64 stays on, so nothing is promoted silently) the
    result is float32 and equals the float64 dense evaluation of the same float32 inputs to
    `5e-6` relative to `1 + max|Ω̇|`: float32 round-off `eps₃₂ = 1.2e-7` over a few dozen
    operations, amplified by `cond(A)` (≤ 8) and by the cancellation among the torque terms
    (each up to ~10× `|Ω̇|` here); measured ≤ 3e-7. Also under `vmap`."""
    rng = np.random.default_rng(400 + seed)
    P = random_params(rng)
    model64 = build_model(P)
    t = float(np.float32(rng.uniform(0, 10)))
    states64 = _random_states(rng, P["r"], 8)
    f32 = lambda a: a.astype(jnp.float32) if eqx.is_inexact_array(a) else a  # noqa: E731
    model32, states32 = jax.tree.map(f32, model64), jax.tree.map(f32, states64)
    f64 = lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a  # noqa: E731
    model_r, states_r = jax.tree.map(f64, model32), jax.tree.map(f64, states32)  # rounded inputs
    got = jax.jit(jax.vmap(RollingBall.omega_dot, (None, None, 0)))(
        model32, jnp.float32(t), states32
    )
    assert got.dtype == jnp.float32
    want = jax.jit(jax.vmap(dense_omega_dot, (None, None, 0)))(model_r, t, states_r)
    assert rel_err(got, want, 1.0 + np.max(np.abs(want))) < 5e-6
    one = omega_dot(model32, jnp.float32(t), jax.tree.map(lambda a: a[0], states32))
    assert one.dtype == jnp.float32
    assert rel_err(one, want[0], 1.0 + np.max(np.abs(want))) < 5e-6


@pytest.mark.parametrize("seed", SEEDS)
def test_vector_field_kinematics(seed):
    """`q̇ = ½ q Ω♯` (D.7 product), `ẋ = rΛ(Ω × Γ) = r ω × e₃`, and `Γ = Λᵀe₃` (D.15)."""
    rng = np.random.default_rng(seed)
    P = random_params(rng)
    model = build_model(P)
    q, Om, x = random_state(rng, P["r"])
    f = vector_field(model, 0.7, as_state(q, Om, x))
    q0, qv = q[0], q[1:]
    qdot = 0.5 * np.concatenate([[-qv @ Om], q0 * Om + np.cross(qv, Om)])
    L = hand_matrix(q)
    assert rel_err(f.q, qdot) < 1e-14
    assert rel_err(f.x, P["r"] * np.cross(L @ Om, E3)) < 1e-14
    assert rel_err(vertical(jnp.asarray(q)), L.T @ E3) < 1e-14


@pytest.mark.parametrize("seed", SEEDS)
def test_contact_force_energy_and_power_by_hand(seed):
    """The contact force (model: autodiff of the positions along the flow) against Newton's
    second law with hand accelerations; the energy against `½Σm|v|²` with spatial
    velocities; `dE/dt` (jvp) = the rails' power + `F·ẋ` (hand) = `actuator_power +
    external_power` (model)."""
    rng = np.random.default_rng(100 + seed)
    P = random_params(rng)
    model = build_model(P)
    t = rng.uniform(0, 10)
    q, Om, x = random_state(rng, P["r"])
    s = as_state(q, Om, x)
    Fc = hand_contact_force(P, t, q, Om)
    assert rel_err(contact_force(model, t, s), Fc, np.max(np.abs(Fc)) + 1.0) < RTOL
    assert rel_err(energy(model, t, s), hand_energy(P, t, q, Om, x)) < RTOL
    xdot = P["r"] * np.cross(hand_matrix(q) @ Om, E3)
    want = hand_power(P, t, q, Om) + P["F"] @ xdot
    # scale: the size of the terms that cancel in dE/dt (kinetic energy times |Ω̇| or |Ω|)
    scale = abs(want) + hand_energy(P, t, q, Om, x) * (1 + np.linalg.norm(Om))
    assert abs(float(_energy_rate(model, t, s)) - want) / scale < RTOL
    assert abs(float(power(model, t, s)) - want) / scale < RTOL


@pytest.mark.parametrize("seed", SEEDS)
def test_energy_rate_zero_with_masses_fixed(seed):
    """Pointwise, at random states: `dE/dt = 0` to round-off when the masses are fixed
    (zero amplitude) and `F = 0`."""
    rng = np.random.default_rng(200 + seed)
    model = build_model(random_params(rng, force=False, actuated=False))
    q, Om, x = random_state(rng, float(model.radius))
    s = as_state(q, Om, x)
    scale = float(energy(model, 0.3, s)) * (1 + np.linalg.norm(Om))
    assert abs(float(_energy_rate(model, 0.3, s))) / scale < RTOL


@pytest.mark.parametrize(
    "flip", ["inertia", "gravity", "centripetal", "coriolis"], ids=lambda f: f"flip-{f}"
)
def test_energy_catches_sign_errors(flip):
    """The energy test has teeth: flipping the sign of one term of (B.8) makes `dE/dt` O(1)
    (≥ 1e-3 of the energy scale) at a random state, with masses fixed (Coriolis: moving).
    The gyroscopic term `Ω × 𝕀Ω` does no work (`Ω·(Ω × 𝕀Ω) = 0`), so the energy cannot see
    its sign: Jellett's integral can (`test_jellett_catches_gyroscopic_sign`)."""
    rng = np.random.default_rng(7)
    actuated = flip == "coriolis"
    P = random_params(rng, force=False, actuated=actuated)
    model = build_model(P)
    q, Om, x = random_state(rng, P["r"])
    s = as_state(q, Om, x)
    t = 0.4
    wrong = hand_omega_dot(P, t, q, Om, sign={flip: -1})
    f = vector_field(model, t, s)._replace(Omega=jnp.asarray(wrong))
    rate = _energy_rate(model, t, s, f)
    want = hand_power(P, t, q, Om) if actuated else 0.0
    scale = float(energy(model, t, s)) * (1 + np.linalg.norm(Om))
    assert abs(float(rate) - want) / scale > 1e-3


ROUTH = dict(r=1.0, m0=1.0, inertia=np.diag([0.3, 0.3, 0.5]), chi0=np.array([0.0, 0.0, -0.3]))


def routh_sphere():
    P = dict(ROUTH, masses=np.zeros(0), rails=[], control=None, g=9.81, F=np.zeros(3))
    model = RollingBall(P["r"], P["m0"], jnp.asarray(P["inertia"]), jnp.asarray(P["chi0"]))
    return P, model


def jellett(q, Om):
    """Jellett's integral of Routh's sphere: `⟨K, s₀⟩`, `K = 𝕀Ω + m₀ s₀ × (Ω × s₀)` the
    angular momentum about the contact point, `s₀ = rΓ + χ₀`, `Γ` the third row of (D.15)."""
    q0, q1, q2, q3 = q[0], q[1], q[2], q[3]
    G = jnp.stack([2 * (q1 * q3 - q0 * q2), 2 * (q2 * q3 + q0 * q1), 1 - 2 * (q1**2 + q2**2)])
    s0 = ROUTH["r"] * G + ROUTH["chi0"]
    K = ROUTH["inertia"] @ Om + ROUTH["m0"] * jnp.cross(s0, jnp.cross(Om, s0))
    return K @ s0


def test_jellett_catches_gyroscopic_sign():
    """Along (B.8), `dJ/dt = 0` for Routh's sphere (round-off); with `−Ω × 𝕀Ω` it is O(1)."""
    rng = np.random.default_rng(8)
    P, model = routh_sphere()
    q, Om, x = random_state(rng, P["r"])
    s = as_state(q, Om, x)
    J = lambda st: jellett(st.q, st.Omega)
    for sign, ok in (({}, True), ({"gyro": -1}, False)):
        f = vector_field(model, 0.0, s)._replace(
            Omega=jnp.asarray(hand_omega_dot(P, 0.0, q, Om, sign))
        )
        rate = float(jax.jvp(J, (s,), (f,))[1])
        scale = abs(float(J(s))) * (1 + np.linalg.norm(Om))
        assert (abs(rate) / scale < RTOL) == ok


def test_energy_conserved_masses_fixed_t10():
    """Asymmetric ball (full 𝕀, χ₀ off every axis), four masses fixed on their rails
    (zero amplitude), `F = 0`, spinning and tumbling over `t = 10`: the energy of the DOP853
    reference (rtol 1e-12) is conserved to 1e-9 relative (measured 7e-13)."""
    rng = np.random.default_rng(42)
    P = random_params(rng, force=False, actuated=False)
    model = build_model(P)
    q, Om, x = random_state(rng, P["r"])
    ts, ys = integrate(model, as_state(q, Om, x), 10.0)
    E = np.array([float(_energy(model, t, y[:10])) for t, y in zip(ts, ys)])
    assert np.max(np.abs(E - E[0])) / abs(E[0]) < 1e-9
    assert np.max(np.abs(ys[:, 10])) < 1e-9 * abs(E[0])  # the injected work is zero
    assert np.max(np.abs(np.linalg.norm(ys[:, :4], axis=1) - 1)) < 1e-9
    np.testing.assert_array_equal(ys[:, 9], P["r"])  # ẋ₃ = 0 exactly


def test_energy_change_is_actuator_work_t10():
    """Actuated: `E(t) − E(0) = ∫ (actuator_power + external_power) dt` along the DOP853
    reference of the contract case with an external force added, over `t = 10`, to 1e-9 of
    the energy scale (both integrated at rtol 1e-12; measured 3e-13, while E changes by 27%)."""
    model, state0 = two_circles_ball()
    model = eqx.tree_at(lambda m: m.external_force, model, jnp.asarray([0.3, -0.2, 0.5]))
    state0 = state0._replace(Omega=jnp.asarray([0.2, -0.1, 0.3]))
    ts, ys = integrate(model, state0, TWO_CIRCLES_T_END)
    E = np.array([float(_energy(model, t, y[:10])) for t, y in zip(ts, ys)])
    assert np.max(np.abs(E - E[0])) > 1e-2 * abs(E[0])  # the actuators do work
    assert np.max(np.abs((E - E[0]) - ys[:, 10])) / abs(E[0]) < 1e-9


# --- physics --------------------------------------------------------------------------------


def test_homogeneous_ball_rolls_straight():
    """No masses, `χ₀ = 0`, `𝕀 = (2/5)m₀r²𝟙`: the spatial angular velocity `ω = ΛΩ` is
    constant and the centre moves on a straight line at constant speed, `x(t) = x₀ +
    t r ω × e₃`. Tolerance 1e-9 (1 + t): DOP853 at rtol 1e-12 over t = 10 (measured 9e-12)."""
    r, m0 = 0.7, 2.0
    model = RollingBall(r, m0, 0.4 * m0 * r**2 * jnp.eye(3), jnp.zeros(3))
    rng = np.random.default_rng(3)
    q = rng.standard_normal(4)
    q /= np.linalg.norm(q)
    omega = np.array([1.2, -0.7, 0.4])
    state = rolling_ball_state(model, q=q, Omega=hand_matrix(q).T @ omega, contact=(0.3, -0.1))
    assert np.max(np.abs(np.asarray(omega_dot(model, 0.0, state)))) < 1e-15
    ts, ys = integrate(model, state, 10.0)
    for t, y in zip(ts, ys):
        L = hand_matrix(y[:4] / np.linalg.norm(y[:4]))
        np.testing.assert_allclose(L @ y[4:7], omega, atol=1e-9)
        want = np.asarray(state.x) + t * r * np.cross(omega, E3)
        np.testing.assert_allclose(y[7:10], want, atol=1e-9 * (1 + t))


def test_routh_sphere_energy_and_jellett():
    """Routh's sphere (axisymmetric `𝕀`, centre of mass on the axis, no masses): energy and
    Jellett's integral (`jellett`) are conserved over `t = 10` (1e-9 relative: DOP853 at
    rtol 1e-12; measured 5e-13 and 1.3e-12), while the tilt `Γ₃` changes."""
    P, model = routh_sphere()
    q = np.array([0.9, 0.3, 0.2, 0.1])
    q /= np.linalg.norm(q)
    state = rolling_ball_state(model, q=q, Omega=[0.3, 0.2, 5.0])
    ts, ys = integrate(model, state, 10.0)
    E = np.array([float(_energy(model, t, y[:10])) for t, y in zip(ts, ys)])
    J = np.array([float(jellett(y[:4], y[4:7])) for y in ys])
    assert np.max(np.abs(E - E[0])) / abs(E[0]) < 1e-9
    assert np.max(np.abs(J - J[0])) / abs(J[0]) < 1e-9
    gamma3 = [(hand_matrix(y[:4]).T @ E3)[2] for y in ys]
    assert np.ptp(gamma3) > 1e-2


def test_contact_force_at_rest_in_equilibrium():
    """Masses fixed at the bottom of their circles, `χ₀` below the centre, at rest: an
    equilibrium (`Ω̇ = 0`), `N = (Σm)g`, no friction needed."""
    model, state = two_circles_ball(amplitude=0.0)
    assert np.max(np.abs(np.asarray(omega_dot(model, 0.0, state)))) < 1e-15
    obs = contact_observables(model, 0.0, state)
    np.testing.assert_allclose(float(obs["normal_force"]), 1.5 * 9.81, rtol=1e-15)
    assert float(obs["friction_needed"]) < 1e-15
    assert not bool(obs["lifts_off"]) and not bool(obs["slips"])
    np.testing.assert_allclose(contact_force(model, 0.0, state), [0, 0, 1.5 * 9.81], atol=1e-14)


def test_lift_off_is_flagged():
    """A mass of 3 shaken along the vertical diameter (`θ = ½ + 0.45 sin 8t` on a segment):
    the ball stays at rest and `N(t) = (m₀ + m₁)g + m₁θ̈` turns negative, which is flagged;
    an upward external force of twice the weight also lifts it."""
    m1, w = 3.0, 8.0
    control = SinusoidControl(
        jnp.asarray([0.5]), jnp.asarray([0.45]), jnp.asarray([w]), jnp.asarray([0.0])
    )
    rail = SegmentRail(jnp.asarray([0.0, 0.0, -0.5]), jnp.asarray([0.0, 0.0, 0.5]))
    model = RollingBall(
        1.0, 1.0, 0.4 * jnp.eye(3), jnp.zeros(3), jnp.asarray([m1]), (rail,), control
    )
    state = rolling_ball_state(model)
    ts = np.linspace(0, 2 * np.pi / w, 9)
    obs = [contact_observables(model, t, state) for t in ts]
    N = np.array([float(o["normal_force"]) for o in obs])
    want = (1.0 + m1) * 9.81 - m1 * 0.45 * w**2 * np.sin(w * ts)
    np.testing.assert_allclose(N, want, rtol=1e-13, atol=1e-13)
    flags = [bool(o["lifts_off"]) for o in obs]
    assert flags == list(N < 0) and any(flags) and not all(flags)
    assert float(obs[2]["friction_needed"]) == np.inf  # N < 0 there
    up = eqx.tree_at(lambda m: m.external_force, model, jnp.asarray([0.0, 0.0, 8 * 9.81]))
    assert bool(contact_observables(up, 0.0, state)["lifts_off"])


def test_slip_flag_uses_the_friction_coefficient():
    model, state = two_circles_ball()
    mu = float(contact_observables(model, 0.0, state)["friction_needed"])
    assert 0 < mu < np.inf
    assert bool(contact_observables(model, 0.0, state, 0.5 * mu)["slips"])
    assert not bool(contact_observables(model, 0.0, state, 2 * mu)["slips"])


# --- the contract case ----------------------------------------------------------------------


def test_two_circles_contract_defaults():
    model, state = two_circles_ball()
    np.testing.assert_array_equal(model.radius, 1.0)
    np.testing.assert_array_equal(model.mass, 1.0)
    np.testing.assert_array_equal(model.inertia, np.diag([0.4, 0.45, 0.5]))
    np.testing.assert_array_equal(model.chi0, [0.0, 0.0, -0.1])
    np.testing.assert_array_equal(model.masses, [0.25, 0.25])
    np.testing.assert_array_equal(model.gravity, 9.81)
    np.testing.assert_array_equal(model.external_force, np.zeros(3))
    np.testing.assert_array_equal(state.q, [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(state.Omega, np.zeros(3))
    np.testing.assert_array_equal(state.x, [0.0, 0.0, 1.0])
    assert TWO_CIRCLES_T_END == 10.0
    for th in (0.3, -1.1):
        np.testing.assert_allclose(model.rails[0](th), 0.5 * np.array([np.cos(th), 0, np.sin(th)]))
        np.testing.assert_allclose(model.rails[1](th), 0.5 * np.array([0, np.cos(th), np.sin(th)]))
    for t in (0.0, 2.3):
        want = -np.pi / 2 + 0.8 * np.sin(1.5 * t + np.array([0.0, np.pi / 2]))
        np.testing.assert_allclose(model.control(t), want, rtol=1e-15)
    assert model.state_event_ndims() == RollingBallState(1, 1, 1)


# --- rails and controls ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["circle", "ellipse", "eight", "segment"])
def test_rail_derivatives_by_autodiff(kind):
    """`ζ′, ζ″` by jvp against the closed forms (1e-14 relative: a few ulps)."""
    rng = np.random.default_rng(5)
    P = random_params(rng)
    (k, p) = next(rp for rp in P["rails"] if rp[0] == kind)
    rail = build_rail(k, p)
    for th in rng.uniform(-4, 4, 3):
        for got, want in zip(rail.derivatives(th), hand_rail(k, p, th)):
            assert rel_err(got, want, 1.0) < 1e-14


def test_function_rail_and_sweeps():
    """A user curve (a tilted circle written as a function) equals `CircleRail`; its
    `params` sweep with `params_event_ndims`; `max_radius` maps over sweep axes (= a loop)."""
    fn = lambda th, p: p["c"] + p["rho"] * jnp.stack([jnp.cos(th), jnp.sin(th), 0.0 * th])
    params = {"c": jnp.asarray([0.1, 0.0, 0.2]), "rho": jnp.asarray(0.4)}
    user = FunctionRail(fn, params)
    circle = CircleRail(
        params["c"], params["rho"], jnp.asarray([1.0, 0, 0]), jnp.asarray([0, 1.0, 0])
    )
    for a, b in zip(user.derivatives(0.7), circle.derivatives(0.7)):
        np.testing.assert_allclose(a, b, rtol=1e-15, atol=1e-16)
    # max over the circle of |c + ρ(cos, sin, 0)| is √(0.2² + (0.1 + 0.4)²), at θ = 0 (sampled)
    np.testing.assert_allclose(max_radius(circle), math.hypot(0.2, 0.5), rtol=1e-15)
    rhos = jnp.asarray([0.2, 0.4, 0.6])
    swept = CircleRail(params["c"], rhos, circle.e1, circle.e2)
    loop = [max_radius(eqx.tree_at(lambda r: r.radius, circle, rho)) for rho in rhos]
    np.testing.assert_allclose(max_radius(swept), loop, rtol=1e-15)
    swept_user = FunctionRail(
        fn, {"c": params["c"], "rho": rhos}, params_event_ndims={"c": 1, "rho": 0}
    )
    np.testing.assert_allclose(max_radius(swept_user), loop, rtol=1e-15)
    seg = SegmentRail(jnp.asarray([0.0, 0.0, -0.3]), jnp.asarray([0.5, 0.0, 0.0]))
    np.testing.assert_allclose(max_radius(seg), 0.5, rtol=1e-15)


def test_sinusoid_and_constant_controls():
    rng = np.random.default_rng(9)
    p = {k: rng.uniform(-1, 1, 3) for k in ("offset", "amplitude", "frequency", "phase")}
    c = SinusoidControl(*(jnp.asarray(p[k]) for k in ("offset", "amplitude", "frequency", "phase")))
    for got, want in zip(c.derivatives(1.3), hand_control(p, 1.3)):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
    th, dth, ddth = ConstantControl(jnp.asarray([0.2, -0.4])).derivatives(0)
    np.testing.assert_array_equal(th, [0.2, -0.4])
    np.testing.assert_array_equal(np.concatenate([dth, ddth]), np.zeros(4))
    assert ZeroControl(0).size == 0 and ZeroControl(0)(1.0).shape == (0,)
    assert c.size == 3


def test_piecewise_cubic_is_the_natural_spline():
    """Against scipy's natural `CubicSpline` at random times inside and beyond the knots
    (θ, θ̇, θ̈ to 1e-12 relative: the same spline solved two ways), so C² with `θ̈ = 0` at
    the end knots; interpolates its values."""
    rng = np.random.default_rng(11)
    K, n, t0, dt = 7, 2, 0.5, 0.8
    values = rng.standard_normal((K, n))
    c = PiecewiseCubicControl(jnp.asarray(t0), jnp.asarray(dt), jnp.asarray(values))
    knots = t0 + dt * np.arange(K)
    ref = CubicSpline(knots, values, bc_type="natural")
    for t in np.concatenate([rng.uniform(t0, knots[-1], 6), knots, [knots[-1] + 0.3]]):
        for d, got in enumerate(c.derivatives(t)):
            np.testing.assert_allclose(got, ref(t, d), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(c.knot_curvatures())[[0, -1]], 0.0, atol=1e-14)
    two = PiecewiseCubicControl(jnp.asarray(0.0), jnp.asarray(1.0), jnp.asarray([[0.0], [2.0]]))
    np.testing.assert_allclose(two.derivatives(0.25), ([0.5], [2.0], [0.0]), atol=1e-15)
    with pytest.raises(ValueError, match="K ≥ 2"):
        PiecewiseCubicControl(jnp.asarray(0.0), jnp.asarray(1.0), jnp.zeros((1, 2)))


# --- bad input ------------------------------------------------------------------------------


def _ball(**kw):
    base, _ = two_circles_ball()
    args = dict(
        radius=base.radius,
        mass=base.mass,
        inertia=base.inertia,
        chi0=base.chi0,
        masses=base.masses,
        rails=base.rails,
        control=base.control,
    )
    args.update(kw)
    return RollingBall(**args)


def _circle(rho):
    return CircleRail(
        jnp.zeros(3), jnp.asarray(rho), jnp.asarray([1.0, 0, 0]), jnp.asarray([0, 0, 1.0])
    )


@pytest.mark.parametrize(
    "kw, message",
    [
        (
            dict(rails=(_circle(0.5), _circle(1.2))),
            r"rail 1 \(CircleRail\) leaves the ball.*got 1\.2",
        ),
        (dict(masses=jnp.asarray([0.25, -0.1])), r"point masses must be non-negative"),
        (dict(radius=jnp.asarray(-1.0)), r"radius must be positive \(got -1\)"),
        (dict(mass=jnp.asarray(0.0)), r"shell mass m0 must be positive"),
        (
            dict(inertia=jnp.diag(jnp.asarray([0.4, -0.45, 0.5]))),
            r"inertia must be positive definite",
        ),
        (dict(chi0=jnp.asarray([0.0, 0.0, -1.5])), r"chi0 must lie inside the ball"),
        (dict(rails=(_circle(0.5), _circle(jnp.asarray([0.5, 1.1, 0.3])))), r"ensemble member 1"),
    ],
)
def test_bad_parameters_raise(kw, message):
    with pytest.raises(ValueError, match=message):
        _ball(**kw)


def test_wrong_sizes_raise():
    bad_control = SinusoidControl(*(jnp.zeros(3) for _ in range(4)))
    with pytest.raises(ValueError, match=r"2 rails and a control of size 3"):
        _ball(control=bad_control)
    with pytest.raises(ValueError, match=r"masses shape \(3,\) \(n = 3\), 2 rails"):
        _ball(masses=jnp.asarray([0.1, 0.2, 0.3]))
    with pytest.raises(ValueError, match=r"inertia must have shape"):
        _ball(inertia=jnp.eye(2))
    with pytest.raises(TypeError, match=r"rails\[0\] must be an AbstractRail"):
        _ball(rails=(lambda th: th, _circle(0.5)))
    model, state = two_circles_ball()
    with pytest.raises(ValueError, match=r"q \(\.\.\., 4\)"):
        model.check_state_shapes(state._replace(q=jnp.zeros(3)))


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("x", [0.0, 0.0, 1.01], r"off the rolling constraint.*got 0\.01"),
        ("q", [1.0, 0.01, 0.0, 0.0], r"not a unit quaternion"),
        ("Omega", [np.nan, 0.0, 0.0], r"Omega0 contains NaN"),
    ],
)
def test_bad_states_raise(field, value, message):
    model, state = two_circles_ball()
    check_rolling_ball_state(model, state)  # the good state passes
    with pytest.raises(ValueError, match=message):
        check_rolling_ball_state(model, state._replace(**{field: jnp.asarray(value)}))


def test_checks_under_jit_name_the_problem():
    """Traced parameters: the checks run in the compiled program and raise with the
    message (`_checks.apply`, as `simulate` applies them)."""
    base, _ = two_circles_ball()

    @jax.jit
    def check(rho):
        model = eqx.tree_at(lambda m: m.rails[1].radius, base, rho)
        _checks.apply(model.parameter_checks())
        return rho

    check(0.5)
    with pytest.raises(Exception, match=r"rail 1 \(CircleRail\) leaves the ball"):
        jax.block_until_ready(check(1.5))


# --- jit, vmap, grad ------------------------------------------------------------------------


def test_jit_equals_eager_and_vmap_equals_loop():
    """`jit(vector_field)` = eager and `vmap` over a rail radius = a loop, to 1e-14 relative
    (XLA may fuse and reassociate differently in the two programs; measured ≤ 2e-18 absolute)."""
    model, state = two_circles_ball()
    state = state._replace(Omega=jnp.asarray([0.3, -0.2, 0.5]))
    eager = model.vector_field(1.1, state)
    jitted = jax.jit(RollingBall.vector_field)(model, 1.1, state)  # the model as an argument
    closed = jax.jit(lambda t, s: model.vector_field(t, s))(1.1, state)  # ... or a constant
    for a, b, c in zip(eager, jitted, closed):
        np.testing.assert_allclose(b, a, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(c, a, rtol=1e-14, atol=1e-15)

    def field(rho):
        m = eqx.tree_at(lambda m: m.rails[0].radius, model, rho)
        return m.vector_field(1.1, state).Omega

    rhos = jnp.asarray([0.3, 0.5, 0.7])
    loop = np.stack([jax.jit(field)(r) for r in rhos])
    np.testing.assert_allclose(jax.jit(jax.vmap(field))(rhos), loop, rtol=1e-14, atol=1e-15)


def test_grad_wrt_control_and_rail_equals_finite_differences():
    """`jax.grad` of `Ω̇₁ + 2Ω̇₂ − Ω̇₃` and of the normal force with respect to a control
    amplitude and a rail radius against central differences with `h = 1e-5` (truncation
    ~h² |f‴| ≈ 1e-10, round-off ~eps/h ≈ 1e-11): relative 1e-6."""
    model, state = two_circles_ball()
    state = state._replace(Omega=jnp.asarray([0.3, -0.2, 0.5]))
    w = jnp.asarray([1.0, 2.0, -1.0])

    def f_amp(a):
        m = eqx.tree_at(lambda m: m.control.amplitude, model, jnp.stack([a, 0.8]))
        return jnp.dot(m.omega_dot(0.7, state), w)

    def f_rail(rho):
        m = eqx.tree_at(lambda m: m.rails[1].radius, model, rho)
        return m.normal_force(0.7, state)

    h = 1e-5
    for f, p in ((f_amp, 0.8), (f_rail, 0.5)):
        f = jax.jit(f)
        fd = (f(p + h) - f(p - h)) / (2 * h)
        np.testing.assert_allclose(jax.jit(jax.grad(f))(p), fd, rtol=1e-6)


def test_energy_is_claimed_for_a_control_that_holds_still():
    """`conserved_quantities` claims the energy when the control declares that it holds the
    masses still (`holds_still`, a class fact: `ConstantControl`, `ZeroControl`, or a control
    of one's own), not by the control's class; a moving control claims it not (its actuators
    work on the ball)."""
    from jaxrigid.models.rolling_ball.controls import AbstractControl

    class Parked(AbstractControl):  # a control of one's own: θ = 0.3 for every mass
        holds_still = True
        n: int = eqx.field(static=True)

        def __call__(self, t):
            return jnp.full((self.n,), 0.3)

    ball, _ = two_circles_ball()
    n = ball.n_masses
    assert not ball.control.holds_still and "energy" not in ball.conserved_quantities()
    for still in (ConstantControl(jnp.zeros(n)), Parked(n)):
        held = eqx.tree_at(lambda b: b.control, ball, still)
        assert "energy" in held.conserved_quantities()
