"""DMV for the heavy top (Dixon §7, (46) and (51), Figure 9): agreement with an independent
DOP853 reference at the paper's step, second order on a general top, the printed one-sided
kick's first order, the Casimirs ⟨Π, Γ⟩ and |Γ| to round-off, bounded energy,
body = spatial, batched = unbatched, and the `dmv-heavy-top` case through the CLI.
"""

import contextlib
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import integrate

import jaxrigid as jr
from jaxrigid import cli
from jaxrigid.cases import CASES
from jaxrigid.cases.dmv import HEAVY_TOP
from jaxrigid.diagnostics import invariants_along
from jaxrigid.integrators import RIGID_BODY_METHODS
from jaxrigid.integrators.dmv import (
    DMV_METHODS,
    DMVBody,
    body_gravity_torque,
    cayley_minus_identity,
    solve_moser_veselov,
)
from jaxrigid.reference import rigid_body_reference

METHODS = list(DMV_METHODS)


def _problem(**overrides):
    return HEAVY_TOP.build(HEAVY_TOP.resolve(overrides))


STEPS = [0.1, 0.05, 0.025]
HORIZONS = [10.0, 100.0]


@pytest.fixture(scope="module")
def reference():
    """DOP853 (rtol = atol = 1e-12) of Π̇ = Π×Ω + Γ×mgχ₀, Ṙ = RΩ̂: the model's vector field by
    a different method and code path; its error (≲ 1e-9 over t = 100) is 1e6 below ours."""
    model, state0 = _problem()
    ref = rigid_body_reference(model, state0, HORIZONS, rtol=1e-12, atol=1e-12)
    return {t: jax.tree_util.tree_map(lambda x, i=i: x[i], ref) for i, t in enumerate(HORIZONS)}


def _errors(integrator, reference, t_end):
    model, state0 = _problem()
    errors_Pi, errors_R = [], []
    for dt in STEPS:
        n = round(t_end / dt)
        final = integrate(integrator, model, state0, dt, n, chunk=50)  # one compilation
        errors_Pi.append(float(jnp.linalg.norm(final.Pi - reference[t_end].Pi)))
        errors_R.append(float(jnp.linalg.norm(final.R - reference[t_end].R, ord=2)))
    return errors_Pi, errors_R


def _slopes(errors):
    return np.diff(np.log(errors)) / np.log(0.5)


# DMV's second order on the symmetric heavy top (here measured in Π at t = 10: 1.6e-2, 3.9e-3,
# 9.7e-4; at t = 100: 7.0e-2, 1.7e-2, 4.2e-3 for Δt = 0.1, 0.05, 0.025: slopes 2.00–2.03):
# test_order_registry's test_measured_order[DMVBody-krysl-fast-top], [DMVSpatial-krysl-fast-top].
@pytest.mark.parametrize("t_end", HORIZONS)
@pytest.mark.parametrize("method", METHODS)
def test_agrees_with_dop853_at_the_papers_step(method, t_end, reference):
    """Π after the paper's step Δt = 0.1, at t = 10 (100 steps) and t = 100 (the paper's 1000
    steps), within 0.1 of DOP853's (≈ 3 % of max|Π|, 2.6 along the orbit; measured 1.6e-2
    and 7.0e-2): a wrong kick or a sign error is O(|Π|) off."""
    model, state0 = _problem()
    final = integrate(DMV_METHODS[method](), model, state0, 0.1, round(t_end / 0.1), chunk=50)
    error = float(jnp.linalg.norm(final.Pi - reference[t_end].Pi))
    assert error < 0.1, error


ASYMMETRIC = dict(I11=3.5, I22=2.5, I33=2.0, I12=0.3, mgchi1=0.5, mgchi2=0.2, mgchi3=0.8)


@pytest.mark.parametrize("method", METHODS)
def test_order_two_for_an_asymmetric_top_off_axis(method):
    """A general heavy top (full inertia tensor, centre of mass off every axis, tilted start
    Γ(0) = (0.6, 0, 0.8)) at t = 20: measured 3.7e-2, 9.3e-3, 2.3e-3 (slopes 2.006, 2.002);
    the O(Δt²) correction to a slope is ≲ 0.03 at Δt = 0.1, so ±0.1 passes second order with
    margin, while the printed one-sided kick (slope 0.9, test below) fails by 10×."""
    model, state0 = _problem(**ASYMMETRIC, Gamma1=0.6, Gamma3=0.8)
    ref = rigid_body_reference(model, state0, [20.0], rtol=1e-12, atol=1e-12)
    errors = []
    for dt in STEPS:
        final = integrate(DMV_METHODS[method](), model, state0, dt, round(20 / dt), chunk=50)
        errors.append(float(jnp.linalg.norm(final.Pi - ref.Pi[0])))
    assert np.all(np.abs(_slopes(errors) - 2.0) < 0.1), errors


class _PrintedOneSidedKick(DMVBody):
    """(46) as printed: the whole kick `hΓ_k × c` before the free step (the potential taken at
    the left point of the step, as in (42)). Same positions as DMV-body, but its node momenta
    are off by ½Δt Γ_k × c."""

    def step(self, model, state, solver_state, t, dt):
        R, Pi = state
        Pi = Pi + dt * body_gravity_torque(model.potential, R)
        c, info = solve_moser_veselov(self.newton, model.inertia, dt * Pi)
        W1 = cayley_minus_identity(c)
        R1, Pi1 = R + R @ W1, Pi + cayley_minus_identity(-c) @ Pi
        return jr.RigidBodyState(R1, Pi1), solver_state, info


def test_printed_one_sided_kick_is_first_order(reference):
    """Why DMV-body splits the potential symmetrically (module docstring of
    jaxrigid.integrators.dmv): the printed form's momentum error at t = 10 halves with Δt
    (measured 1.8e-2, 9.7e-3, 5.3e-3: slopes 0.90, 0.88), while its attitudes — the same
    sequence as DMV-body's — stay second order."""
    errors_Pi, errors_R = _errors(_PrintedOneSidedKick(), reference, 10.0)
    assert np.all(np.abs(_slopes(errors_Pi) - 1.0) < 0.2), errors_Pi  # first order, ±0.2
    assert np.all(np.abs(_slopes(errors_R) - 2.0) < 0.1), errors_R


# 10⁴ steps of Δt = 0.1: each step rounds by a few ulp and those roundings random-walk
# (√10⁴·1e-16 = 1e-14; measured ≤ 4e-14 for ⟨Π, Γ⟩, |Γ|, Π₃, RᵀR − 1); 1e-12 leaves a factor
# 25, and the DMV updates keep these for any W (the Newton tolerance does not enter).
ROUND_OFF = 1e-12


@pytest.fixture(scope="module", params=METHODS)
def long_run(request):
    """10⁴ steps as 200 calls of the compiled 50-step chunk the other tests use; states every
    50 steps (`integrate` asserts that every Newton solve converged)."""
    model, state0 = _problem()
    integrator, states = DMV_METHODS[request.param](), [state0]
    for _ in range(200):
        states.append(integrate(integrator, model, states[-1], 0.1, 50))
    states = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states)
    return model, states, invariants_along(model, jnp.zeros(201), states)


def _rel_drift(x):
    x = np.asarray(x)
    return float(np.max(np.abs(x - x[0])) / np.abs(x[0]))


def test_casimirs_to_round_off(long_run):
    """⟨Π, Γ⟩ (Figure 9's Casimir; the vertical spatial momentum) and |Γ| = 1: the kicks
    Π ± ½Δt Γ×c are orthogonal to Γ, and the free step rotates Π and Γ by the same Wᵀ."""
    _, _, inv = long_run
    assert _rel_drift(inv["Pi_dot_Gamma"]) <= ROUND_OFF
    assert float(np.max(np.abs(np.asarray(inv["Gamma_norm"]) - 1.0))) <= ROUND_OFF
    assert float(np.max(inv["RtR_error"])) <= ROUND_OFF


def test_lagrange_top_keeps_the_spin_component(long_run):
    """I₁ = I₂ and χ₀ ∥ e₃: the discrete Lagrangian is invariant under body rotations about e₃,
    so (discrete Noether) Π₃ is conserved exactly by the DMV map — to round-off here."""
    _, states, _ = long_run
    assert _rel_drift(states.Pi[:, 2]) <= ROUND_OFF


def test_energy_bounded(long_run):
    """DMV is symplectic, not energy-conserving: the energy error oscillates at O(Δt²) without
    drift. Measured max |H − H₀|/H₀ = 3.8e-3 over 10⁴ steps (both forms), its maximum over the
    second half 1.00× that over the first; a first-order or drifting method exceeds 2e-2 or
    doubles."""
    _, _, inv = long_run
    H = np.asarray(inv["H"])
    err = np.abs(H - H[0]) / abs(H[0])
    half = err.size // 2
    assert err.max() < 2e-2  # O(Δt²) = 1e-2 times a constant (measured 3.8e-3)
    assert err[half:].max() < 2.0 * err[:half].max()  # no secular drift


def test_body_and_spatial_forms_agree():
    """(51) is (46) conjugated by R_k: the same map in exact arithmetic. Over 1000 steps only
    round-off separates them: measured 7.5e-12 in Π, R (the top starts upright and unstable,
    which amplifies roundings: 5e-14 for the free body); a different map (another kick order,
    an O(Δt³) change) would differ by ≥ 1e-4."""
    model, state0 = _problem()
    runs = [integrate(DMV_METHODS[m](), model, state0, 0.1, 1000, chunk=50) for m in METHODS]
    for a, b in zip(jax.tree_util.tree_leaves(runs[0]), jax.tree_util.tree_leaves(runs[1])):
        assert float(jnp.max(jnp.abs(a - b))) < 1e-10


def test_case_definition_and_validation():
    case = CASES["dmv-heavy-top"]
    assert case.default_method == "DMV-body" and case.family == "rigid_body"
    assert case.default_dt == 0.1 and round(case.default_t_end / case.default_dt) == 1000
    model, state0 = _problem(Gamma1=0.6, Gamma3=0.8)
    np.testing.assert_allclose(state0.R.T @ jnp.array([0.0, 0.0, 1.0]), [0.6, 0.0, 0.8])
    np.testing.assert_allclose(state0.Pi, [0.1, 0.0, 1.0])
    with pytest.raises(ValueError, match="unit vector"):
        _problem(Gamma1=1.0)


def test_which_methods_apply():
    """DMV takes this case (uniform gravity) but still not the Coulombic wall; the
    preprocessed DMV (free body only) takes neither; every other rigid-body method takes
    both."""
    from jaxrigid.integrators import PREPROCESSED_DMV_METHODS

    top, wall = CASES["dmv-heavy-top"], CASES["krysl-coulomb-wall"]
    for name, factory in RIGID_BODY_METHODS.items():
        if name in PREPROCESSED_DMV_METHODS:
            assert not top.accepts(factory()) and not wall.accepts(factory())
            continue
        assert top.accepts(factory())
        assert wall.accepts(factory()) == (name not in DMV_METHODS)


@pytest.mark.parametrize(
    "method", [m if m == "DMV-body" else pytest.param(m, marks=pytest.mark.slow) for m in METHODS]
)
def test_cli_ensemble_equals_single_runs(method, tmp_path):
    """`jaxrigid run dmv-heavy-top --ensemble 4` (one vmapped run) against each member run
    alone: equal to 1e-13 (same arithmetic; XLA may fuse the batched code differently)."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        rc = cli.main(
            ["run", "dmv-heavy-top", "--method", method, "--t-end", "5", "--seed", "3"]
            + ["--ensemble", "4", "--json", "--out", str(tmp_path)]
        )
    assert rc == 0
    report = json.loads(stdout.getvalue())
    assert report["newton"]["all_converged"] and np.shape(report["final_state"]["Pi"]) == (4, 3)
    drift = np.asarray(report["invariants"]["Pi_dot_Gamma"]["max_abs_drift"])
    assert drift.shape == (4,) and drift.max() < 1e-13  # 50 steps of round-off (|⟨Π,Γ⟩| ≈ 1)
    model, state0 = _problem()
    members = HEAVY_TOP.perturb(state0, np.random.default_rng(3), HEAVY_TOP.ensemble_spread, 4)
    integrator = DMV_METHODS[method]()
    for i in range(4):
        member = jax.tree_util.tree_map(lambda x: x[i], members)
        single = integrate(integrator, model, member, 0.1, 50, chunk=50)
        for key in ("R", "Pi"):
            np.testing.assert_allclose(
                np.asarray(report["final_state"][key][i]), getattr(single, key), atol=1e-13
            )
