"""The explicit Lie–Poisson splitting `LP-split` (jaxrigid/integrators/splitting.py).

What the registry-wide tests already check for it (order 2 on the free body and the fast top,
its claims `pi` and `RtR_error`, symmetry, jit/vmap/grad with traced parameters, yoshida6
keeping its claims) is not repeated. Here: what is particular to it — its free flow is exact
for an axisymmetric body, the heavy top's Casimirs and π₃, a bounded energy error over long
runs, the orders of its compositions on a body in a potential, and its refusals.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import integrate, problem, reference_at, state_error

import jaxrigid as jr
from jaxrigid.diagnostics import measured_order
from jaxrigid.integrators import LiePoissonSplitting, compose, get_method
from jaxrigid.reference import rigid_body_reference


@pytest.mark.parametrize("moments", [(5.0, 5.0, 1.0), (1.0, 5.0, 5.0), (3.0, 2.0, 3.0)])
def test_free_flow_is_exact_for_an_axisymmetric_body(moments):
    """Two equal moments, in any position: with the median moment in the Casimir the two
    remaining pieces commute, so a step is the exact flow. At Δt = 0.5 (20 steps to t = 10,
    a turn of up to 1.5 rad a step) the attitude error is the reference's own (DOP853 at
    1e-13: measured 2.4e-13, 3.4e-13); IMIDM's at that step is 0.03–0.3. Bound 1e-11: 30×
    the measured error, 1e8× below a second-order method's."""
    I11, I22, I33 = moments
    model, state0 = problem("krysl-torque-free", I11=I11, I22=I22, I33=I33)
    ref = rigid_body_reference(model, state0, [10.0])
    final = integrate(jr.integrators.LiePoissonSplitting(), model, state0, 0.5, 20)
    assert float(jnp.linalg.norm(final.R - ref.R[0], 2)) <= 1e-11
    assert float(jnp.linalg.norm(final.Pi - ref.Pi[0])) <= 1e-11 * float(jnp.linalg.norm(ref.Pi))
    imidm = integrate(jr.IMIDM(), model, state0, 0.5, 20)
    assert float(jnp.linalg.norm(imidm.R - ref.R[0], 2)) >= 1e-3  # the test discriminates


def _invariants(model, sol):
    return jax.vmap(lambda R, Pi: model.invariants(0.0, jr.RigidBodyState(R, Pi)))(
        sol.states.R, sol.states.Pi
    )


def test_heavy_top_casimirs_and_axial_momentum_kept():
    """Krysl's fast top, 10⁵ steps of Δt = 0.01 (t = 1000): ⟨Π, Γ⟩ (= π₃, 47.8) and |Γ| are
    kept by every piece of the step (the kicks are orthogonal to Γ, the rotations turn Π and
    Γ together), so they move only by roundings: measured 8.5e-13 (1.8e-14 relative) and
    2.8e-14; bound 1e-12 relative (10⁵ steps of ~1e-16 roundings, a random walk, with 50×
    margin). The energy is not kept (not claimed): its error, measured 9.6e-8 relative, is
    a truncation error, 1e6× round-off, and bounded (test_energy_error_does_not_drift)."""
    model, state0 = problem("krysl-fast-top")
    sol = jr.simulate(LiePoissonSplitting(), model, state0, 0.01, 100_000, save_every=100)
    inv = _invariants(model, sol)
    for name in ("Pi_dot_Gamma", "pi3", "Gamma_norm"):
        v = np.asarray(inv[name])
        assert np.max(np.abs(v - v[0])) <= 1e-12 * max(abs(v[0]), 1.0), name
    assert float(jnp.max(inv["RtR_error"])) <= 1e-11  # measured 1.2e-12
    H = np.asarray(inv["H"])
    assert 1e-9 <= np.max(np.abs(H - H[0])) / abs(H[0]) <= 1e-6


def test_energy_error_does_not_drift():
    """The Coulomb-wall body (asymmetric, in a potential), 2·10⁵ steps of Δt = 0.05: the
    largest relative energy error over the last tenth of the run is within 10 % of that over
    the first tenth (measured 1.441e-4 and 1.452e-4), as a symplectic method's is; a linear
    drift at the first tenth's size per tenth would make it 10×. π₃ is kept (the potential is
    symmetric about e₃): measured 1.2e-13, bound 1e-11."""
    model, state0 = problem("krysl-coulomb-wall")
    sol = jr.simulate(LiePoissonSplitting(), model, state0, 0.05, 200_000, save_every=100)
    inv = _invariants(model, sol)
    dH = np.abs(np.asarray(inv["H"]) - float(inv["H"][0])) / abs(float(inv["H"][0]))
    tenth = len(dH) // 10
    assert np.max(dH[-tenth:]) <= 1.1 * np.max(dH[:tenth])
    assert np.max(np.abs(np.asarray(inv["pi3"]) - float(inv["pi3"][0]))) <= 1e-11


# (scheme, steps to t = 2, tolerance on the order): the Coulomb wall at t = 2 against DOP853
# (floor ≈ 1e-12). Measured: triple-jump 2.8e-6, 1.7e-7, 1.1e-8 (4.03); yoshida6 7.2e-7,
# 1.1e-8, 1.7e-10 (6.03); kahan-li8 at 4, 6, 8 steps 6.4e-7, 3.6e-8, 2.5e-9 (7.93: its
# sixteen stages at Δt = 0.5 are still leaving the pre-asymptotic regime, hence ±0.5).
COMPOSED_PLAN = {
    "triple-jump": ((20, 40, 80), 0.1),
    "yoshida6": ((10, 20, 40), 0.1),
    "kahan-li8": ((4, 6, 8), 0.5),
}


@pytest.mark.parametrize("scheme", list(COMPOSED_PLAN))
def test_composed_order_on_a_body_in_a_potential(scheme):
    ns, tol = COMPOSED_PLAN[scheme]
    composed = compose(LiePoissonSplitting(), scheme)
    assert not composed.implicit and composed.preserves == LiePoissonSplitting.preserves
    model, state0 = problem("krysl-coulomb-wall")
    ref = reference_at("krysl-coulomb-wall", 2.0)
    dts = [2.0 / n for n in ns]
    errors = [
        state_error(integrate(composed, model, state0, dt, n), ref)[1] for dt, n in zip(dts, ns)
    ]
    assert min(errors) >= 100 * 1e-12, errors  # well above the reference's floor
    assert abs(measured_order(dts, errors) - composed.order) <= tol, errors


def test_non_principal_inertia_is_refused():
    """Off-diagonal inertia: the method would split along the wrong axes. `simulate` refuses it
    (eager and under jit with a traced inertia, naming the entry); a bare step reports
    `model_unsupported` rather than a wrong state; a composition refuses it too."""
    model, state0 = problem("krysl-torque-free", I12=0.1)
    for method in (LiePoissonSplitting(), get_method("LP-split:kahan-li8")):
        with pytest.raises(ValueError, match="principal axes"):
            jr.simulate(method, model, state0, 0.01, 10)

    @jax.jit
    def run(inertia):
        return jr.simulate(LiePoissonSplitting(), jr.RigidBody(inertia), state0, 0.01, 10).states

    with pytest.raises(Exception, match="principal axes"):
        jax.block_until_ready(run(model.inertia))
    _, _, info = LiePoissonSplitting().step(model, state0, None, 0.0, 0.01)
    assert int(info.result) == jr.RESULTS.model_unsupported
    diagonal, _ = problem("krysl-torque-free")
    _, _, info = LiePoissonSplitting().step(diagonal, state0, None, 0.0, 0.01)
    assert int(info.result) == jr.RESULTS.successful


def test_a_torque_function_is_refused():
    """A user torque `T(t, R, Π)` has no exact kick (it may depend on Π)."""
    model, state0 = problem("krysl-torque-free")
    torqued = jr.RigidBody(model.inertia, torque=lambda t, R, Pi: jnp.zeros(3))
    assert not LiePoissonSplitting().integrates(torqued)
    with pytest.raises(jr.IncompatibleModelError, match="LP-split"):
        jr.simulate(LiePoissonSplitting(), torqued, state0, 0.01, 10)


def test_fast_top_error_far_below_imidm_at_equal_step():
    """Krysl's fast top (Ω₃ = 50) to t = 2 in 100 steps: LP-split's free flow is exact for this
    axisymmetric body, so only the gravity coupling makes an error. Measured attitude errors
    5.5e-5 (LP-split) and 6.2e-3 (IMIDM), 112×; asserted ≥ 50× ("100× less" in
    docs/choosing-an-integrator.md), a factor a method whose spin were split, as IMIDM's is,
    does not reach."""
    model, state0 = problem("krysl-fast-top")
    ref = reference_at("krysl-fast-top", 2.0)
    split = state_error(integrate(LiePoissonSplitting(), model, state0, 0.02, 100), ref)[1]
    imidm = state_error(integrate(jr.IMIDM(), model, state0, 0.02, 100), ref)[1]
    assert split * 50 <= imidm, (split, imidm)


def test_float32_orthogonality_drifts_no_faster_than_imidm():
    """Float32, 32 free bodies spinning at |Ω| = 50 in random directions, 10⁴ steps of
    Δt = 0.01 (0.5 rad a step). A step's increment is formed once from the product of its
    six turns as quaternions, so it is off the group by one rounding, like IMIDM's one
    Rodrigues turn: medians of ‖RᵀR − 1‖ measured 9.0e-6 for both. Composing the turns as
    3×3 matrices instead (every product and sum rounding off the group again) gave 1.1e-4,
    13× IMIDM's: the bound, 3× IMIDM's median, separates the two (a median over members:
    on a steady spin each member repeats one rounding pattern, its drift ±3× the median)."""
    rng = np.random.default_rng(1)
    moments = np.array([2.0, 2.5, 3.5], np.float32)
    model = jr.RigidBody(jnp.diag(jnp.asarray(moments)))
    directions = rng.normal(size=(32, 3))
    omega = 50.0 * directions / np.linalg.norm(directions, axis=1, keepdims=True)
    R0 = jnp.broadcast_to(jnp.eye(3, dtype=jnp.float32), (32, 3, 3))
    state0 = jr.RigidBodyState(R0, jnp.asarray(moments * omega, jnp.float32))

    def median_drift(integrator):
        sol = jr.simulate(integrator, model, state0, jnp.float32(0.01), 10_000, save_every=10_000)
        assert sol.states.R.dtype == jnp.float32
        return float(np.median(jr.lie.so3.orthogonality_error(sol.states.R[:, -1])))

    assert median_drift(LiePoissonSplitting()) <= 3.0 * median_drift(jr.IMIDM())


@pytest.mark.parametrize("scheme", ["triple-jump", "kahan-li8"])
def test_composition_merges_kicks_and_is_the_same_method(scheme):
    """`compose(LP-split, scheme)` runs `LiePoissonComposition` (one kick at each stage
    boundary, m + 1 torques a step instead of 2m): the generic stage-by-stage composition to
    round-off. Coulomb wall (its torque is a potential's), 400 steps of Δt = 0.05 (1200 and
    6800 stages): states agree to 1.1e-13 and 2.0e-13 (measured; bound 1e-11). Kick fractions
    shifted by one stage (tried as a mutation) fail the bound: the methods then differ at
    their truncation error, ≥ 1e-6 here."""
    from jaxrigid.integrators.composition import AbstractComposition, composition_class

    fused = compose(LiePoissonSplitting(), scheme)
    assert isinstance(fused, jr.integrators.splitting.LiePoissonComposition)
    cls = type(fused)
    generic_cls = composition_class(
        cls.member_classes, cls.fractions, cls.order, cls.name, cls.reference, AbstractComposition
    )
    generic = generic_cls(fused.integrators)
    assert not isinstance(generic, jr.integrators.splitting.LiePoissonComposition)
    assert (generic.order, generic.preserves, generic.symmetric) == (
        fused.order,
        fused.preserves,
        fused.symmetric,
    )
    model, state0 = problem("krysl-coulomb-wall")
    a = integrate(fused, model, state0, 0.05, 400)
    b = integrate(generic, model, state0, 0.05, 400)
    assert float(jnp.max(jnp.abs(a.R - b.R))) <= 1e-11
    assert float(jnp.max(jnp.abs(a.Pi - b.Pi))) <= 1e-11 * float(jnp.linalg.norm(state0.Pi))
    # and the test discriminates: LP-split itself (no composition) differs at its truncation
    c = integrate(LiePoissonSplitting(), model, state0, 0.05, 400)
    assert float(jnp.max(jnp.abs(a.R - c.R))) >= 1e-6


def test_float32_composition_with_a_potential_stays_float32_and_keeps_the_casimirs():
    """LP-split:kahan-li8 on the fast top in float32 (a potential: kicks between the stages),
    1000 steps of Δt = 0.02: the state stays float32 under `jit` (a float64 constant in the
    kicks once promoted it), and ⟨Π, Γ⟩, π₃, |Γ| move only by float32 round-off: measured
    1.7e-6 and 1.4e-6 relative; bound 3e-5 ≈ 2·√(17·10³ stages)·eps₃₂ (a random walk of one
    rounding a stage)."""
    model, state0 = problem("krysl-fast-top")
    f32 = lambda x: x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x  # noqa: E731
    model32, state32 = jax.tree.map(f32, model), jax.tree.map(f32, state0)
    method = compose(LiePoissonSplitting(), "kahan-li8")
    run = jax.jit(lambda s: jr.simulate(method, model32, s, 0.02, 1000, save_every=100))
    sol = run(state32)
    assert sol.states.R.dtype == jnp.float32 and sol.states.Pi.dtype == jnp.float32
    inv = _invariants(model32, sol)
    for name in ("Pi_dot_Gamma", "pi3", "Gamma_norm"):
        v = np.asarray(inv[name], np.float64)
        assert np.max(np.abs(v - v[0])) <= 3e-5 * max(abs(v[0]), 1.0), name


@functools.cache
def _coulomb_wall():
    return problem("krysl-coulomb-wall")


def _potential_loss(method, p, dt, Pi0):
    """`Σ sin R + Σ cos Π` after 50 steps of `method` on the Coulomb wall from `(R₀, Π₀)`, its
    potential's parameters (coulomb, wall, offset) scaled by `p`: an O(1) smooth loss."""
    model, state0 = _coulomb_wall()
    m = jax.tree.map(lambda x: x * p if x.dtype == jnp.float64 else x, model)
    m = eqx.tree_at(lambda m: m.inertia, m, model.inertia)  # scale the potential only
    sol = jr.simulate(method, m, jr.RigidBodyState(state0.R, Pi0), dt, 50, save_every=50)
    final = sol.final_state
    return jnp.sum(jnp.sin(final.R)) + jnp.sum(jnp.cos(final.Pi))


# `jit(grad)` of `_potential_loss` with respect to (p, dt, Π₀), the method static (compositions
# hash by their members and fractions): the plain yoshida6 composition's gradient, which two
# tests compare against, is built once for the module
_potential_loss_gradient = jax.jit(jax.grad(_potential_loss, argnums=(1, 2, 3)), static_argnums=0)


def test_fused_composition_differentiates_as_the_generic_one():
    """The fused composition (kicks merged at the stage boundaries, a scan of its stages)
    differentiates as the generic stage-by-stage composition (another code path: LP-split
    steps one after the other): its gradient with respect to a potential parameter, `dt` and
    `Π₀` under `jit`, and a forward-mode `jvp` under `vmap`, equal the generic one's to
    round-off: the loss is O(1), bound 1e-10 relative to the gradient."""
    from jaxrigid.integrators.composition import AbstractComposition, composition_class

    fused = compose(LiePoissonSplitting(), "yoshida6")
    cls = type(fused)
    generic = composition_class(
        cls.member_classes, cls.fractions, cls.order, cls.name, cls.reference, AbstractComposition
    )(fused.integrators)
    _, state0 = _coulomb_wall()

    args = (1.0, 0.05, state0.Pi)
    g_fused = _potential_loss_gradient(fused, *args)
    g_generic = _potential_loss_gradient(generic, *args)
    for a, b in zip(g_fused, g_generic):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * float(np.max(np.abs(b))))

    ps = jnp.array([0.9, 1.0, 1.1])

    def tangent(method):
        f = lambda p: _potential_loss(method, p, 0.05, state0.Pi)  # noqa: E731
        return jax.jit(jax.vmap(lambda p: jax.jvp(f, (p,), (1.0,))[1]))(ps)

    np.testing.assert_allclose(tangent(fused), tangent(generic), rtol=1e-10)


@pytest.mark.parametrize("scheme", [None, "kahan-li8"])
@pytest.mark.parametrize("case_name", ["krysl-torque-free", "krysl-coulomb-wall"])
def test_a_compensated_step_is_the_plain_step_plus_its_rounding(case_name, scheme):
    """`compensated=True` computes the same step and keeps the rounding of each of its sums:
    from a state with zero error, value + error is the plain step's result to the roundings
    the plain step makes (n = 8 sums a stage: five turns of Π, R's turn, at most two kicks;
    bound n·stages·eps·|x|, since each rounds by ≤ ½ ulp and compensation only moves where
    the exact sum lands), the error is within half an ulp of the value, and it is not zero
    (something was rounded and kept). A compensated step that dropped the error, or forgot a
    turn, fails one of the three."""
    model, state0 = problem(case_name)
    make = (
        (lambda c: LiePoissonSplitting(compensated=c))
        if scheme is None
        else (lambda c: compose(LiePoissonSplitting(compensated=c), scheme))
    )
    plain, comp = make(False), make(True)
    assert comp.compensated and comp.compensated_summation and not plain.compensated
    stages = 1 if scheme is None else len(comp.fractions)
    dt = 0.1
    x_plain, ss, _ = jax.jit(plain.step)(model, state0, plain.init(model, state0, 0.0, dt), 0.0, dt)
    assert ss is None
    error0 = comp.init(model, state0, 0.0, dt)
    x_comp, error, info = jax.jit(comp.step)(model, state0, error0, 0.0, dt)
    assert int(info.result) == int(jr.RESULTS.successful)
    eps = np.finfo(np.float64).eps
    kept = False
    for p, v, e in zip(x_plain, x_comp, error):
        p, v, e = (np.asarray(a) for a in (p, v, e))
        scale = np.max(np.abs(p))
        np.testing.assert_allclose(v + e, p, rtol=0, atol=8 * stages * eps * scale)
        assert np.all(np.abs(e) <= 0.5 * np.spacing(np.abs(v)))
        kept = kept or bool(np.any(e != 0.0))
    assert kept


def test_compensation_lowers_the_round_off_floor_against_the_exact_free_body():
    """LP-split:yoshida6 on four free bodies to t = 1000 in 2·10⁴ steps of Δt = 0.05, against
    the exact solution (`jaxrigid.reference.free_body`). Plain, each of the 1.4·10⁵ stages rounds Π
    and R by ≈ eps, which shifts the energy and so the rotation's frequency: a phase error
    growing with t, the floor of every float64 run at long horizons (measured 4.2e-12 to
    9.2e-12). Compensated, only the roundings of the small increments remain: 2.2e-13 to
    4.4e-13, 21× less at the worst member. Bound 0.25× (the statistics of four members);
    a compensation that dropped the error or its rotation gives ≈ 1×."""
    from jaxrigid.reference.free_body import free_body_exact

    model, one = problem("krysl-torque-free")
    states = jr.cases.get_case("krysl-torque-free").perturb(one, np.random.default_rng(0), 0.01, 4)
    T, dt = 1000.0, 0.05
    moments = np.diag(np.asarray(model.inertia))
    exact = [
        free_body_exact(moments, np.asarray(states.R[i]), np.asarray(states.Pi[i]), [T])[0][0]
        for i in range(4)
    ]

    def worst_error(compensated):
        method = compose(LiePoissonSplitting(compensated=compensated), "yoshida6")
        n = int(round(T / dt))
        R = np.asarray(jr.simulate(method, model, states, dt, n, save_every=n).final_state.R)
        return max(np.linalg.norm(R[i] - exact[i], 2) for i in range(4))

    plain, compensated = worst_error(False), worst_error(True)
    assert compensated <= 0.25 * plain, (compensated, plain)


def test_compensated_composition_differentiates_as_the_plain_one():
    """The compensated fused composition under `jit(grad)` with respect to a potential
    parameter, `dt` and Π₀: the compensated sums are the same map to round-off and TwoSum's
    error term has zero derivative, so the gradient is the plain composition's to round-off
    (bound 1e-9 relative: 50 steps of 8 stages, O(1) loss). The plain gradient is the one
    the test above compiled (`_potential_loss_gradient`)."""
    _, state0 = _coulomb_wall()
    args = (1.0, 0.05, state0.Pi)
    grads = [
        _potential_loss_gradient(compose(LiePoissonSplitting(compensated=c), "yoshida6"), *args)
        for c in (False, True)
    ]
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-9 * float(np.max(np.abs(a))))


def test_float32_compensation_removes_the_random_walk_of_the_rounded_sums():
    """Float32, 16 torque-free members (Π₀ spread 0.1), 10⁴ LP-split steps of Δt = 0.1: the
    spatial momentum π = RΠ and RᵀR are kept by every turn, so they move only by the roundings
    of the sums, a random walk; compensated, only the roundings of the increments remain.
    Measured (seeds 0–2) RMS over members of the max drift: π 0.13–0.17× and ‖RᵀR − 1‖
    0.15–0.17× the plain run's, in float32 all the way (the state and its error). Bounds 0.3×
    (the statistics of 16 walks); dropping the error, or its rotation, gives ≈ 1×."""
    model, s0 = problem("krysl-torque-free")
    case = jr.cases.get_case("krysl-torque-free")
    ens = case.perturb(s0, np.random.default_rng(0), 0.1, 16)
    ens = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), ens)
    model32 = jr.RigidBody(jnp.asarray(model.inertia, jnp.float32))

    def drifts(compensated):
        method = LiePoissonSplitting(compensated=compensated)
        sol = jr.simulate(method, model32, ens, jnp.float32(0.1), 10_000, save_every=100)
        carried = jax.tree.leaves(sol.solver_state)  # the rounding error, when compensating
        assert sol.states.R.dtype == jnp.float32 and len(carried) == (2 if compensated else 0)
        assert all(e.dtype == jnp.float32 for e in carried)
        R, Pi = np.asarray(sol.states.R, np.float64), np.asarray(sol.states.Pi, np.float64)
        orth = np.linalg.norm(np.swapaxes(R, -1, -2) @ R - np.eye(3), axis=(-2, -1)).max(-1)
        pi = np.einsum("...ij,...j->...i", R, Pi)
        dpi = np.linalg.norm(pi - pi[:, :1], axis=-1).max(-1)
        return np.sqrt(np.mean(orth**2)), np.sqrt(np.mean(dpi**2))

    (orth_p, pi_p), (orth_c, pi_c) = drifts(False), drifts(True)
    assert pi_c <= 0.3 * pi_p, (pi_c, pi_p)
    assert orth_c <= 0.3 * orth_p, (orth_c, orth_p)
