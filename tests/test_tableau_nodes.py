"""Tableaux carry their own nodes: Lobatto IIIB's are `c = (0, 1)` (GNI Table II.2.2), not its
row sums `(½, ½)`; stage `i` is evaluated at `t + c_i h` with the tableau's (for a partitioned
pair: the common) nodes, in `runge_kutta`'s stages (classical RK, Munthe-Kaas RK) and in
`PartitionedRungeKutta` for a time-dependent Hamiltonian.

`HamiltonianSystem` is autonomous (`H(q, p, params)`, no time), so the time-dependent
Hamiltonian here is a small model of this file with the `time_dependent` class fact of
`jaxrigid.integrators.partitioned` (`grad_q(q, p, t)`, `grad_p(q, p, t)`).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import one_step
from scipy.integrate import solve_ivp

from jaxrigid.diagnostics import measured_order
from jaxrigid.integrators.classical import RungeKutta
from jaxrigid.integrators.partitioned import (
    STORMER_VERLET,
    PartitionedRungeKutta,
    PartitionedTableau,
)
from jaxrigid.integrators.tableau import ButcherTableau
from jaxrigid.linear_solvers import Auto
from jaxrigid.models.hamiltonian import CanonicalState, HamiltonianSystem
from jaxrigid.models.structures import AbstractCanonicalSystem

IIIA, IIIB = STORMER_VERLET.q, STORMER_VERLET.p
OMEGA = 2.0


def run(integrator, model, state0, t0, dt, n_steps):
    """Final state after `n_steps` steps from `t0`, and whether every Newton solve converged."""

    @jax.jit
    def go(state0, t0, dt):
        def body(carry, k):
            state, info = one_step(integrator, model, carry, t0 + k * dt, dt)
            return state, info.converged

        return jax.lax.scan(body, state0, jnp.arange(n_steps))

    final, converged = go(state0, jnp.asarray(t0), jnp.asarray(dt))
    return final, bool(jnp.all(converged))


# --- the tables -------------------------------------------------------------------------------


def test_lobatto_IIIB_has_the_lobatto_nodes():
    np.testing.assert_array_equal(IIIB.c, [0.0, 1.0])
    np.testing.assert_array_equal(IIIB.row_sums, [0.5, 0.5])
    assert not IIIB.nodes_are_row_sums
    np.testing.assert_array_equal(IIIA.c, [0.0, 1.0])  # IIIA's nodes are its row sums
    assert IIIA.nodes_are_row_sums
    np.testing.assert_array_equal(STORMER_VERLET.c, [0.0, 1.0])  # the common nodes
    assert STORMER_VERLET.is_symplectic() and STORMER_VERLET.order == 2


def test_declared_nodes_are_checked():
    a, b = IIIB.a, IIIB.b
    # nodes that are not the row sums, without the flag: refused as before
    with pytest.raises(ValueError, match="row sums of A must equal c"):
        ButcherTableau("lobatto-IIIB", a, b, [0.0, 1.0], 2)
    # with the flag, the nodes must still give the order: Σ b c = 1/2 fails for c = (0.2, 1)
    with pytest.raises(ValueError, match=r"order condition Φ\(\[τ\]\) = 1/2 fails"):
        ButcherTableau("lobatto-IIIB", a, b, [0.2, 1.0], 2, nodes_are_row_sums=False)
    # order 3 is not Lobatto IIIB's
    with pytest.raises(ValueError, match="order condition"):
        ButcherTableau("lobatto-IIIB", a, b, [0.0, 1.0], 3, nodes_are_row_sums=False)
    # a 3-stage Lobatto IIIB (order 4) with its nodes (0, ½, 1) passes every non-autonomous tree
    ButcherTableau(
        "lobatto-IIIB3",
        [[1 / 6, -1 / 6, 0], [1 / 6, 1 / 3, 0], [1 / 6, 5 / 6, 0]],
        [1 / 6, 2 / 3, 1 / 6],
        [0.0, 0.5, 1.0],
        4,
        nodes_are_row_sums=False,
    )


def test_pair_needs_common_nodes_and_its_coupling_conditions():
    own_half = ButcherTableau("IIIB-half", IIIB.a, IIIB.b, [0.5, 0.5], 2, nodes_are_row_sums=False)
    with pytest.raises(ValueError, match="needs common nodes"):
        PartitionedTableau("mixed", IIIA, own_half, 2)
    # each table of order 2, the pair not: Σ b̂ (Σ_j a_ij) = Σ b̂ c = 1/3 for Ralston's q table
    ralston = ButcherTableau("ralston", [[0, 0], [2 / 3, 0]], [1 / 4, 3 / 4], [0, 2 / 3], 2)
    half = ButcherTableau("half", [[0.5, 0], [0.5, 0]], [0.5, 0.5], [0.5, 0.5], 2)
    with pytest.raises(ValueError, match=r"order condition Φ\(p\[q•\]\) = 1/2 fails"):
        PartitionedTableau("broken", ralston, half, 2, symplectic=False)


# --- stage times where they are used ----------------------------------------------------------


class Clock(eqx.Module):
    """`y' = t²`: a step of an RK method is the quadrature `h Σ b_i (t + c_i h)²`. Besides its
    field it declares what a Runge–Kutta step reads of a model, as a canonical system does:
    one flat vector, no body axis, Newton's default solver."""

    coupling_reach = None
    stage_linear_solver = Auto()
    state_layout = AbstractCanonicalSystem.state_layout

    def vector_field(self, t, state):
        return (t**2) * jnp.ones_like(state)


def test_rk_step_uses_the_tableaus_own_nodes():
    """Lobatto IIIB alone, on `y' = t²`: trapezoidal quadrature at the nodes (0, 1), not the
    midpoint rule of its row sums."""
    t0, h = 0.7, 0.1
    y1, info = one_step(RungeKutta(tableau=IIIB), Clock(), jnp.zeros(1), t0, h)
    assert bool(info.converged)
    trapezoid = h / 2 * (t0**2 + (t0 + h) ** 2)
    midpoint = h * (t0 + h / 2) ** 2
    assert abs(float(y1[0]) - trapezoid) < 1e-16
    assert abs(trapezoid - midpoint) == pytest.approx(h**3 / 4)  # 2.5e-4: distinguishable


class ForcedOscillator(eqx.Module):
    """`H(q, p, t) = p²/2 + k q²/2 − q·f(t)`: a harmonic oscillator with a time-dependent
    force (`k = 1`, `f(t) = sin(ωt)` by default)."""

    stiffness: float = 1.0
    force: object = eqx.field(static=True, default=lambda t: jnp.sin(OMEGA * t))
    time_dependent = True  # the class fact of jaxrigid.integrators.partitioned

    def grad_q(self, q, p, t):
        return self.stiffness * q - self.force(t)

    def grad_p(self, q, p, t):
        return p


def test_partitioned_stage_times_are_the_common_nodes():
    """On `q̇ = p`, `ṗ = f(t) = t²` (`k = 0`) from rest, Störmer–Verlet gives
    `p₁ = h/2 (f(t₀) + f(t₀ + h))`, `q₁ = h²/2 f(t₀)`: stages at the common nodes (0, 1). The
    row sums (½, ½) of IIIB would give the midpoint rule `p₁ = h f(t₀ + h/2)`, `h³/4` away."""
    t0, h = 0.7, 0.1
    model = ForcedOscillator(stiffness=0.0, force=lambda t: t**2)
    state0 = CanonicalState(jnp.zeros(1), jnp.zeros(1))
    s1, info = one_step(PartitionedRungeKutta(), model, state0, t0, h)
    assert bool(info.converged)
    trapezoid = h / 2 * (t0**2 + (t0 + h) ** 2)
    midpoint = h * (t0 + h / 2) ** 2
    assert abs(float(s1.p[0]) - trapezoid) < 1e-16
    assert abs(float(s1.q[0]) - h**2 / 2 * t0**2) < 1e-17
    assert abs(trapezoid - midpoint) == pytest.approx(h**3 / 4)  # 2.5e-4: distinguishable


def forced_reference(q0, p0, t0, t_end):
    """`q̇ = p`, `ṗ = −q + sin(ωt)` by scipy's DOP853 at rtol 1e-12."""
    sol = solve_ivp(
        lambda t, y: [y[1], -y[0] + np.sin(OMEGA * t)],
        (t0, t_end),
        [q0, p0],
        method="DOP853",
        rtol=1e-12,
        atol=1e-14,
    )
    return sol.y[:, -1]


def test_lobatto_pair_order_two_on_a_time_dependent_hamiltonian():
    """Störmer–Verlet (Lobatto IIIA–IIIB) on the forced oscillator from t0 = 0.3 to 6.3, four
    halvings of Δt = 0.1: errors 3e-3 … 5e-5, ≥ 10⁶ times the reference's (rtol 1e-12);
    measured slope 2.000. (Stages at the row sums (½, ½) of IIIB would reach order 2 as well,
    slope 2.000 with errors 3% smaller: both are consistent choices at order 2, so the order
    alone cannot tell the nodes; the two stage-time tests above and below do.)"""
    t0, t_end = 0.3, 6.3
    state0 = CanonicalState(jnp.array([1.0]), jnp.array([0.0]))
    ref = forced_reference(1.0, 0.0, t0, t_end)
    integrator, model = PartitionedRungeKutta(), ForcedOscillator()
    dts, errors = [], []
    for n in (60, 120, 240, 480):
        dt = (t_end - t0) / n
        final, converged = run(integrator, model, state0, t0, dt, n)
        assert converged
        dts.append(dt)
        errors.append(max(abs(float(final.q[0]) - ref[0]), abs(float(final.p[0]) - ref[1])))
    assert min(errors) > 1e4 * 1e-12 * np.max(np.abs(ref))
    assert abs(measured_order(dts, errors) - 2.0) < 0.1, errors


def extended_hamiltonian(qe, pe, params=None):
    """`H̃ = H(q, p, τ) + e` on the extended phase space `q̃ = (q, τ)`, `p̃ = (p, e)`."""
    del params
    q, tau, p, e = qe[0], qe[1], pe[0], pe[1]
    return p**2 / 2 + q**2 / 2 - q * jnp.sin(OMEGA * tau) + e


def test_common_nodes_are_the_extended_phase_space_method():
    """With the time as a position of the extended phase space, the (autonomous) pair advances
    it by Lobatto IIIA: its stages are `τ₀ + h Σ_j a_ij = τ₀ + (0, h)`. The time-dependent run
    with the common nodes (0, 1) is that symplectic method, to round-off (100 steps)."""
    t0, dt, n = 0.3, 0.05, 100
    integrator = PartitionedRungeKutta()
    direct, ok1 = run(
        integrator,
        ForcedOscillator(),
        CanonicalState(jnp.array([1.0]), jnp.array([0.0])),
        t0,
        dt,
        n,
    )
    extended, ok2 = run(
        integrator,
        HamiltonianSystem(extended_hamiltonian),
        CanonicalState(jnp.array([1.0, t0]), jnp.array([0.0, 0.0])),
        0.0,
        dt,
        n,
    )
    assert ok1 and ok2
    assert abs(float(extended.q[1]) - (t0 + n * dt)) < 1e-12
    np.testing.assert_allclose(float(direct.q[0]), float(extended.q[0]), rtol=0, atol=1e-13)
    np.testing.assert_allclose(float(direct.p[0]), float(extended.p[0]), rtol=0, atol=1e-13)
