"""The non-twisting rigid body (Gebhardt & Romero §4–§6): the §5.2 scheme on Cases 1–3,
Tables 1–2, Theorem 5.2 as measured, the discrete constraints, the impulse–momentum balance
of the continuous split form (69)–(71), Q_II, ensembles, the CLI."""

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.cases import get_case
from jaxrigid.cases import nontwisting as nt
from jaxrigid.diagnostics import measured_order, q2_along, second_quotient_of_precision
from jaxrigid.integrators import energy_momentum as em
from jaxrigid.models import director as D
from jaxrigid.reference import split_form

EPS = np.finfo(np.float64).eps
H = 0.005  # §6
CHUNK = 200  # one compiled chunk of 200 steps (= 1 s at h), every state saved
TABLE1 = [3.994933, 3.994869, 3.994787, 3.994663, 3.994504]
TABLE2 = (20.571428, -72.857142, 717.428571)


def build(name, **overrides):
    case = get_case(name)
    return case.build(case.resolve(overrides))


def run(model, state0, dt, n_steps):
    """All states `(n_steps + 1, ...)`, chunk by chunk (one compilation for every dt/case)."""
    states, s, t = [state0], state0, 0.0
    for _ in range(n_steps // CHUNK):
        sol = jr.simulate(em.EnergyMomentumAVF(), model, s, dt, CHUNK, t0=t)
        assert bool(sol.outcome.all_converged), sol.outcome
        states.append(jax.tree_util.tree_map(lambda x: x[1:], sol.states))
        s, t = sol.final_state, t + CHUNK * dt
    return jax.tree_util.tree_map(
        lambda *xs: jnp.concatenate([xs[0][None]] + list(xs[1:])), *states
    )


@functools.cache
def trajectory(name, dt=H, t_end=5.0, **overrides):
    model, state0 = build(name, **overrides)
    return model, run(model, state0, dt, int(round(t_end / dt)))


def invariants(model, states):
    return jax.vmap(model.invariants, in_axes=(None, 0))(0.0, states)


def q2_at_seconds(name, base=H, **overrides):
    """Q_II at t = 1..5 with ξ the whole state (q, q̇)."""
    xs = []
    for k in (1, 2, 4):
        model, states = trajectory(name, base / k, **overrides)
        per = int(round(1 / (base / k)))
        xs.append(jnp.concatenate([states.q, states.v], axis=-1)[per::per])
    return np.asarray(second_quotient_of_precision(*xs)), xs


def test_table2_case1_invariants_to_the_printed_digits():
    """Table 2 truncates (144/7 = 20.5714285… is printed 20.571428): compare truncations."""
    model, states = trajectory("nontwisting-case1")
    inv = invariants(model, states)
    for n in range(200, 1001, 200):
        got = [float(inv[k][n]) for k in ("Pi1", "Pi2", "K")]
        np.testing.assert_array_equal(np.trunc(np.array(got) * 1e6) / 1e6, TABLE2)


def test_table1_case1_q2():
    q2, xs = q2_at_seconds("nontwisting-case1")
    # t = 3, 4: to the 6 printed digits (half a unit of the last)
    np.testing.assert_allclose(q2[2:4], TABLE1[2:4], atol=5e-7)
    # t = 1, 2, 5 differ by 4.7e-6, 6.2e-6, 0.8e-6: the spread of Q_II when the directors are
    # stored to ~8 decimals (std 5e-6 at t = 1); bound 1e-5 (see jaxrigid.cases.nontwisting)
    np.testing.assert_allclose(q2, TABLE1, atol=1e-5)
    # and storing our directors to 8 decimals reproduces every printed row to ±1 in the 6th
    q_rounded = [np.round(np.asarray(x[:, :9]), 8) for x in xs]
    np.testing.assert_allclose(second_quotient_of_precision(*q_rounded), TABLE1, atol=1e-6)


def test_theorem_5_2_case1_invariants_to_round_off_and_no_twist():
    model, states = trajectory("nontwisting-case1")
    inv = invariants(model, states)
    for k in ("K", "Pi1", "Pi2"):
        v = inv[k]
        # 1000 steps: relative drift below n·eps
        assert float(jnp.max(jnp.abs(v - v[0]))) < 1000 * EPS * abs(float(v[0])), k
    # Π³ = J₃₃ w·d3: zero to round-off of |Π| ≈ 76 in a steady rotation
    assert float(jnp.max(jnp.abs(inv["Pi3"]))) < 1000 * EPS * 76


@pytest.mark.parametrize("name", ["nontwisting-case2", "nontwisting-case3"])
def test_theorem_5_2_after_the_load_as_measured(name):
    """After t = 1 (no load): K to round-off; Π¹, Π² without drift, with a bounded
    fluctuation (measured 7.6e-9 relative in Case 2, 5.3e-9 in Case 3: not round-off, since
    the proof (103) is only O(h²)); Π³ ≠ 0 alternates in sign step by step: the twist
    constraint holds at the midpoints (94), where Π³ is zero, and the nodal velocities
    q̇_{n+1} = 2Δq/h − q̇_n oscillate about the midpoint ones."""
    model, states = trajectory(name)
    E = model.euler_inertia
    inv = {k: np.asarray(v[200:]) for k, v in invariants(model, states).items()}
    K = inv["K"]
    assert np.max(np.abs(K - K[0])) < 1000 * EPS * K[0]  # n·eps over 800 steps
    for k in ("Pi1", "Pi2"):
        v = inv[k]
        assert np.max(np.abs(v - v[0])) < 1e-7 * abs(v[0]), k  # 10× the measured amplitude
        # no secular drift: the means over [1, 2] and [4, 5] agree 100× tighter
        assert abs(v[:200].mean() - v[-200:].mean()) < 1e-9 * abs(v[0]), k
    scale = np.hypot(inv["Pi1"][0], inv["Pi2"][0])
    P3 = inv["Pi3"]
    # nodal Π³: bounded (measured 3.5e-8 relative), alternating step to step (beating)
    assert np.max(np.abs(P3)) < 1e-6 * scale
    assert np.max(np.abs(P3[1:] + P3[:-1])) < 0.7 * np.max(np.abs(P3))
    # at the midpoints (q_{n+½}, Δq/h), where (94) holds, Π³ vanishes to round-off
    q = states.q[200:]
    mid = jax.vmap(
        lambda a, b: D.material_momentum(E, D.DirectorState(0.5 * (a + b), (b - a) / H))[2]
    )(q[:-1], q[1:])
    assert float(jnp.max(jnp.abs(mid))) < 1e-14 * scale * 1000  # n·eps relative


def _plane_deviation(name, dt, axis):
    _, states = trajectory(name, dt, t_end=2.0)
    d3 = np.asarray(states.q[:, 6:9])
    assert np.min(d3 @ d3[0]) < 0  # d3 really moves: more than a quarter circle
    return np.max(np.abs(d3 @ (axis / np.linalg.norm(axis))))


def test_d3_moves_on_a_great_circle_case1():
    """Case 1: a steady rotation about the fixed axis ω⊥(0), d3 in the plane normal to it."""
    assert _plane_deviation("nontwisting-case1", H, np.array([6.0, -18.0, 0.0])) < 400 * EPS


def test_d3_moves_on_a_great_circle_case2():
    """Case 2: the continuous axis w ∝ J⊥⁻¹A is fixed (Π ∝ A from rest). The scheme's load
    response is slightly anisotropic at h (Π¹/Π² = 2.343 instead of 2.3), so d3 leaves that
    plane by 9e-5 at h; the deviation falls at second order with h (factor 16 expected)."""
    model, _ = build("nontwisting-case2")
    Jp = np.asarray(D.convected_inertia(model.euler_inertia))[:2, :2]
    axis = np.append(np.linalg.solve(Jp, np.asarray(nt.CASE2_AMPLITUDES)), 0.0)
    dev = [_plane_deviation("nontwisting-case2", dt, axis) for dt in (H / 4, H / 8)]
    assert dev[0] < 1e-5 and dev[1] < dev[0] / 3  # measured ratio ≈ 4 per halving


@pytest.mark.parametrize("name", ["nontwisting-case1", "nontwisting-case3"])
def test_discrete_constraints_every_step(name):
    """h(q_{n+1}) = 0 (Cayley-rotated directors: round-off) and G_d Δq = 0 (94) to the Newton
    tolerance (eps^¾ relative to the step's Cayley vector, |c| ≤ 3)."""
    model, states = trajectory(name)
    q = states.q
    assert float(jnp.max(jnp.abs(jax.vmap(D.constraints)(q)))) < 1000 * EPS
    g = jax.vmap(lambda a, b: em.discrete_nontwisting_matrix(a, b) @ (b - a))(q[:-1], q[1:])
    assert float(jnp.max(jnp.abs(g))) < 3 * 1.8e-12
    Hd = jax.vmap(lambda a, b: em.discrete_constraint_jacobian(a, b) @ (b - a))(q[:-1], q[1:])
    assert float(jnp.max(jnp.abs(Hd))) < 1000 * EPS


def test_full_system_92_is_solved_by_the_reduced_step():
    """At steps of Case 3 (loaded), the 16-unknown system (92) has zero residual at the
    multipliers recovered from the 3-unknown solve."""
    model, states = trajectory("nontwisting-case3")
    res = jax.jit(lambda s, t, x: em.residual(model, s, t, H, x))
    for n in (0, 100, 150, 400):
        s = jax.tree_util.tree_map(lambda x: x[n], states)
        dq = states.q[n + 1] - states.q[n]
        x = em.multipliers(model, s, n * H, H, dq)
        # the momentum rows are O(𝒥|Δq|) ≈ 10: Newton tolerance and round-off relative to that
        assert float(jnp.max(jnp.abs(res(s, n * H, x)))) < 1e-11


@pytest.mark.parametrize("name", ["nontwisting-case2", "nontwisting-case3"])
def test_impulse_momentum_balance_of_the_split_form(name):
    """Continuous model (69)–(71) by DOP853: Π̇ᵅ = m⊥·dᵅ with d1, d2 parallel-transported, so
    Πᵅ(t ≥ 1) = Πᵅ(0) − Aᵅ ∫f = Πᵅ(0) − Aᵅ/2, and d1, d2 stay parallel along d3."""
    model, state0 = build(name)
    ts = np.array([0.25, 0.5, 0.75, 1.0, 1.25, 1.5])
    ref, Pi = split_form.split_form_reference(model, state0, ts)
    A = np.asarray(model.moment.amplitudes)
    Pi0 = np.asarray(D.material_momentum(model.euler_inertia, state0))[:2]
    # DOP853 at rtol 1e-13 over ~10³ rad of rotation: 1e-10 relative
    np.testing.assert_allclose(Pi[3:], np.broadcast_to(Pi0 - 0.5 * A, (3, 2)), rtol=1e-10)
    # ∫₀^t f for t = 0.25, 0.5, 0.75 is 1/16, 1/4, 7/16
    np.testing.assert_allclose(Pi[:3], Pi0 - np.outer([1 / 16, 1 / 4, 7 / 16], A), rtol=1e-10)
    # no twist: w · d3 = 0 and |dᵢ| = 1 along the reference
    w = jax.vmap(D.angular_velocity)(ref)
    assert float(jnp.max(jnp.abs(jnp.sum(w * ref.q[:, 6:9], axis=-1)))) < 1e-9


def test_scheme_converges_to_the_impulse_momentum_balance_at_second_order():
    """Case 3 at t = 1: |Π_EM − Π_ref| for h/4, h/8, h/16 (at h itself the body turns
    ≈ 1 rad per step by t = 1 and the scheme is far from its asymptotic regime)."""
    model, state0 = build("nontwisting-case3")
    Pi_ref = np.asarray(D.material_momentum(model.euler_inertia, state0))[:2] - 0.5 * np.asarray(
        nt.CASE3_AMPLITUDES
    )
    dts, errs = [H / 4, H / 8, H / 16], []
    for dt in dts:
        _, states = trajectory("nontwisting-case3", dt, t_end=1.0)
        last = jax.tree_util.tree_map(lambda x: x[-1], states)
        errs.append(np.linalg.norm(D.material_momentum(model.euler_inertia, last)[:2] - Pi_ref))
    assert abs(measured_order(dts, errs) - 2) < 0.1  # second order, smooth error constant


@pytest.mark.parametrize("name", ["nontwisting-case2", "nontwisting-case3"])
def test_q2_is_4_under_load_when_the_rotation_is_resolved(name):
    """With load_scale = 0.02 (|w| h ≈ 0.05–0.1 rad per step), Q_II is within 0.05 of 4 at
    t = 1..5 under and after the load (measured 3.997, 3.999)."""
    q2, _ = q2_at_seconds(name, load_scale=0.02)
    np.testing.assert_allclose(q2, 4.0, atol=0.05)


@pytest.mark.parametrize(("name", "refine"), [("nontwisting-case2", 64), ("nontwisting-case3", 32)])
def test_q2_is_4_at_the_printed_loads_once_h_resolves_the_rotation(name, refine):
    """At the printed loads the scheme is second order too: Q_II within 0.05 of 4 at t = 1..5
    with h = 0.005/64 (Case 2, |w|h = 0.035 rad) and 0.005/32 (Case 3, 0.034 rad); measured
    3.9986 … 3.9852 and 3.9986 … 3.9954. Q_II needs the accumulated phase error ≪ 1 rad (for
    the midpoint rule (|w|h)²|w|t/12: 0.9 rad for Case 2 at h/32, which still gives 3.79 at
    t = 5), and that fixes these h. Only every 1/h-th state is kept (`save_every`); 448 000
    steps in all."""
    model, state0 = build(name)
    xs = []
    for k in (1, 2, 4):
        dt = H / refine / k
        per = int(round(1 / dt))
        sol = jr.simulate(em.EnergyMomentumAVF(), model, state0, dt, 5 * per, save_every=per)
        assert bool(sol.outcome.all_converged)
        xs.append(jnp.concatenate([sol.states.q, sol.states.v], axis=-1)[1:])
    np.testing.assert_allclose(second_quotient_of_precision(*xs), 4.0, atol=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["nontwisting-case2", "nontwisting-case3"])
def test_q2_at_the_printed_loads_and_h_is_not_asymptotic(name):
    """The paper says Q_II ≈ 4 in Cases 2, 3 at h = 0.005. With the loads (115)/(118) as
    printed the body turns by more than 1 rad per step after the load (a director moves by
    2 sin(|w|h/2) > 0.9 per step), far outside the asymptotic regime, and Q_II is not ≈ 4
    (measured 0.90, 1.44, 0.98, 0.11, 0.61 and 0.67, 0.67, 1.03, 1.69, 3.58). This records the
    finding (see the issue note); `test_q2_is_4_under_load_when_the_rotation_is_resolved`
    shows the scheme's Q_II ≈ 4 once the rotation per step is resolved."""
    q2, xs = q2_at_seconds(name)
    model, states = trajectory(name)
    after = np.asarray(states.q)[int(round(1 / H)) :]
    step = np.linalg.norm(np.diff(after, axis=0).reshape(-1, 3, 3), axis=-1).max()
    assert step > 0.9
    assert np.max(np.abs(q2 - 4.0)) > 0.5


def test_q2_along_runs_any_integrator_and_measures_the_order():
    """diagnostics.q2_along on a non-director case: ≈ 2 for symplectic Euler (order 1) on the
    harmonic oscillator (the director cases check ≈ 4 for the second-order EM-AVF)."""
    from jaxrigid.integrators import get_method

    case = get_case("harmonic-oscillator")
    model, state0 = case.build(case.resolve())
    se = q2_along(get_method("symplectic-euler-a", "hamiltonian"), model, state0, 0.01, [1.0, 2.0])
    np.testing.assert_allclose(se, 2.0, atol=0.05)  # first order: O(h) corrections ≈ 1e-2
    with pytest.raises(ValueError, match="multiple of dt"):
        q2_along(get_method("stormer-verlet", "hamiltonian"), model, state0, 0.01, [0.015])


def test_ensemble_of_10_4_velocities_and_loads_matches_single_runs():
    model, state0 = build("nontwisting-case3")
    n, steps = 10_000, 20
    rng = np.random.default_rng(1)
    states = nt.perturb_velocity(state0, rng, 1.0, n)
    scales = jnp.asarray(rng.uniform(0.5, 1.5, n))
    amps = scales[:, None] * model.moment.amplitudes[None, :]
    models = D.DirectorRigidBody(model.euler_inertia, D.MaterialPulseMoment(amps), True)
    axes = D.DirectorRigidBody(None, D.MaterialPulseMoment(0), True)
    t0 = 0.4  # under the load
    sol = jr.simulate(
        em.EnergyMomentumAVF(),
        models,
        states,
        H,
        steps,
        save_every=steps,
        t0=t0,
        model_axes=axes,
    )
    assert bool(jnp.all(sol.outcome.all_converged))
    for i in (0, 1, 4567, n - 1):
        m_i = D.DirectorRigidBody(model.euler_inertia, D.MaterialPulseMoment(amps[i]), True)
        s_i = jax.tree_util.tree_map(lambda x: x[i], states)
        one = jr.simulate(em.EnergyMomentumAVF(), m_i, s_i, H, steps, save_every=steps, t0=t0)
        # vmapped and single arithmetic may fuse differently: a few ulps of |q|, |q̇| ≈ 20
        np.testing.assert_allclose(sol.final_state.q[i], one.final_state.q, atol=1e-13)
        np.testing.assert_allclose(sol.final_state.v[i], one.final_state.v, atol=1e-11)


def test_case_parameters_and_bad_input():
    model, _ = build("nontwisting-case2", load_scale=0.5)
    np.testing.assert_array_equal(model.moment.amplitudes, 0.5 * np.asarray(nt.CASE2_AMPLITUDES))
    assert get_case("nontwisting-case1").default_method == "EM-AVF"
    with pytest.raises(ValueError, match="no parameter"):
        get_case("nontwisting-case1").resolve({"omega3": 1.0})


@pytest.mark.slow
def test_cli_runs_a_case_with_q2(tmp_path, capsys):
    from jaxrigid.cli import main

    argv = ["run", "nontwisting-case1", "--t-end", "1", "--json", "--out", str(tmp_path)]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["method"] == "EM-AVF" and set(report["final_state"]) == {"q", "v"}
    np.testing.assert_allclose(report["observables"]["Q_II"], [TABLE1[0]], atol=1e-5)
    assert set(report["invariants"]) == {"K", "Pi1", "Pi2", "Pi3"}
