"""The heavy symmetric top of Chaurasia (2012) §2.5 in three representations — Euler angles,
unit quaternions with the multiplier of §3.3.8, rotation matrices with RATTLE (App. B):
consistent initial states, the centre of mass against an independent DOP853 reference at the
methods' measured orders, the quaternion constraint's drift, and the `jaxrigid run` cases.

The Gauss methods' versions are `slow`: on this 2-core machine XLA compiles a Gauss6 step of
the 8-dimensional quaternion system in minutes. RK4 (explicit) carries the default checks.
"""

import contextlib
import functools
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid import cli
from jaxrigid.cases import get_case
from jaxrigid.cases.symmetric_top import initial_values
from jaxrigid.diagnostics import measured_order
from jaxrigid.integrators import HAMILTONIAN_METHODS, RATTLE
from jaxrigid.lie import quaternion
from jaxrigid.models import symmetric_top as st
from jaxrigid.models.hamiltonian import CanonicalState
from jaxrigid.reference import rigid_body_reference

NAMES = {
    "euler": "symmetric-top-euler-angles",
    "quaternion": "symmetric-top-quaternion",
    "rattle": "symmetric-top-rattle",
}
COM = {
    "euler": lambda s, p: st.com_from_euler_angles(s.q, p),
    "quaternion": lambda s, p: st.com_from_quaternion(s.q, p),
    "rattle": lambda s, p: st.com_from_rotation_matrix(s.R, p),
}
PARAMS = initial_values(get_case(NAMES["euler"]).resolve())[2]


def build(rep):
    case = get_case(NAMES[rep])
    return case.build(case.resolve())


def integrator(method):
    return RATTLE() if method == "rattle" else HAMILTONIAN_METHODS[method]()


@functools.cache
def reference(t_end, n_save):
    """Centre of mass at `n_save` equally spaced times in (0, t_end] from Krysl's `(R, Π)`
    equations by DOP853 at rtol = atol = 1e-13: independent of all three representations."""
    angles, rates, params = initial_values(get_case(NAMES["euler"]).resolve())
    model, state0 = st.rigid_body_top(angles, rates, params)
    ts = np.linspace(0.0, t_end, n_save + 1)[1:]
    ref = rigid_body_reference(model, state0, ts)
    return np.asarray(st.com_from_rotation_matrix(ref.R, params))


def com_trajectory(rep, method, dt, n_steps, save_every):
    """Centre of mass at every `save_every`-th step, without the initial state."""
    model, state0 = build(rep)
    sol = jr.simulate(integrator(method), model, state0, dt, n_steps, save_every=save_every)
    assert bool(sol.outcome.all_converged), sol.outcome
    states = jax.tree_util.tree_map(lambda x: x[1:], sol.states)
    return np.asarray(COM[rep](states, PARAMS)), sol.final_state


def final_state(rep, method, dt, n_steps, chunk):
    """The state after `n_steps`, as `n_steps / chunk` runs of one compiled chunk (`dt` is
    traced: one compilation per method for all step sizes)."""
    model, state = build(rep)
    for _ in range(n_steps // chunk):
        sol = jr.simulate(integrator(method), model, state, dt, chunk, save_every=chunk)
        assert bool(sol.outcome.all_converged), sol.outcome
        state = sol.final_state
    return state


# --- one top, three initial states --------------------------------------------------------


def test_initial_states_are_one_top():
    """Same centre of mass, energy and body angular momentum in all three representations (and
    in Krysl's (R, Π) form), to round-off."""
    angles, rates, params = initial_values(get_case(NAMES["euler"]).resolve())
    (me, se), (mq, sq), (mr, sr) = (build(r) for r in ("euler", "quaternion", "rattle"))
    rb, rs = st.rigid_body_top(angles, rates, params)
    coms = [COM[r](s, params) for r, s in (("euler", se), ("quaternion", sq), ("rattle", sr))]
    energies = [me.energy(se.q, se.p), mq.energy(sq.q, sq.p), mr.invariants(0.0, sr)["H"]]
    H_ref = rb.invariants(0.0, rs)["H"]
    for com, H in zip(coms, energies):
        np.testing.assert_allclose(com, params.l * rs.R[:, 2], rtol=0, atol=1e-15)
        np.testing.assert_allclose(H, H_ref, rtol=1e-14)  # H ≈ 5089: a few ulps
    np.testing.assert_allclose(mr.body_momentum(sr), rs.Pi, rtol=0, atol=1e-12)  # |Π| ≈ 100
    assert abs(float(jnp.linalg.norm(sq.q)) - 1) < 1e-15 and abs(float(sq.q @ sq.p)) < 1e-12
    np.testing.assert_allclose(quaternion.to_matrix(sq.q), rs.R, rtol=0, atol=1e-15)


def test_euler_angle_hamiltonian_is_the_legendre_transform():
    """At random angles and rates: H(q, p(q̇)) = ½ ΩᵀIΩ + m g l cos θ with Ω = vee(RᵀṘ) by autodiff
    of the attitude, and ∂H/∂p returns the rates (a check of §2.5's corrected equations)."""
    rng = np.random.default_rng(0)
    I = np.diag([float(PARAMS.I), float(PARAMS.I), float(PARAMS.I3)])
    for _ in range(5):
        angles = jnp.asarray(rng.uniform([0.2, -3, -3], [2.9, 3, 3]))
        rates = jnp.asarray(rng.normal(size=3) * 5)
        p = st.euler_angle_momenta(angles, rates, PARAMS)
        Omega = st.body_angular_velocity(angles, rates)
        V = PARAMS.m * PARAMS.g * PARAMS.l * jnp.cos(angles[0])
        H = st.euler_angle_hamiltonian(angles, p, PARAMS)
        np.testing.assert_allclose(H, 0.5 * Omega @ I @ Omega + V, rtol=1e-13)
        q_dot = jax.grad(st.euler_angle_hamiltonian, argnums=1)(angles, p, PARAMS)
        np.testing.assert_allclose(q_dot, rates, rtol=1e-12, atol=1e-12)


def test_corrected_euler_angle_ode_is_the_hamiltonian_flow():
    """§2.5's ODE in the angle rates (slips corrected) equals the Hamiltonian flow: its angle
    accelerations are d/dt ∂H/∂p along (∂H/∂p, −∂H/∂q), at random states."""
    rng = np.random.default_rng(2)
    model, _ = build("euler")
    for _ in range(5):
        angles = jnp.asarray(rng.uniform([0.2, -3, -3], [2.9, 3, 3]))
        rates = jnp.asarray(rng.normal(size=3) * 5)
        p = st.euler_angle_momenta(angles, rates, PARAMS)
        flow = model.vector_field(0.0, CanonicalState(angles, p))
        _, accelerations = jax.jvp(model.grad_p, (angles, p), (flow.q, flow.p))
        y_dot = st.euler_angle_ode(jnp.concatenate([angles, rates]), PARAMS)
        np.testing.assert_allclose(y_dot[:3], flow.q, rtol=1e-12)  # rates ~5: rounding only
        np.testing.assert_allclose(y_dot[3:], accelerations, rtol=1e-11, atol=1e-10)


def test_quaternion_kinetic_energy_and_multiplier():
    """For |q| = 1 and g = 2Ĝᵀ(0, Π): T = ½ ΠᵀI⁻¹Π (3.18–3.21), μ⁻¹(q) g = q̇ = ½ q ⊗ (0, Ω), and
    with λ of (3.32) the vector field keeps qᵀg = 0 (d(qᵀg)/dt = 0 on the manifold)."""
    rng = np.random.default_rng(1)
    inertia = jnp.asarray([float(PARAMS.I), float(PARAMS.I), float(PARAMS.I3)])
    model, _ = build("quaternion")
    for _ in range(5):
        q = quaternion.normalize(jnp.asarray(rng.normal(size=4)))
        Pi = jnp.asarray(rng.normal(size=3) * 10)
        g = st.quaternion_momentum(q, Pi)
        T = st.quaternion_kinetic_energy(q, g, PARAMS)
        np.testing.assert_allclose(T, 0.5 * jnp.sum(Pi**2 / inertia), rtol=1e-13)
        q_dot = st.inverse_mass_matrix(q, PARAMS) @ g
        expected = 0.5 * quaternion.multiply(q, jnp.concatenate([jnp.zeros(1), Pi / inertia]))
        np.testing.assert_allclose(q_dot, expected, rtol=0, atol=1e-13)
        dq, dg = model.vector_field(0.0, CanonicalState(q, g))
        assert abs(float(q @ dg + dq @ g)) < 1e-11 * float(jnp.linalg.norm(g)) ** 2


# --- the three representations against the reference -------------------------------------


# Centre-of-mass error at t = 0.5 (about 1.5 nutation periods) for Δt = T/n0 … T/(8 n0):
# measured slopes with RK4, n0 = 200: Euler angles 3.99, quaternion 3.96 (the spin of 100 s⁻¹
# turns q at 50 s⁻¹, the Euler angles keep it in the ignorable φ); RATTLE: test_rattle.py.
ORDER_RUNS = [("euler", "rk4", 200), ("quaternion", "rk4", 200)]
SLOW_ORDER_RUNS = [("euler", "gauss6", 12), ("quaternion", "gauss6", 100)]


def _order_against_reference(rep, method, n0, t_end=0.5):
    com_ref = reference(t_end, 1)[0]
    errors, dts, norms = [], [], []
    for k in range(4):
        dt = t_end / (n0 * 2**k)
        state = final_state(rep, method, dt, n0 * 2**k, n0)
        errors.append(np.max(np.abs(np.asarray(COM[rep](state, PARAMS)) - com_ref)))
        dts.append(dt)
        if rep == "quaternion":
            norms.append(abs(float(jnp.linalg.norm(state.q)) - 1.0))
    return dts, errors, norms


@pytest.mark.parametrize("rep, method, n0", ORDER_RUNS)
def test_centre_of_mass_order_against_reference(rep, method, n0):
    dts, errors, _ = _order_against_reference(rep, method, n0)
    order = measured_order(dts, errors)
    # ±0.1: least-squares slope over three halvings in the asymptotic regime
    assert abs(order - integrator(method).order) <= 0.1, (order, errors)


@pytest.mark.slow
@pytest.mark.parametrize("rep, method, n0", SLOW_ORDER_RUNS)
def test_centre_of_mass_order_against_reference_gauss6(rep, method, n0):
    """Gauss6, the thesis's method: order 6 in both canonical representations."""
    dts, errors, _ = _order_against_reference(rep, method, n0)
    order = measured_order(dts, errors)
    # ±0.15: the window three halvings resolve (the Euler errors reach 1e-12 at the finest Δt)
    assert abs(order - 6) <= 0.15, (order, errors)


def test_three_representations_agree_along_the_trajectory():
    """Centre of mass at 50 times in (0, 0.5]: Euler angles (RK4, Δt = 1/3200), quaternion (RK4,
    Δt = 1/3200) and rotation matrix (RATTLE, Δt = 1/8000) all follow the reference, hence each
    other; the bounds are the errors of these step sizes (O(Δt⁴), O(Δt⁴), O(Δt²); measured
    8e-12, 4.3e-7, 5.2e-6 m) with a margin of 4 to 10."""
    t_end = 0.5
    ref = reference(t_end, 50)
    runs = {
        "euler": (com_trajectory("euler", "rk4", t_end / 1600, 1600, 32)[0], 1e-10),
        "quaternion": (com_trajectory("quaternion", "rk4", t_end / 1600, 1600, 32)[0], 2e-6),
        "rattle": (com_trajectory("rattle", "rattle", t_end / 4000, 4000, 80)[0], 2e-5),
    }
    for rep, (com, bound) in runs.items():
        assert np.max(np.abs(com - ref)) < bound, rep


# --- the quaternion constraint ------------------------------------------------------------


def test_quaternion_norm_error_has_the_method_order():
    """||q| − 1| at t = 0.5 falls as Δt⁴ with RK4 (measured 3.96): the exact flow keeps |q| = 1,
    so the drift is the method's global error, not the O(Δt²) of §3.4.1 (a one-step bound for
    symplectic Euler)."""
    dts, _, norms = _order_against_reference("quaternion", "rk4", 200)
    # ±0.1: least-squares slope over three halvings in the asymptotic regime
    assert abs(measured_order(dts, norms) - 4) <= 0.1, norms


@pytest.mark.slow
def test_quaternion_norm_error_gauss6_is_sixth_order():
    """Gauss6: ||q| − 1| at t = 0.5 falls as Δt⁶ (measured 6.0 from Δt = 0.005 to 0.000625 at
    t = 1) — not the second order Figure 3.3 reports for it."""
    dts, _, norms = _order_against_reference("quaternion", "gauss6", 100)
    # ±0.15: least-squares slope over three halvings in the asymptotic regime
    assert abs(measured_order(dts, norms) - 6) <= 0.15, norms


def test_quaternion_constraint_manifold_is_unstable():
    """|q| − 1 grows like e^{σt}, σ = 2√(m g l (q₀² + q₃²)) (≈ 8.1 s⁻¹ here): linearising the flow
    of (3.26) with λ(q) of (3.32) off |q| = 1 gives d²(|q|² − 1)/dt² = 4mgl(q₀² + q₃²)(|q|² − 1).
    Measured as the slope of log||q| − 1| over t ∈ [1, 2] (RK4, Δt = 1/800)."""
    model, state0 = build("quaternion")
    dt, n = 1 / 800, 1600
    sol = jr.simulate(integrator("rk4"), model, state0, dt, n, save_every=16)
    norms = np.abs(np.linalg.norm(np.asarray(sol.states.q), axis=-1) - 1)
    ts = np.asarray(sol.ts)
    late = ts >= 1.0
    slope = np.polyfit(ts[late], np.log(norms[late]), 1)[0]
    q = np.asarray(sol.states.q)[late]
    sigma = np.mean(
        2 * np.sqrt(float(PARAMS.m * PARAMS.g * PARAMS.l) * (q[:, 0] ** 2 + q[:, 3] ** 2))
    )
    # 15%: the growth rate varies with the nutation and the injected local errors add to it
    assert abs(slope - sigma) <= 0.15 * sigma, (slope, sigma)


# --- the cases from `jaxrigid run` --------------------------------------------------------


def _run(args, out):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli.main(["run", *args, "--json", "--out", str(out)])
    text = stdout.getvalue()
    return rc, (json.loads(text) if rc == 0 else text), stderr.getvalue()


def test_cli_runs_all_three_representations(tmp_path):
    """`jaxrigid run` on each case: the final centres of mass agree with the reference within
    3e-5 m (RATTLE's O(Δt²) error at Δt = 0.0002 is the largest, 6e-6 m measured at t = 0.2;
    RK4 at Δt = 0.001: 4e-10 and 2.5e-6 m), RATTLE keeps its constraints to round-off, the
    quaternion run reports the drift of |q|."""
    reports = {}
    for rep, extra in (
        ("euler", ["--method", "rk4", "--dt", "0.001"]),
        ("quaternion", ["--method", "rk4", "--dt", "0.001"]),
        ("rattle", ["--dt", "0.0002"]),
    ):
        rc, report, err = _run([NAMES[rep], "--t-end", "0.2", *extra], tmp_path / rep)
        assert rc == 0, err
        reports[rep] = report
    assert set(reports["rattle"]["final_state"]) == {"R", "P"}
    assert reports["rattle"]["method"] == "rattle"
    assert reports["rattle"]["invariants"]["RtR_error"]["max_abs_drift"] < 1e-14
    assert "q_norm" in reports["quaternion"]["invariants"]
    ref = reference(0.2, 1)[0]
    for rep, report in reports.items():
        com = np.asarray(report["observables"]["com_final"])
        assert np.max(np.abs(com - ref)) < 3e-5, rep


@pytest.mark.parametrize(
    "case, method, valid",
    [
        ("symmetric-top-quaternion", "rattle", "gauss6"),
        ("symmetric-top-rattle", "gauss6", "rattle"),
    ],
)
def test_cli_refuses_a_method_of_another_representation(case, method, valid, tmp_path, capsys):
    rc = cli.main(["run", case, "--method", method, "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "does not apply" in err[0] and valid in err[0].split("valid methods for it:")[-1]


def test_cli_rejects_a_singular_euler_angle_start(tmp_path, capsys):
    rc = cli.main(["run", NAMES["euler"], "--set", "theta0=0", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "theta0" in err[0]
