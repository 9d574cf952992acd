"""Measured order of every registered integrator on the cases it integrates, and what it
claims to keep kept.

One test over (registered integrator class, case): the pairs are every class of
`jaxrigid.integrators.REGISTRY` that integrates a case of `PLAN` (`Case.accepts`: its model,
or one of its forms) — the cases are listed once, the methods never. Per pair: a horizon
`t_end` and a coarsest step `Δt₀` from `PLAN` (keyed by case and the method's order), the
final state after `t_end` at `Δt₀/2ᵏ`, k = 0…3, and the order as the least-squares slope of
log error against log Δt (`measured_order`) of the whole state's error, against an
independent float64 reference: the exact solution where one is known, else scipy's DOP853 on
the model's `vector_field` (the embedded ODE, as `jaxrigid.reference` does for the rigid body:
no code shared with the integrators but the vector field), or on an equivalent ODE model for
a model whose constraint a multiplier keeps (RATTLE's top as Krysl's `(R, Π)` body, its `R`
compared).

The same runs check the method's `preserves` claims: each claimed quantity that the model's
exact flow conserves (`model.conserved_quantities()`) keeps its initial value at `t_end`, at
every step size, to round-off — the independent reference of a conserved quantity is its
initial value (a claim that were wrong would leave the quantity's truncation error: `KEPT`).

A method's family keeps in its own file only what is special to it (a printed scheme's
lower order, a sixth-order method at the reference's floor, the order of a constraint's
error).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from helpers import integrate
from jax.flatten_util import ravel_pytree

from jaxrigid.cases import get_case
from jaxrigid.cases.symmetric_top import initial_values
from jaxrigid.diagnostics import measured_order
from jaxrigid.integrators import REGISTRY
from jaxrigid.models.hamiltonian import CanonicalState, kepler_solution
from jaxrigid.models.symmetric_top import rigid_body_top

# One window for every pair. The plans below keep the four step sizes in the asymptotic
# regime: there the next term of the error is O(Δt) relative to the leading one, and over three
# halvings from the plan's Δt₀ every fitted slope lies within 0.07 of the order (the worst:
# Sun Geng's method on Kepler; the slopes in bench/README.md). ±0.1 keeps a margin of 1.5 over
# the worst and fails a method one order off by a factor of ten.
WINDOW = 0.1

# The smallest error a pair may reach: ten times the round-off its own finest run accumulates
# (an ulp, ~1e-16, per step on these O(1) states, random-walking over ≤ 16 000 steps: ~1e-14)
# — or, against DOP853, the reference's own error, estimated as its distance to DOP853 at a
# tenfold looser tolerance (that distance is about ten times the reference's error: DOP853's
# global error scales with its tolerance).
ROUND_OFF_FLOOR = 1e-13

# case -> {order: (t_end, coarsest Δt)}. Each horizon is long enough for the nonlinearity (and
# the torque) to act, and short enough that the finest run is ≤ 16 000 steps; each Δt₀ is a
# step whose four halvings stay in the asymptotic regime and above the floor.
PLAN: dict[str, dict[int, tuple[float, float]]] = {
    # Krysl §5's free body and fast top (spin 50). First-order methods on the fast top leave
    # their asymptotic regime above Δt ≈ 1e-3: a shorter horizon and smaller steps.
    # Order 4 from Δt₀ = 0.1: from 0.04 MKRK-gauss4's finest error (3e-13) is at the floor.
    "krysl-torque-free": {1: (10.0, 0.04), 2: (10.0, 0.04), 4: (10.0, 0.1)},
    "krysl-fast-top": {1: (0.2, 0.0005), 2: (1.0, 0.004), 4: (1.0, 0.004)},
    # Chaurasia ch. 2. Kepler: t_end is never a multiple of the period 2π: there the O(h)
    # terms of the symplectic Eulers (conjugate to Störmer–Verlet) and the O(h⁵) term of Sun
    # Geng's method cancel, and their measured orders are 2 and 6. Order 1 starts at the
    # pericentre, the hardest part of the orbit, with small steps; order 5 runs to t = 0.5
    # only, because Sun Geng's h⁵ term is small against its h⁶ term (over t ∈ [0, 5] the slope
    # is 5.4 for Δt ∈ [0.006, 0.05]).
    "harmonic-oscillator": {
        1: (2.0, 0.02),
        2: (2.0, 0.02),
        4: (10.0, 0.1),
        5: (10.0, 0.25),
        6: (10.0, 0.25),
    },
    "kepler": {1: (2.0, 0.001), 2: (5.0, 0.02), 4: (5.0, 0.01), 5: (0.5, 1 / 32), 6: (5.0, 0.05)},
    # Dixon §8's two bodies at a right angle (Λ turns: every part of the state moves)
    "dmv-coupled-right-angle": {2: (10.0, 0.1)},
    # Chaurasia App. B's top, spin 100 s⁻¹: hΩ ≤ 0.2 at Δt₀
    "symmetric-top-rattle": {2: (0.5, 0.002)},
    # Putkaradze & Rogers' actuated ball; both forms of §3.5's chain (quaternions, matrices)
    "rolling-ball-two-circles": {2: (2.0, 0.04), 4: (2.0, 0.05)},
    "rolling-ball-passive": {2: (2.0, 0.04), 4: (2.0, 0.05)},
    "chain-tetrahedra-c1c2": {4: (0.32, 0.01)},
}

# case -> {order: why no pair of that order is measured on it}.
EXCLUDED: dict[str, dict[int, str]] = {
    "krysl-torque-free": {
        o: "from any Δt₀ still in the asymptotic regime an order ≥ 6 method reaches DOP853's "
        "floor within three halvings; test_mkrk_high_order.py and test_dmv_preprocessed.py "
        "measure these over steps chosen for their order"
        for o in (6, 8, 10)
    },
    "krysl-fast-top": {6: "as for krysl-torque-free: the reference's floor (test_mkrk_high_order)"},
    "chain-tetrahedra-c1c2": {
        2: "RATTLE's chain is the matrix form, which has no vector field for DOP853 "
        "(test_chain_rattle measures its order); Gauss2's is measured by test_chain_gauss (slow) "
        "with the order of its unit-norm error, O(Δt²) (what is special to it)",
        6: "test_chain_gauss measures Gauss6's order together with the order of its unit-norm "
        "error (what is special to it) in one sweep; a second sweep here would double the "
        "chain's costliest build",
    },
    "rolling-ball-two-circles": {
        8: "RKMK8 reaches DOP853's floor within three halvings of any step in its asymptotic "
        "regime; test_rolling_ball_integrators measures it over seven step counts"
    },
    "rolling-ball-passive": {8: "as for rolling-ball-two-circles"},
}

# Registered classes in no pair, and why: their models keep a constraint by a multiplier (a
# DAE) and have no vector field for DOP853; their families measure their order through an
# equivalent ODE model.
UNMEASURED = {
    "EnergyMomentumAVF": "directors with a multiplier; test_energy_momentum measures its order "
    "against DOP853 of the equivalent rigid body and against IMIDM",
}


# A claimed quantity at t_end differs from its initial value by the rounding of every step, a
# random walk of ~1e-16 relative per step over ≤ 16 000 steps (~1e-14; measured: at most
# 2e-14, RATTLE's top), relative to the quantity's initial size (at least 1: the errors that
# start at 0, RtR_error and the like, are held absolutely). A quantity a method does not keep
# leaves its truncation error: at the coarsest step of the planned pairs ≥ 9.8e-10 for every
# quantity of this vocabulary a method does not claim (RK4's L on Kepler, MKRK-gauss4's K on
# the free body; bench/unclaimed_drift.py), but for RATTLE's π₃ on the symmetric top, which it
# keeps unclaimed. 1e-12 sits 50 times above the one and 1000 times below the other.
KEPT = 1e-12

# `preserves` names the invariants whose names differ: the spatial momentum vector
INVARIANTS_OF = {"pi": ("pi1", "pi2", "pi3")}

# claims no model of these cases reports as an invariant, and where each is checked instead
CHECKED_ELSEWHERE = {
    "K_midpoint": "TRAP's energy after a forward-Euler half step (Krysl §3.5): test_invariants",
    "constraint_residual": "MidpointDLA's discrete constraint: test_nonholonomic_midpoint",
}


def _exact_harmonic_oscillator(t):
    return CanonicalState(np.array([np.sin(2 * t)]), np.array([2 * np.cos(2 * t)]))  # m=1, k=4


def _exact_kepler(t):
    return CanonicalState(*kepler_solution(t, 0.6))


EXACT = {"harmonic-oscillator": _exact_harmonic_oscillator, "kepler": _exact_kepler}


def _rattle_top_as_rigid_body():
    """Krysl's `(R, Π)` body of the same top (`symmetric_top.rigid_body_top`)."""
    angles, rates, params = initial_values(get_case("symmetric-top-rattle").resolve())
    return rigid_body_top(angles, rates, params)


# case -> (the equivalent ODE model and initial state, the field compared): for a model kept
# on its constraint by a multiplier, an ODE model of the same motion that DOP853 integrates
EQUIVALENT = {"symmetric-top-rattle": (_rattle_top_as_rigid_body, "R")}


def _form(case_name, cls):
    """The case's builder of the form `cls` integrates (a chain has two forms)."""
    return get_case(case_name).build_for(cls())


@functools.cache
def _built(case_name, form):
    """`(model, state0)`, built once per case and form."""
    return form(get_case(case_name).resolve())


def _expected_order(integrator, case_name):
    """The method's order; on the (linear) oscillator, the order of its stability function
    (Sun Geng's method: 6, the Padé approximant of Gauss6)."""
    tableau = getattr(integrator, "tableau", None)
    if case_name == "harmonic-oscillator" and hasattr(tableau, "stability_order"):
        return tableau.stability_order
    return integrator.order


def _pairs():
    pairs = []
    for case_name in PLAN:
        case = get_case(case_name)
        for cls in REGISTRY:
            integrator = cls()
            if not case.accepts(integrator):
                continue
            order = _expected_order(integrator, case_name)
            if order in EXCLUDED.get(case_name, {}):
                continue
            # every compatible pair is either planned or excluded with its reason
            assert order in PLAN[case_name], (cls.__name__, case_name, order)
            pairs.append(pytest.param(cls, case_name, id=f"{cls.__name__}-{case_name}"))
    return pairs


PAIRS = _pairs()


def _dop853(model, state0, t_end, tol):
    from scipy.integrate import solve_ivp

    y0, unravel = ravel_pytree(state0)
    f = jax.jit(lambda t, y: ravel_pytree(model.vector_field(t, unravel(y)))[0])
    sol = solve_ivp(
        lambda t, y: np.asarray(f(t, y)),
        (0.0, t_end),
        np.asarray(y0, np.float64),
        method="DOP853",
        rtol=tol,
        atol=tol,
    )
    assert sol.success, sol.message
    return unravel(sol.y[:, -1])


def _compared(case_name, state):
    """The state as one flat vector, or only the field the equivalent model shares."""
    if case_name in EQUIVALENT:
        return np.asarray(getattr(state, EQUIVALENT[case_name][1])).reshape(-1)
    return np.asarray(ravel_pytree(state)[0])


@functools.cache
def _reference(case_name, form, t_end):
    """(the compared state at `t_end`, the smallest error measurable against it): the exact
    solution, or DOP853 at rtol = atol = 1e-13 (module-cached: pairs share it)."""
    if case_name in EXACT:
        return _compared(case_name, EXACT[case_name](t_end)), ROUND_OFF_FLOOR
    model, state0 = (
        EQUIVALENT[case_name][0]() if case_name in EQUIVALENT else _built(case_name, form)
    )
    ref, looser = (_dop853(model, state0, t_end, tol) for tol in (1e-13, 1e-12))
    estimate = np.linalg.norm(_compared(case_name, looser) - _compared(case_name, ref))
    return _compared(case_name, ref), max(ROUND_OFF_FLOOR, estimate)


@pytest.mark.parametrize("cls,case_name", PAIRS)
def test_measured_order(cls, case_name, record_property):
    integrator = cls()
    order = _expected_order(integrator, case_name)
    t_end, dt0 = PLAN[case_name][order]
    form = _form(case_name, cls)
    model, state0 = _built(case_name, form)
    ref, floor = _reference(case_name, form, t_end)
    n0 = round(t_end / dt0)
    dts = [t_end / (n0 * 2**k) for k in range(4)]
    # dt is traced and the chunk of n0 steps static: one compiled program for all four sizes
    finals = [
        integrate(integrator, model, state0, dt, n0 * 2**k, chunk=n0) for k, dt in enumerate(dts)
    ]
    # the 2-norm of the whole state's error: the lowest-order component dominates it (a single
    # component may superconverge at a given time: the symplectic Eulers' q on the oscillator)
    errors = np.array([np.linalg.norm(_compared(case_name, y) - ref) for y in finals])
    assert np.all(errors >= floor), ("below the reference's floor", floor, errors)
    slope = measured_order(dts, errors)
    record_property("slope", slope)  # in --junitxml's report (bench/README.md)
    assert abs(slope - order) <= WINDOW, (slope, errors)

    drifts = _claims_kept(integrator, model, state0, t_end, finals)
    record_property("largest_kept_drift", max(drifts.values(), default=0.0))
    assert all(d <= KEPT for d in drifts.values()), drifts


def _claims_kept(integrator, model, state0, t_end, finals) -> dict[str, float]:
    """`preserved(model)`'s claims that the model's flow conserves -> each's largest deviation
    from its initial value over `finals` (relative to its initial size, at least 1)."""
    initial = model.invariants(0.0, state0)
    conserved = model.conserved_quantities()
    drifts = {}
    for claim in sorted(integrator.preserved(model)):
        names = INVARIANTS_OF.get(claim, (claim,))
        if not all(n in initial for n in names):
            assert claim in CHECKED_ELSEWHERE or claim == "L", (claim, sorted(initial))
            continue  # the oscillator has no angular momentum `L`
        if conserved is not None and not set(names) <= conserved:
            continue  # a torque or a driving changes it: nothing to keep
        x0 = np.array([float(initial[n]) for n in names])
        scale = max(float(np.linalg.norm(x0)), 1.0)
        drifts[claim] = max(
            float(np.linalg.norm([float(model.invariants(t_end, y)[n]) for n in names] - x0))
            / scale
            for y in finals
        )
    return drifts


def test_every_registered_class_is_measured_or_excused():
    """Each registered class has a pair above, or its order is excluded with a reason on every
    planned case it integrates, or it integrates none and `UNMEASURED` says why."""
    measured = {p.values[0] for p in PAIRS}
    for cls in REGISTRY:
        accepting = [c for c in PLAN if get_case(c).accepts(cls())]
        if cls in measured:
            assert cls.__name__ not in UNMEASURED, cls  # no stale reason
        elif accepting:
            assert all(_expected_order(cls(), c) in EXCLUDED.get(c, {}) for c in accepting), cls
        else:
            assert cls.__name__ in UNMEASURED, cls
