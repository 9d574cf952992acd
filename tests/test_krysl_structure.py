"""Structure of Krysl's methods: adjoint Euler pairs (§3.2), compositions (§3.3–3.6),
conjugacy of IMID/TRAP and IMIDM/TRAPM (§3.5, §3.7), symmetry, and MKRK (§3.7).

Tolerances: these are identities between maps, so both sides agree up to rounding and the
Newton tolerance (updates ≤ 2e-12 relative, errors after them of its square); 1e-12 relative
to |Π| ≈ 1 (torque-free) or 50 (fast top) covers a few steps of that.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import TORQUED_METHODS, method, one_step, problem

from jaxrigid.integrators import (
    IMID,
    IMIDM,
    MKRK,
    RIGID_BODY_METHODS,
    TRAP,
    TRAPM,
    BackwardEuler,
    BackwardEulerMomentum,
    Composition,
    ForwardEuler,
    ForwardEulerMomentum,
    tableau,
)
from jaxrigid.integrators.base import AbstractImplicitIntegrator
from jaxrigid.lie import so3

TOL = 1e-12
PROBLEMS = ["krysl-torque-free", "krysl-fast-top"]
DT = {"krysl-torque-free": 0.1, "krysl-fast-top": 0.002}


def _close(a, b, scale):
    # numpy on the host: eager jnp would compile a program per op for these checks
    a, b = jax.tree.map(np.asarray, a), jax.tree.map(np.asarray, b)
    assert np.max(np.abs(a.Pi - b.Pi)) <= TOL * scale
    assert np.max(np.abs(a.R - b.R)) <= TOL


# One jitted step for the module, the integrator static (they hash by their settings): an
# integrator's step is traced and compiled once per model for all the tests and directions
# that run it (`t` and `dt` traced), where a fresh `jit` per call retraced it every time.
# Eager Newton loops would compile per step.
_step = jax.jit(one_step, static_argnums=0)


def _run(integrator, model, state, t, dt, n):
    for k in range(n):
        state, info = _step(integrator, model, state, t + k * dt, dt)
        assert bool(info.converged)
    return state


@pytest.mark.parametrize("case_name", PROBLEMS)
@pytest.mark.parametrize(
    "fwd,bwd", [(ForwardEuler, BackwardEuler), (ForwardEulerMomentum, BackwardEulerMomentum)]
)
def test_euler_steps_are_mutual_adjoints(case_name, fwd, bwd):
    """Φ^bE_{−h} ∘ Φ^fE_h = Id and Φ^fE_{−h} ∘ Φ^bE_h = Id (§3.2), also for (18)/(19)."""
    model, s0 = problem(case_name)
    h = DT[case_name]
    scale = float(np.linalg.norm(s0.Pi))
    s1, _ = _step(fwd(), model, s0, 0.0, h)
    back, info = _step(bwd(), model, s1, h, -h)
    assert bool(info.converged)
    _close(back, s0, scale)
    s1, _ = _step(bwd(), model, s0, 0.0, h)
    back, _ = _step(fwd(), model, s1, h, -h)
    _close(back, s0, scale)
    # and the pair is not trivially the identity
    assert float(np.max(np.abs(np.asarray(s1.Pi) - np.asarray(s0.Pi)))) > 1e3 * TOL * scale


@pytest.mark.parametrize("case_name", PROBLEMS)
@pytest.mark.parametrize(
    "algorithm,first,second",
    [
        (TRAP, ForwardEuler, BackwardEuler),
        (IMID, BackwardEuler, ForwardEuler),
        (TRAPM, ForwardEulerMomentum, BackwardEulerMomentum),
        (IMIDM, BackwardEulerMomentum, ForwardEulerMomentum),
    ],
)
def test_printed_algorithms_equal_their_euler_compositions(case_name, algorithm, first, second):
    model, s0 = problem(case_name)
    h = DT[case_name]
    composed = Composition((first(), second()), (0.5, 0.5), stated_order=2)
    a = _run(algorithm(), model, s0, 0.0, h, 5)
    b = _run(composed, model, s0, 0.0, h, 5)
    _close(a, b, float(np.linalg.norm(s0.Pi)))


@pytest.mark.parametrize("case_name", PROBLEMS)
@pytest.mark.parametrize(
    "midpoint,trapezoid,bwd,fwd",
    [
        (IMID, TRAP, BackwardEuler, ForwardEuler),
        (IMIDM, TRAPM, BackwardEulerMomentum, ForwardEulerMomentum),
    ],
)
def test_midpoint_and_trapezoid_are_conjugate(case_name, midpoint, trapezoid, bwd, fwd):
    """Φ^M = (Φ^bE_{Δt/2})⁻¹ ∘ Φ^T ∘ Φ^bE_{Δt/2} (§3.5): n steps of IMID equal a half step of
    bE, n steps of TRAP from t + Δt/2, and the inverse half step fE_{−Δt/2}."""
    model, s0 = problem(case_name)
    h, n = DT[case_name], 10
    direct = _run(midpoint(), model, s0, 0.0, h, n)
    y, _ = _step(bwd(), model, s0, 0.0, h / 2)
    y = _run(trapezoid(), model, y, h / 2, h, n)
    conj, _ = _step(fwd(), model, y, n * h + h / 2, -h / 2)
    _close(direct, conj, float(np.linalg.norm(s0.Pi)))


SYMMETRIC = [n for n, f in RIGID_BODY_METHODS.items() if f().symmetric]
SYMMETRIC_CASES = [
    (name, case_name)
    for name in SYMMETRIC
    for case_name in PROBLEMS
    if case_name == "krysl-torque-free" or name in TORQUED_METHODS
]


@pytest.mark.parametrize("name,case_name", SYMMETRIC_CASES)
def test_symmetric_methods_retrace_their_steps(case_name, name):
    model, s0 = problem(case_name)
    h = DT[case_name]
    integrator = method(name)
    s1 = _run(integrator, model, s0, 0.0, h, 3)
    back = _run(integrator, model, s1, 3 * h, -h, 3)
    _close(back, s0, float(np.linalg.norm(s0.Pi)))


def test_symmetric_flags_match_the_paper():
    # Krysl's own methods: DMV (Dixon) and LP-split (McLachlan; Touma & Wisdom) are others'
    krysl = {n for n in SYMMETRIC if not n.startswith("DMV") and n != "LP-split"}
    assert krysl == {"TRAP", "IMID", "TRAPM", "IMIDM", "SWC1", "AKW", "BBTRAP"}


def test_non_symmetric_methods_do_not_retrace():
    model, s0 = problem("krysl-fast-top")
    h = DT["krysl-fast-top"]
    for name in ["fE", "bEM", "BBTRAPWD"]:
        integrator = method(name)
        back = _run(integrator, model, _run(integrator, model, s0, 0.0, h, 3), 3 * h, -h, 3)
        assert float(np.max(np.abs(np.asarray(back.Pi) - np.asarray(s0.Pi)))) > 1e-9


@pytest.mark.parametrize("case_name", PROBLEMS)
@pytest.mark.parametrize(
    "table,name", [(tableau.IMPLICIT_MIDPOINT, "IMIDM"), (tableau.TRAPEZOIDAL, "BBTRAPWD")]
)
def test_mkrk_reproduces_imidm_and_bbtrapwd(case_name, table, name):
    """§3.7: MKRK with ½|1 is IMIDM and with the trapezoidal tableau BBTRAPWD (with the
    corrected stage torque T_(j); see jaxrigid.integrators.rkmk)."""
    model, s0 = problem(case_name)
    h = DT[case_name]
    a = _run(MKRK(tableau=table), model, s0, 0.0, h, 5)
    b = _run(method(name), model, s0, 0.0, h, 5)
    _close(a, b, float(np.linalg.norm(s0.Pi)))


MAX_ANGLE_METHODS = ["TRAP", "IMID", "TRAPM", "IMIDM"]


@pytest.mark.parametrize("case_name", PROBLEMS)
@pytest.mark.parametrize("name", MAX_ANGLE_METHODS)
def test_max_angle_changes_the_cost_not_the_steps(case_name, name):
    """`max_angle` above every rotation of the steps (0.5 rad; the steps here turn by at most
    ~0.1): the cut Rodrigues series equal the full ones to 4 eps, so the states agree like
    the identities above."""
    model, s0 = problem(case_name)
    h = DT[case_name]
    a = _run(method(name), model, s0, 0.0, h, 5)
    b = _run(type(method(name))(max_angle=0.5), model, s0, 0.0, h, 5)
    _close(a, b, float(np.linalg.norm(s0.Pi)))


@pytest.mark.parametrize("name", MAX_ANGLE_METHODS)
def test_a_step_that_turns_beyond_max_angle_is_reported(name):
    """Torque-free body, Δt = 0.2: the full step turns by ~0.19 rad, each half by ~0.09. With
    max_angle = 0.05 the step breaks the promise and says so; with 0.5 it keeps it."""
    model, s0 = problem("krysl-torque-free")
    cls = type(method(name))
    _, broken = _step(cls(max_angle=0.05), model, s0, 0.0, 0.2)
    _, kept = _step(cls(max_angle=0.5), model, s0, 0.0, 0.2)
    assert not bool(broken.converged)
    assert bool(kept.converged)


def test_mkrk_with_the_printed_stage_torque_is_not_bbtrapwd():
    """The printed T_(k) inside the stage sum weights T_n twice: the difference is O(Δt²) per
    step, far above round-off, which is how the slip was identified."""
    model, s0 = problem("krysl-fast-top")
    h = DT["krysl-fast-top"]
    R, Pi = s0
    b, _ = _step(method("BBTRAPWD"), model, s0, 0.0, h)
    # printed last stage: Π₂ = exp(−Ψ₂)(Π₀ + h(½ T₂ + ½ exp(Ψ₂) T₂)) with BBTRAPWD's Ψ₂
    from jaxrigid.lie import so3

    psi = so3.log(R.T @ b.R)
    T2 = model.body_torque(h, b.R, b.Pi)
    printed = so3.rotate_exp(-psi, Pi + h * (0.5 * T2 + 0.5 * so3.rotate_exp(psi, T2)))
    assert float(jnp.max(jnp.abs(printed - b.Pi))) > 1e-6


def test_triple_jump_composition_is_fourth_order():
    """Yoshida's composition of the symmetric IMIDM (the 'high-order composition of any
    symmetric method' the library is built for): measured order 4 ± 0.15 on the fast top."""
    from helpers import integrate, reference_at, state_error

    from jaxrigid.diagnostics import measured_order
    from jaxrigid.integrators import triple_jump

    model, s0 = problem("krysl-fast-top")
    ref = reference_at("krysl-fast-top", 1.0)
    dts = [0.01 / 2**k for k in range(4)]
    errors = [
        state_error(integrate(triple_jump(IMIDM()), model, s0, dt, 100 * 2**k, chunk=100), ref)[0]
        for k, dt in enumerate(dts)
    ]
    assert abs(measured_order(dts, errors) - 4) <= 0.15, errors
    with pytest.raises(ValueError, match="symmetric"):
        triple_jump(method("BBTRAPWD"))
    assert np.all(np.diff(errors) < 0)


@pytest.mark.parametrize("name", TORQUED_METHODS)
def test_a_torque_free_residual_forms_no_attitude(name, monkeypatch):
    """An implicit step's residual forms the attitude at its unknown (`R exp(Ψ̂)`, or
    `R cay(Ψ̂)`) only to evaluate the torque there (`lie_group.torque_at` takes it as a
    function): for a torque-free body it is not traced, so neither the residual, nor its
    Jacobian, nor any pass of differentiation carries it as dead code. Counted while the
    step is traced, as calls from inside a function named `residual`; the fast top's
    residuals, which need the attitude, show that the count sees them."""
    calls = []

    def inside_residual():
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_name != "residual":
            frame = frame.f_back
        return frame is not None

    for fn in ("compose_exp", "cayley"):

        def counted(*args, _original=getattr(so3, fn), **kwargs):
            if inside_residual():
                calls.append(name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(so3, fn, counted)
    counts = {}
    for case in PROBLEMS:
        model, s0 = problem(case)
        calls.clear()
        jax.make_jaxpr(lambda s: one_step(method(name), model, s, 0.0, DT[case]))(s0)
        counts[case] = len(calls)
    assert counts["krysl-torque-free"] == 0, counts
    implicit = isinstance(method(name), AbstractImplicitIntegrator)
    assert (counts["krysl-fast-top"] > 0) == implicit, counts


def test_the_predictors_have_their_local_orders():
    """The implicit steps' guesses on the fast top (a torque): `half_step_predictor`'s
    `Π(t + h/2)` (an Euler half step) has local error O(h²), `midpoint_predictor`'s `Π(t + h)`
    (the explicit midpoint Lie step) O(h³), measured against DOP853 (rtol 1e-13, far below
    the errors: 1e-3 to 4e-6 here, |Π| ≈ 50) over h = 4, 2, 1 ms. Slopes within 0.2 of the
    order: the next term of the local error changes a slope by O(h)."""
    from jaxrigid.integrators import lie_group
    from jaxrigid.reference.dop853 import rigid_body_reference

    model, s0 = problem("krysl-fast-top")
    omega = model.angular_velocity_map()
    hs = np.array([0.004, 0.002, 0.001])
    errors = {"half": [], "end": []}
    for h in hs:
        exact = rigid_body_reference(model, s0, [0.5 * h, h])
        half = lie_group.half_step_predictor(model, omega, 0.0, s0.R, s0.Pi, h)
        end = lie_group.midpoint_predictor(model, omega, 0.0, s0.R, s0.Pi, h)
        errors["half"].append(np.max(np.abs(np.asarray(half) - np.asarray(exact.Pi[0]))))
        errors["end"].append(np.max(np.abs(np.asarray(end) - np.asarray(exact.Pi[1]))))
    for name, order in (("half", 2), ("end", 3)):
        slopes = np.diff(np.log(errors[name])) / np.diff(np.log(hs))
        assert np.all(np.abs(slopes - order) < 0.2), (name, errors[name], slopes)


@pytest.mark.parametrize("name", ["IMID", "IMIDM", "TRAP", "bE"])
def test_a_step_traces_its_guess_once(name, monkeypatch):
    """A step evaluates the right-hand side outside its residual for its guess — once for
    IMID's and IMIDM's midpoint momentum (`half_step_predictor`), twice for an end momentum
    (`midpoint_predictor`) — and TRAP once more, for its explicit half `Π + (h/2) f(Π)`.
    Counted while the step is traced on the fast top; a guess that formed both momenta and
    kept one (IMID and IMIDM until 2026-12-04) traced the other as dead code."""
    from jaxrigid.integrators import lie_group

    calls = []

    def counted(*args, _original=lie_group._rhs, **kwargs):
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "residual":
            frame = frame.f_back
        calls.append(frame is None)
        return _original(*args, **kwargs)

    monkeypatch.setattr(lie_group, "_rhs", counted)
    model, s0 = problem("krysl-fast-top")
    jax.make_jaxpr(lambda s: one_step(method(name), model, s, 0.0, DT["krysl-fast-top"]))(s0)
    assert sum(calls) == {"IMID": 1, "IMIDM": 1, "TRAP": 3, "bE": 2}[name], calls
