"""Classical and partitioned Runge–Kutta methods on the Hamiltonian problems of Chaurasia (2012)
ch. 2: symplecticity of one step, quadratic invariants, energy behaviour,
tableau validation, and ensembles (their measured order: tests/test_order_registry.py)."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import integrate, one_step

import jaxrigid as jr
from jaxrigid.cases.hamiltonian import CASES
from jaxrigid.integrators import HAMILTONIAN_METHODS
from jaxrigid.integrators import tableau as tb
from jaxrigid.integrators.partitioned import (
    STORMER_VERLET,
    SYMPLECTIC_EULER_A,
    PartitionedTableau,
)
from jaxrigid.integrators.runge_kutta import extrapolates, extrapolation_matrix, next_slopes
from jaxrigid.integrators.tableau import GAUSS4, SUN_GENG5, ButcherTableau
from jaxrigid.models.hamiltonian import CanonicalState

METHODS = list(HAMILTONIAN_METHODS)
SYMPLECTIC = [n for n in METHODS if HAMILTONIAN_METHODS[n]().symplectic]
NOT_SYMPLECTIC = ["euler", "implicit-euler", "rk4", "radau5"]
CASE = {c.name: c for c in CASES}


def build(name, **overrides):
    case = CASE[name]
    return case.build(case.resolve(overrides))


def _step_jacobian(integrator, model, state, dt):
    def flow(y):
        n = y.shape[0] // 2
        out, _ = one_step(integrator, model, CanonicalState(y[:n], y[n:]), 0.0, dt)
        return jnp.concatenate([out.q, out.p])

    y = jnp.concatenate([state.q, state.p])
    return jax.jit(jax.jacfwd(flow))(y)


def _symplecticity_defect(name, problem, dt):
    model, state = build(problem)
    J = _step_jacobian(HAMILTONIAN_METHODS[name](), model, state, dt)
    n = J.shape[0] // 2
    Omega = jnp.block([[jnp.zeros((n, n)), jnp.eye(n)], [-jnp.eye(n), jnp.zeros((n, n))]])
    return float(jnp.max(jnp.abs(J.T @ Omega @ J - Omega)))


# The pendulum's H is not separable: all implicit stages of the partitioned methods matter
# (one degree of freedom: JᵀΩJ = Ω is det J = 1). Kepler's state is 4-D, so there the condition
# says more; its 3-stage checks compile for ~5 s each and run with `-m slow`. The steps are large
# enough that the O(h^(p+1)) defects of the non-symplectic methods stand far above round-off.
KEPLER_DEFAULT = {"gauss4", "stormer-verlet", "symplectic-euler-b", "rk4", "euler"}
SYMPLECTIC_CHECKS = [(n, "pendulum", 0.5) for n in METHODS] + [
    pytest.param(n, "kepler", 0.2, marks=() if n in KEPLER_DEFAULT else pytest.mark.slow)
    for n in METHODS
]


@pytest.mark.parametrize("name,problem,dt", SYMPLECTIC_CHECKS)
def test_symplectic_condition(name, problem, dt):
    defect = _symplecticity_defect(name, problem, dt)
    if name in SYMPLECTIC:
        # Round-off: entries of J are O(1)–O(10); the Newton solve (full Newton stopped at
        # eps^(3/4), so its error is ~eps^(3/2)) and the implicit-function derivative of the
        # stages are exact to a few eps.
        assert defect < 1e-13, defect
    else:
        assert name in NOT_SYMPLECTIC and defect > 1e-6, defect


LONG = ["gauss2", "gauss4", "gauss6", "stormer-verlet", "rk4"]


@functools.cache
def kepler_long_run(name):
    """Kepler, Δt = 0.05 for 10⁴ steps (t = 500, about 80 periods), every 5th state."""
    model, state0 = build("kepler")
    sol = jr.simulate(HAMILTONIAN_METHODS[name](), model, state0, 0.05, 10_000, save_every=5)
    assert bool(sol.outcome.all_converged)
    inv = jax.vmap(lambda s: model.invariants(0.0, s))(sol.states)
    return {k: np.asarray(v - v[0]) for k, v in inv.items()}


@pytest.mark.parametrize("name", LONG)
def test_kepler_angular_momentum(name):
    drift = np.max(np.abs(kepler_long_run(name)["L"]))
    if "L" in HAMILTONIAN_METHODS[name]().preserves:
        # Round-off: |L| = 0.8 and 10⁴ steps of a few eps each, accumulated as a random walk
        # (measured: ≤ 1e-14).
        assert drift < 1e-12, drift
    else:
        assert drift > 1e-6, drift  # rk4 does not keep quadratic invariants


@pytest.mark.parametrize("name", LONG)
def test_kepler_energy_bounded_or_drifting(name):
    dH = np.abs(kepler_long_run(name)["H"])
    first, last = dH[: len(dH) // 10].max(), dH[-len(dH) // 10 :].max()  # windows of 8 periods
    if HAMILTONIAN_METHODS[name]().symplectic:
        assert last < 2 * first, (first, last)  # bounded: no growth from the first to last tenth
    else:
        assert last > 5 * first, (first, last)  # secular drift, linear in t (ratio ≈ 10)


def test_tableau_validation():
    a, b, c = GAUSS4.a, GAUSS4.b, GAUSS4.c
    with pytest.raises(ValueError, match="row sums"):
        ButcherTableau("broken", a + 0.01, b, c, 4)
    with pytest.raises(ValueError, match=r"order condition Σb A c = 1/6"):
        ButcherTableau("broken", a + [[0.01, -0.01], [0.0, 0.0]], b, c, 4)  # row sums kept
    with pytest.raises(ValueError, match=r"must be \(2, 2\)"):
        ButcherTableau("broken", a[:1], b, c, 4)
    with pytest.raises(ValueError, match="B\\(6\\)"):  # Sun Geng's method is of order 5 only
        ButcherTableau("sungeng6", SUN_GENG5.a, SUN_GENG5.b, SUN_GENG5.c, 6)
    explicit = ButcherTableau("e", [[0.0]], [1.0], [0.0], 1)
    with pytest.raises(ValueError, match="not symplectic"):
        PartitionedTableau("euler-pair", explicit, explicit, 1)


def test_ensemble_equals_single_runs():
    model, state0 = build("kepler")
    ensemble = CASE["kepler"].perturb(state0, np.random.default_rng(0), 1e-2, 3)
    integrator = HAMILTONIAN_METHODS["gauss4"]()
    batched = jr.simulate(integrator, model, ensemble, 0.01, 500, save_every=500).final_state
    for i in range(3):
        member = jax.tree_util.tree_map(lambda x: x[i], ensemble)
        single = integrate(integrator, model, member, 0.01, 500)  # the order test's compile
        # vmap of the same arithmetic: equal up to a few ulps (fused operations may differ).
        np.testing.assert_allclose(batched.q[i], single.q, rtol=0, atol=1e-13)
        np.testing.assert_allclose(batched.p[i], single.p, rtol=0, atol=1e-13)


def test_parameter_sweep_equals_single_runs():
    """An ensemble over the oscillator's spring constant via `model_axes`."""
    ks = jnp.array([1.0, 4.0, 9.0])
    model, state0 = build("harmonic-oscillator")
    swept = model.__class__(model.hamiltonian, model.params._replace(m=jnp.ones(3), k=ks))
    axes = 0  # every parameter leaf has the ensemble axis 0
    integrator = HAMILTONIAN_METHODS["stormer-verlet"]()
    batched = jr.simulate(integrator, swept, state0, 0.01, 100, model_axes=axes).final_state
    for i, k in enumerate([1.0, 4.0, 9.0]):
        single_model, _ = build("harmonic-oscillator", k=k)
        single = integrate(integrator, single_model, state0, 0.01, 100)  # compiled above
        np.testing.assert_allclose(batched.q[i], single.q, rtol=0, atol=1e-13)


@pytest.mark.parametrize("name", list(CASE))
def test_case_builds_and_runs(name):
    """Each case builds, names a registered method, and runs (rk4: one cheap compile each)."""
    case = CASE[name]
    assert case.family == "hamiltonian" and case.default_method in HAMILTONIAN_METHODS
    model, state0 = build(name)
    sol = jr.simulate(HAMILTONIAN_METHODS["rk4"](), model, state0, case.default_dt / 10, 100)
    H0 = model.invariants(0.0, state0)["H"]
    H1 = model.invariants(0.0, sol.final_state)["H"]
    assert abs(float(H1 - H0)) < 1e-6 * max(1.0, abs(float(H0)))  # rk4 at Δt/10, 100 steps


# --- the solver state: Newton started from the previous step's stages ------------------------

IMPLICIT = [n for n in METHODS if HAMILTONIAN_METHODS[n]().implicit]
EXTRAPOLATED = [n for n in IMPLICIT if extrapolates(HAMILTONIAN_METHODS[n]().tableau.c)]


def test_extrapolation_is_exact_for_polynomials_through_the_nodes():
    """`E K` evaluates at `1 + c` the polynomial through `(c_j, K_j)`: exact for every
    polynomial of degree below the number of distinct nodes (to round-off of entries ≤ 12)."""
    for table in (GAUSS4, SUN_GENG5, tb.GAUSS6, tb.RADAU_IIA5, STORMER_VERLET):
        c = table.c
        E = extrapolation_matrix(c)
        for degree in range(len(np.unique(c))):
            np.testing.assert_allclose(E @ c**degree, (1 + c) ** degree, rtol=0, atol=1e-13)
    assert not extrapolates(tb.GAUSS2.c) and not extrapolates(SYMPLECTIC_EULER_A.c)


@functools.cache
def _warm_and_fresh(name, n=126):
    """Kepler, Δt = 0.05 (the case's), `n` steps (one orbit) carrying the solver state; at
    each step also the fresh step (solver state from `init`) from the same state: per step the
    iterations of both, the largest difference of the new states, and convergence."""
    model, state0 = build("kepler")
    integrator = HAMILTONIAN_METHODS[name]()
    h = 0.05

    @jax.jit
    def run(state0):
        def one(carry, k):
            state, ss = carry
            t = k * h
            new, ss1, info = integrator.step(model, state, ss, t, h)
            fresh, fresh_info = one_step(integrator, model, state, t, h)
            diff = jnp.maximum(jnp.max(jnp.abs(new.q - fresh.q)), jnp.max(jnp.abs(new.p - fresh.p)))
            out = (info.iterations, fresh_info.iterations, diff)
            return (new, ss1), (*out, info.converged, fresh_info.converged)

        ss0 = integrator.init(model, state0, 0.0, h)
        return jax.lax.scan(one, (state0, ss0), jnp.arange(n))[1]

    return tuple(np.asarray(x) for x in run(state0))


@pytest.mark.parametrize("name", IMPLICIT)
def test_warm_start_changes_no_step_beyond_round_off(name):
    """Started from the extrapolated stages or from the predictor, Newton lands on the same
    root: full Newton stops after an update below eps^¾ ≈ 2e-12, leaving an error of its
    square, so the two new states differ by round-off only (states are O(1): 1e-14). (Implicit
    Euler does not converge at some steps near the pericentre, from either start.)"""
    _, _, diff, warm_ok, fresh_ok = _warm_and_fresh(name)
    assert np.all(warm_ok >= fresh_ok) and fresh_ok.mean() > 0.9
    assert diff[fresh_ok].max() <= 1e-14, diff.max()


@pytest.mark.parametrize("name", ["gauss6", "gauss4", "radau5", "sungeng5"])
def test_warm_start_saves_newton_iterations(name):
    """The extrapolated stages start O(h^(s+1)) from the root (the predictor O(h²)): over one
    Kepler orbit at Δt = 0.05, 3 updates every step from the predictor and mostly 2 warm
    (measured: Gauss6, Radau IIA5, Sun Geng 2.22, Gauss4 2.52 against 3.00; near the pericentre
    the warm start still needs 3). The bound, a quarter of the steps saved, fails if the solver
    state is not carried (equal counts)."""
    warm, fresh, _, _, _ = _warm_and_fresh(name)
    assert warm[1:].mean() <= fresh[1:].mean() - 0.25, (warm.mean(), fresh.mean())
    assert warm[0] == fresh[0]  # the first step starts from the predictor


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_solver_state_keeps_its_structure_and_dtype(dtype):
    """The solver state is a scan carry: `step` returns what `init` made, in the state's
    dtype, for every implicit tableau method (classical, partitioned, Munthe-Kaas)."""
    model, state0 = build("kepler")
    state0 = jax.tree_util.tree_map(lambda x: x.astype(dtype), state0)
    body_case = jr.cases.get_case("krysl-fast-top")
    body, body0 = body_case.build(body_case.resolve())
    body = jax.tree_util.tree_map(lambda x: x.astype(dtype), body)
    body0 = jax.tree_util.tree_map(lambda x: x.astype(dtype), body0)
    h = jnp.asarray(0.01, dtype)
    runs = [(HAMILTONIAN_METHODS[n](), model, state0) for n in IMPLICIT]
    runs += [(jr.MKRK(tableau=t), body, body0) for t in (tb.IMPLICIT_MIDPOINT, tb.GAUSS4)]
    for integrator, m, s0 in runs:
        ss0 = jax.eval_shape(lambda s: integrator.init(m, s, h * 0, h), s0)
        ss1 = jax.eval_shape(lambda s, ss: integrator.step(m, s, ss, h * 0, h)[1], s0, ss0)
        assert ss1 == ss0, integrator.name
        assert all(x.dtype == dtype for x in jax.tree_util.tree_leaves(ss0))
        if extrapolates(integrator.tableau.c):
            assert jax.tree_util.tree_leaves(ss0), integrator.name  # it carries the stages


def test_next_guess_after_a_failed_step_is_the_mean_slope():
    K = jnp.array([[1.0, 2.0], [3.0, 5.0], [4.0, 7.0]])
    c, b = tb.GAUSS6.c, tb.GAUSS6.b
    np.testing.assert_allclose(next_slopes(K, c, b, jnp.bool_(False)), np.tile(b @ K, (3, 1)))
    np.testing.assert_allclose(next_slopes(K, c, b, jnp.bool_(True)), extrapolation_matrix(c) @ K)


@pytest.mark.parametrize("problem", ["pendulum", "kepler", "galactic-orbit"])
def test_vector_field_differentiates_h_once(problem):
    """`HamiltonianSystem.vector_field` is `(∂H/∂p, −∂H/∂q)` — bit for bit the two partial
    gradients taken apart — from one `grad` of `H`: `H` is traced once per evaluation (two
    `grad`s traced and transposed it twice, in every stage of every method)."""
    model, state = build(problem)
    traced = []

    def H(q, p, params, _original=model.hamiltonian):
        traced.append(1)
        return _original(q, p, params)

    counted = dataclasses.replace(model, hamiltonian=H)
    jax.make_jaxpr(lambda s: counted.vector_field(0.0, s))(state)
    assert len(traced) == 1
    both = jax.jit(lambda m, s: (m.vector_field(0.0, s), m.grad_p(*s), m.grad_q(*s)))
    field, H_p, H_q = both(model, state)
    np.testing.assert_array_equal(field.q, H_p)
    np.testing.assert_array_equal(field.p, -H_q)
