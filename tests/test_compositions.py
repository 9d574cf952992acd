"""Symmetric compositions `compose(method, scheme)` (jaxrigid.integrators.composition and
tableau.compositions): each scheme meets its order conditions and no more, a scheme that misses
one is refused, the measured order of the composed IMIDM against exact references (the body
momentum by elliptic functions on the torque-free body, the attitude by DOP853 on the fast top),
what the composition keeps (what every member keeps) on the rigid body and in the other
families, ensembles, gradients, float32, the looped and unrolled stage paths, and the refusals,
names and CLI.

Orders are fitted slopes of log(error) against log(Δt) over step sizes in the asymptotic
regime, each error at least 100× above the reference's floor (the exact body momentum: ~1e-14;
DOP853 of the fast top: ~1.2e-12), so the slope is the method's and not the floor's.
"""

import contextlib
import io
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ALL_METHODS, integrate, method, problem, reference_at, state_error

import jaxrigid as jr
from jaxrigid import cli
from jaxrigid.cases import get_case
from jaxrigid.diagnostics import invariants_along, measured_order
from jaxrigid.integrators import Composition, compose, get_method
from jaxrigid.integrators.composition import AbstractComposition
from jaxrigid.integrators.tableau.compositions import (
    DEFECT_TOLERANCE,
    SCHEMES,
    CompositionScheme,
    order_defects,
    suzuki_fractions,
    triple_jump_fractions,
)
from jaxrigid.reference.free_body import free_body_momentum

EPS = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)


def _pi_drift(inv):
    """max ‖π(t) − π(0)‖ / ‖π(0)‖ of the spatial momentum vector (pi1..pi3)."""
    pi = np.stack([np.asarray(inv[f"pi{i}"]) for i in (1, 2, 3)], axis=-1)
    return float(np.max(np.linalg.norm(pi - pi[:1], axis=-1)) / np.linalg.norm(pi[0]))


def _relative_drift(values):
    v = np.asarray(values)
    return float(np.max(np.abs(v - v[0])) / abs(v[0]))


# ---------------------------------------------------------------------------------------
# The schemes' order conditions


@pytest.mark.parametrize("name", list(SCHEMES))
def test_scheme_has_exactly_its_stated_order(name):
    """The relative defects of the powers h⁰ … hᵖ vanish to round-off (≤ DEFECT_TOLERANCE, the
    acceptance bound of tableau.compositions), that of h^{p+1} does not: the scheme has order p,
    not more. Bound 1e-7 on the latter: 1e5× DEFECT_TOLERANCE, and 47× below the smallest
    measured one (4.7e-6, Sofroniou–Spaletta 10; the order-4 schemes' are 0.15)."""
    scheme = SCHEMES[name]
    p = scheme.order
    defects = order_defects(scheme.fractions, p + 1)
    assert np.max(defects[: p + 1]) <= DEFECT_TOLERANCE, defects
    assert defects[p + 1] >= 1e-7, defects
    # the middle fraction is 1 − 2·fsum(half), rounded once: the sum is 1 to a few ulp
    assert math.isclose(math.fsum(scheme.fractions), 1.0, rel_tol=0, abs_tol=4 * EPS)
    assert scheme.fractions == scheme.fractions[::-1]


@pytest.mark.parametrize("name", list(SCHEMES))
def test_scheme_missing_an_order_condition_is_refused(name):
    """One coefficient pair moved by 1e-9 (the middle fraction adjusted so that the palindrome
    still sums to one) breaks a condition by ~1e-9, 1000× the acceptance bound: refused. The
    same data unperturbed is accepted, so the refusal is the perturbation's; fractions that do
    not read the same backwards, or do not sum to one, are refused too."""
    scheme = SCHEMES[name]
    g = scheme.fractions
    half = list(g[: len(g) // 2])
    middle = lambda h: 1.0 - 2.0 * math.fsum(h)  # noqa: E731
    CompositionScheme("same", (*half, middle(half), *reversed(half)), scheme.order, "")
    half[0] += 1e-9
    perturbed = (*half, middle(half), *reversed(half))
    with pytest.raises(ValueError, match="not of order"):
        CompositionScheme("perturbed", perturbed, scheme.order, "")
    k = len(g) // 2  # the outer fraction and the middle one swapped: the sum is kept
    lopsided = (g[k], *g[1:k], g[0], *g[k + 1 :])
    assert lopsided != lopsided[::-1]
    with pytest.raises(ValueError, match="backwards"):
        CompositionScheme("lopsided", lopsided, scheme.order, "")
    with pytest.raises(ValueError, match="not of order"):  # the h¹ condition: Σγ = 1
        CompositionScheme("scaled", tuple((1 + 1e-9) * x for x in g), scheme.order, "")


# ---------------------------------------------------------------------------------------
# Measured order


# scheme → (T, step sizes, allowed |slope − order|). T is a multiple of every step. The steps
# are the largest that keep the error ≥ 1e-12, 100× the exact solution's ~1e-14 floor; there
# the next term of the error expansion is still 10–20 % of the error, which moves the slope by
# up to ~0.3 (orders 4, 6) or ~0.4 (orders 8, 10, whose steps are larger relative to the
# period).
TORQUE_FREE_PLAN = {
    "triple-jump": (102.4, (0.4, 0.2, 0.1), 0.3),
    "suzuki5": (102.4, (0.4, 0.2, 0.1), 0.3),
    "yoshida6": (102.4, (0.4, 0.2, 0.1), 0.3),
    "kahan-li6": (102.4, (0.4, 0.2, 0.1), 0.3),
    "mclachlan8": (102.4, (1.6, 0.8, 0.4), 0.4),
    "kahan-li8": (102.4, (1.6, 0.8, 0.4), 0.4),
    "sofroniou-spaletta10": (96.0, (2.4, 2.0, 1.6, 1.2), 0.4),
}


def _n_steps(t_end, dts):
    ns = [round(t_end / dt) for dt in dts]
    for n, dt in zip(ns, dts):
        assert math.isclose(n * dt, t_end, rel_tol=1e-12)
    return ns, math.gcd(*ns)  # the chunk: one compilation for every step size


def test_every_scheme_has_a_torque_free_plan():
    assert set(TORQUE_FREE_PLAN) == set(SCHEMES)


@pytest.mark.parametrize("name", list(TORQUE_FREE_PLAN))
def test_order_on_the_torque_free_body(name):
    """‖Π(T) − Π_exact(T)‖ of compose(IMIDM, scheme), Π_exact from Jacobi's elliptic functions
    (jaxrigid/reference/free_body.py, ~1e-14). Measured slopes: triple jump 4.00, Suzuki 4.00,
    Yoshida 6 5.94, Kahan–Li 6 5.99, McLachlan 8 7.75, Kahan–Li 8 7.90, Sofroniou–Spaletta 10
    9.80 (errors 2.6e-7 … 4.3e-9 … 6.8e-11 for Yoshida 6; 7.7e-12 the smallest, SS10 at 1.2)."""
    t_end, dts, tol = TORQUE_FREE_PLAN[name]
    composed = compose(jr.IMIDM(), name)
    assert composed.order == SCHEMES[name].order
    model, state0 = problem("krysl-torque-free")
    moments = np.diag(np.asarray(model.inertia))
    exact = free_body_momentum(moments, np.asarray(state0.Pi), [t_end])[0]
    ns, chunk = _n_steps(t_end, dts)
    errors = [
        float(
            np.linalg.norm(np.asarray(integrate(composed, model, state0, dt, n, chunk).Pi) - exact)
        )
        for dt, n in zip(dts, ns)
    ]
    assert np.all(np.diff(errors) < 0), errors
    assert min(errors) >= 1e-12, errors  # 100× the reference's floor: the regime claimed above
    assert abs(measured_order(dts, errors) - composed.order) <= tol, errors


def test_suzuki_of_suzuki_is_sixth_order():
    """Suzuki's fractal on the fourth-order compose(IMIDM, "suzuki5") raises it to 6 (GNI
    eq. (V.3.5) with k = 2), measured on the torque-free body: slope 5.97 at Δt = 0.8, 0.4,
    0.2 (errors 5.7e-9, 9.0e-11, 1.5e-12, the last 100× above the 1e-14 floor); ±0.3 as for
    the other sixth-order schemes."""
    composed = compose(compose(jr.IMIDM(), "suzuki5"), "suzuki5")
    assert composed.order == 6 and composed.fractions == suzuki_fractions(4)
    model, state0 = problem("krysl-torque-free")
    t_end, dts = 102.4, (0.8, 0.4, 0.2)
    exact = free_body_momentum(np.diag(np.asarray(model.inertia)), np.asarray(state0.Pi), [t_end])
    ns, chunk = _n_steps(t_end, dts)
    errors = [
        float(
            np.linalg.norm(np.asarray(integrate(composed, model, state0, dt, n, chunk).Pi) - exact)
        )
        for dt, n in zip(dts, ns)
    ]
    assert np.all(np.diff(errors) < 0) and min(errors) >= 1e-12, errors
    assert abs(measured_order(dts, errors) - 6) <= 0.3, errors


# scheme → (numbers of steps to t = 1, allowed |slope − order|)
FAST_TOP_PLAN = {
    "suzuki5": ((50, 100, 200), 0.3),
    "yoshida6": ((50, 100, 200), 0.3),
    "kahan-li8": ((16, 20, 24, 32), 0.4),
    "sofroniou-spaletta10": ((10, 12, 14, 16), 0.4),
}


@pytest.mark.parametrize("name", list(FAST_TOP_PLAN))
def test_attitude_order_on_the_fast_top(name):
    """The attitude ‖R(1) − R_ref(1)‖₂ of compose(IMIDM, scheme) on Krysl's fast top (a torque:
    gravity; spin ω₃ = 50) against DOP853 (helpers.reference_at; floor ~1.2e-12). Measured:
    Suzuki 5 at Δt = 0.02, 0.01, 0.005: 2.3e-6, 1.4e-7, 9.0e-9 (slope 4.00); Yoshida 6 at the
    same steps: 1.17e-7, 2.02e-9, 3.22e-11 (slope 5.91).

    Orders 8 and 10 are at the reference's floor at Δt = 0.02 (Kahan–Li 8: 4.7e-12; SS10:
    1.3e-12), so they are seen only at larger steps, up to where Newton fails (Yoshida 6 at
    Δt = 0.04; McLachlan 8 at 1/16; SS10 at 1/8: ω₃Δt of several radians): Kahan–Li 8 at
    Δt = 1/16 … 1/32: 5.1e-8 … 1.7e-10 (slope 8.24); SS10 at 1/10 … 1/16: 3.1e-9 … 2.7e-11
    (slope 10.13), the smallest 20× above the floor. Tolerances as on the torque-free body."""
    ns, tol = FAST_TOP_PLAN[name]
    composed = compose(jr.IMIDM(), name)
    model, state0 = problem("krysl-fast-top")
    ref = reference_at("krysl-fast-top", 1.0)
    chunk = math.gcd(*ns)
    dts = [1.0 / n for n in ns]
    errors = [
        state_error(integrate(composed, model, state0, dt, n, chunk), ref)[1]
        for dt, n in zip(dts, ns)
    ]
    assert np.all(np.diff(errors) < 0), errors
    assert min(errors) >= 10 * 1.2e-12, errors  # 10× the reference's floor (SS10: 22×)
    assert abs(measured_order(dts, errors) - composed.order) <= tol, errors


# ---------------------------------------------------------------------------------------
# What a composition keeps: the rigid body

# yoshida6 composes second-order methods (the preprocessed DMV of orders 4–10 is refused, as
# test_schemes_on_a_fourth_order_symmetric_method checks for order 4)
SYMMETRIC_METHODS = [n for n in ALL_METHODS if method(n).symmetric and method(n).order == 2]

# 1000 composed steps of Δt = 0.4 (7000 Yoshida sub-steps of up to 1.18 Δt), every 5th saved.
# Kept: ≤ 1e-12, as in test_invariants.py: the drift of a conserved quantity is a random walk of
# ~1e-16 roundings (√7000 · 1e-16 ≈ 1e-14) plus Newton's stopping tolerance (≈ 2e-12 on the
# update, whose effect is its square); measured ≤ 2.7e-14. Not kept: ≥ 3e-11, 30× the kept
# bound and 1000× the measured round-off: the sixth-order truncation error (Δt⁶ = 4.1e-3 times
# small constants) moves them by 1.4e-10 (K of LP-split, whose free flow is the most
# accurate), 5.7e-9 (K of TRAPM) … 1.8e-7 (π of IMID), measured. At Δt = 0.2 those would be
# 64× smaller, within 100× of round-off: hence Δt = 0.4.
INV_DT, INV_STEPS, INV_SAVE = 0.4, 1000, 5
KEPT, NOT_KEPT = 1e-12, 3e-11


@pytest.mark.parametrize("name", SYMMETRIC_METHODS)
def test_composition_keeps_what_every_member_keeps(name):
    base = method(name)
    composed = compose(base, "yoshida6")
    assert composed.name == f"{name}:yoshida6"
    assert composed.symmetric and composed.order == 6
    assert composed.preserves == base.preserves - {"K_midpoint"}
    model, state0 = problem("krysl-torque-free")
    sol = jr.simulate(composed, model, state0, INV_DT, INV_STEPS, save_every=INV_SAVE)
    assert bool(sol.outcome.all_converged), sol.outcome
    inv = invariants_along(model, sol.ts, sol.states)
    drifts = {
        "pi": _pi_drift(inv),
        "K": _relative_drift(inv["K"]),
        "RtR_error": float(np.max(np.asarray(inv["RtR_error"]))),
    }
    assert composed.preserves <= set(drifts)  # every claim is checked
    for quantity, drift in drifts.items():
        if quantity in composed.preserves:
            assert drift <= KEPT, (quantity, drift)
        elif quantity != "RtR_error":
            assert drift >= NOT_KEPT, (quantity, drift)


# ---------------------------------------------------------------------------------------
# What a composition keeps: the other families

FAMILY_STEPS, YOSHIDA_STAGES = 200, 7
# 1400 sub-steps. Drifts (relative) and accumulated errors: ≤ 10 roundings of relative size eps
# per sub-step, added up linearly in the worst case: 1400 · 10 eps = 3.1e-12. (Linear is not
# only the worst case: EM-AVF's energy drifts linearly, measured 1.6 eps per sub-step, 2.4e-13
# over the run.)
FAMILY_ROUND_OFF = FAMILY_STEPS * YOSHIDA_STAGES * 10 * EPS


def _kept_quantities(family, model, state0, inv):
    """quantity of `preserves` → (measured deviation, bound), named as the tests of each
    family do (test_symplectic_long, test_nontwisting, test_rattle, test_dmv_coupled)."""
    if family == "hamiltonian":  # Kepler's angular momentum L
        return {"L": (_relative_drift(inv["L"]), FAMILY_ROUND_OFF)}
    if family == "director":
        # the non-twisting body has no conserved spatial momentum (its constraint moment turns
        # it); Theorem 5.2 keeps K and the material momenta Π¹, Π² instead (test_nontwisting)
        pi = max(_relative_drift(inv["Pi1"]), _relative_drift(inv["Pi2"]))
        return {"K": (_relative_drift(inv["K"]), FAMILY_ROUND_OFF), "pi": (pi, FAMILY_ROUND_OFF)}
    if family == "constrained":
        # RATTLE imposes both constraints every (sub-)step, so they do not accumulate:
        # test_rattle's bounds, 10 eps and 10 eps |Ω| (|Ω| ≈ 100)
        omega = float(jnp.linalg.norm(model.body_angular_velocity(state0)))
        return {
            "RtR_error": (float(np.max(inv["RtR_error"])), 10 * EPS),
            "tangency_error": (float(np.max(inv["tangency_error"])), 10 * EPS * omega),
        }
    if family == "coupled_bodies":  # total spatial momentum; RᵀR − 1 accumulates
        return {
            "pi": (_pi_drift(inv), FAMILY_ROUND_OFF),
            "RtR_error": (float(np.max(inv["RtR_error"])), FAMILY_ROUND_OFF),
        }
    raise AssertionError(family)


@pytest.mark.parametrize(
    "case_name,method_name",
    [
        ("kepler", "stormer-verlet"),
        ("nontwisting-case1", "EM-AVF"),
        ("symmetric-top-rattle", "rattle"),
        ("dmv-coupled-right-angle", "DMV-body"),
    ],
)
def test_composition_keeps_its_invariants_in_other_families(case_name, method_name):
    """Measured (200 composed steps at the case's Δt): L of Kepler 4.4e-15; EM-AVF K 2.4e-13,
    Π¹, Π² 1.2e-13; RATTLE RᵀR − 1 5.2e-16, tangency 4.6e-14; coupled DMV π 1.2e-14,
    RᵀR − 1 7.8e-15. Every implicit member converges with the negative sub-steps of
    Yoshida 6 (−1.18 Δt)."""
    case = get_case(case_name)
    model, state0 = case.build(case.resolve({}))
    composed = compose(get_method(method_name, case.family), "yoshida6")
    assert composed.name == f"{method_name}:yoshida6" and composed.order == 6
    sol = jr.simulate(composed, model, state0, case.default_dt, FAMILY_STEPS, save_every=1)
    assert bool(np.all(sol.outcome.all_converged)), sol.outcome
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(sol.states))
    inv = {k: np.asarray(v) for k, v in invariants_along(model, sol.ts, sol.states).items()}
    kept = _kept_quantities(case.family, model, state0, inv)
    # its claim on this model (DMV keeps no energy on coupled bodies)
    assert set(kept) == set(composed.preserved(model))
    for quantity, (deviation, bound) in kept.items():
        assert deviation <= bound, (quantity, deviation, bound)


# ---------------------------------------------------------------------------------------
# Ensembles, gradients, float32, looped and unrolled stages


def test_batched_run_equals_single_runs():
    """compose(IMIDM, "kahan-li8") on 3 members (Π₀ scaled by 1 + 0.05·N(0, 1), member 0
    exact), 100 steps of 0.1 (1700 sub-steps), batched = each member alone to ≤ 1e-14 of the
    largest entry, as in test_simulate: the same arithmetic, vectorised; vmap may change the
    order of a reduction, an isolated ulp that the flow then carries along (measured:
    bitwise after 10 steps, ≤ 20.5 ulp of the largest entry after 100)."""
    model, state0 = problem("krysl-torque-free")
    rng = np.random.default_rng(0)
    scale = 1.0 + 0.05 * rng.standard_normal((3, 3))
    scale[0] = 1.0
    ensemble = state0._replace(
        Pi=jnp.asarray(scale) * state0.Pi[None], R=jnp.broadcast_to(state0.R, (3, 3, 3))
    )
    composed = compose(jr.IMIDM(), "kahan-li8")
    batched = jr.simulate(composed, model, ensemble, 0.1, 100, save_every=100)
    assert bool(np.all(batched.outcome.all_converged))
    for m in range(3):
        member = jax.tree_util.tree_map(lambda x: x[m], ensemble)
        single = jr.simulate(composed, model, member, 0.1, 100, save_every=100).final_state
        for a, b in zip(single, batched.final_state):
            scale_m = float(jnp.max(jnp.abs(a)))
            assert float(jnp.max(jnp.abs(a - b[m]))) <= 1e-14 * scale_m


def test_gradient_through_the_stage_scan_equals_finite_differences():
    """d Π(5)/d 𝕀₁₁ of compose(IMIDM, "kahan-li8") (reverse mode through the scan over the 17
    stages and each stage's Newton solve) against central differences with step 1e-6.
    Tolerance 1e-6 relative (as test_sensitivity): the differences' truncation error is
    ~1e-12 · f''' and their round-off ~1e-16/1e-6 = 1e-10, both far below it (measured 5e-11)."""
    model, state0 = problem("krysl-torque-free")
    composed = compose(jr.IMIDM(), "kahan-li8")

    def final_Pi(i11):
        body = jr.RigidBody(model.inertia.at[0, 0].set(i11))
        return jr.simulate(composed, body, state0, 0.1, 50, save_every=50).final_state.Pi

    i11 = model.inertia[0, 0]
    grad = np.asarray(jax.jit(jax.jacrev(final_Pi))(i11))
    f, h = jax.jit(final_Pi), 1e-6
    fd = (np.asarray(f(i11 + h)) - np.asarray(f(i11 - h))) / (2 * h)
    assert np.max(np.abs(grad - fd)) <= 1e-6 * np.max(np.abs(fd)), (grad, fd)
    assert np.max(np.abs(fd)) > 0.1  # the inertia does move the final momentum


def test_float32_keeps_the_spatial_momentum_to_float32_round_off():
    """compose(IMIDM, "yoshida6") in float32, 100 steps of 0.1 (700 sub-steps): float32 in,
    float32 out, and π kept to float32 round-off: a random walk of a few roundings of eps32 =
    1.2e-7 per sub-step, √700 · 3 eps32 = 9.5e-6 (bound 1e-5; measured 1.1e-6). Newton's float32
    tolerance (6.5e-6 on the update) enters as its square."""
    model, state0 = problem("krysl-torque-free")
    m32 = jr.RigidBody(model.inertia.astype(jnp.float32))
    s32 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), state0)
    sol = jr.simulate(compose(jr.IMIDM(), "yoshida6"), m32, s32, jnp.float32(0.1), 100)
    assert sol.final_state.Pi.dtype == jnp.float32 and sol.final_state.R.dtype == jnp.float32
    assert bool(sol.outcome.all_converged)
    inv = invariants_along(m32, sol.ts, sol.states)
    assert _pi_drift(inv) <= math.sqrt(700) * 3 * EPS32
    # ‖RᵀR − 1‖ accumulates the same float32 roundings (measured 1.6e-6)
    assert float(jnp.max(inv["RtR_error"])) <= math.sqrt(700) * 3 * EPS32


def test_unrolled_stages_equal_the_scanned_ones():
    """Equal members (distinct instances, equal settings) run as one scanned step; members that
    differ (a setting or a class) are unrolled. The triple jump of IMIDM, 100 steps of 0.1:
    - unrolled with a middle member whose Newton may take more updates (never needed): the
      same arithmetic in another program, ≤ 1e-14 of |Π| ≈ 1 (as batched = single; measured
      bitwise);
    - unrolled with a chord-Newton middle member: the two solves stop within the solve
      tolerance (1.8e-12 relative on the update), so the runs differ by less than it: bound
      1e-12 (measured 2.4e-15)."""
    g = triple_jump_fractions()
    scanned = Composition((jr.IMIDM(), jr.IMIDM(), jr.IMIDM()), g, 4)
    more_steps = jr.IMIDM(newton=jr.Newton(max_steps=49))
    unrolled = Composition((jr.IMIDM(), more_steps, jr.IMIDM()), g, 4)
    chord = Composition((jr.IMIDM(), jr.IMIDM(newton=jr.Newton(chord=True)), jr.IMIDM()), g, 4)
    assert scanned._looped and not unrolled._looped and not chord._looped
    assert not Composition((jr.IMIDM(), jr.IMID(), jr.IMIDM()), g, 4)._looped  # two classes
    model, state0 = problem("krysl-torque-free")
    runs = []
    for composed in (scanned, unrolled, chord):
        sol = jr.simulate(composed, model, state0, 0.1, 100, save_every=100)
        assert bool(sol.outcome.all_converged), sol.outcome
        runs.append(sol.final_state)
    for other, bound in ((runs[1], 1e-14), (runs[2], 1e-12)):
        for a, b in zip(runs[0], other):
            assert float(jnp.max(jnp.abs(a - b))) <= bound


# ---------------------------------------------------------------------------------------
# Refusals, names, the CLI


@pytest.mark.parametrize("name", ["BBTRAPWD", "MKRK"])
def test_compose_refuses_a_non_symmetric_method(name):
    assert not method(name).symmetric
    with pytest.raises(ValueError, match="symmetric"):
        compose(method(name), "yoshida6")


def test_schemes_on_a_fourth_order_symmetric_method():
    """A tabulated scheme is built for order 2 and refused on another order; the triple jump
    and Suzuki's fractal raise a symmetric method of order 4 (a composition, or Gauss4) to 6
    with the fractions of k = 2 (GNI eqs. (V.3.4), (V.3.5))."""
    tj = compose(jr.IMIDM(), "triple-jump")
    gauss4 = get_method("gauss4", "hamiltonian")
    assert tj.order == 4 and tj.symmetric and gauss4.order == 4 and gauss4.symmetric
    for fourth in (tj, gauss4):
        for scheme in ("yoshida6", "kahan-li8", "sofroniou-spaletta10"):
            with pytest.raises(ValueError, match="composes second-order methods"):
                compose(fourth, scheme)
        six = compose(fourth, "triple-jump")
        assert six.order == 6 and six.symmetric and six.fractions == triple_jump_fractions(4)
        six = compose(fourth, "suzuki5")
        assert six.order == 6 and six.symmetric and six.fractions == suzuki_fractions(4)


def test_get_method_composes_by_name():
    composed = get_method("imidm:Kahan-Li8")
    assert isinstance(composed, AbstractComposition)
    assert composed.name == "IMIDM:kahan-li8" and composed.order == 8 and composed.symmetric
    assert composed.fractions == SCHEMES["kahan-li8"].fractions
    assert all(type(i) is jr.IMIDM for i in composed.integrators)
    with pytest.raises(ValueError, match="unknown composition scheme") as err:
        get_method("IMIDM:nope")
    assert all(s in str(err.value) for s in SCHEMES)


def test_cli_runs_a_composition(tmp_path):
    stdout, stderr = io.StringIO(), io.StringIO()
    args = ["--method", "IMIDM:yoshida6", "--dt", "0.1", "--t-end", "1", "--json"]
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli.main(["run", "krysl-torque-free", *args, "--out", str(tmp_path)])
    assert rc == 0, stderr.getvalue()
    report = json.loads(stdout.getvalue())
    assert report["method"] == "IMIDM:yoshida6" and report["n_steps"] == 10
    assert report["newton"]["all_converged"]


def test_cli_names_the_valid_schemes_for_an_unknown_one(tmp_path, capsys):
    rc = cli.main(["run", "krysl-torque-free", "--method", "IMIDM:nope", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "unknown composition scheme 'nope'" in err[0]
    assert all(s in err[0] for s in SCHEMES)
