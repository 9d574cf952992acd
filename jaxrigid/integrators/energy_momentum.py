"""The director-based energy–momentum scheme with average-vector-field constraint Jacobians
(Gebhardt & Romero 2020, §5.1, eqs. 86–91, and its non-twisting specialisation §5.2, 92–95).

One step from `(q_n, q̇_n)` solves, for `q_{n+1}`, `λ_{n+½} ∈ R⁶` and (non-twisting) `μ_{n+½}`,

    (2/h²) M (q_{n+1} − q_n − h q̇_n) − Q_{n+½} + H_dᵀ λ + G_dᵀ μ = 0     (86)/(92), (87b)
    h(q_{n+1}) = 0,        G_d (q_{n+1} − q_n) = 0                          (92), (94)

and sets `q̇_{n+1} = (2/h)(q_{n+1} − q_n) − q̇_n` (after 87). `Q_{n+½}` is the generalised load
(68)/(84) at `t_n + h/2` and `q_{n+½} = ½(q_n + q_{n+1})`.

**The AVF quadrature.** `H_d = ½∫₋₁¹ ∂h/∂q(q(ξ)) dξ` (89) and `G_d = ½∫₋₁¹ G(q(ξ)) dξ` (93)
integrate functions that are *linear* in `q` (`h` is quadratic, `G` linear), hence affine in ξ:
the one-point Gauss rule (the midpoint) is exact, `H_d = H(q_{n+½})`, `G_d = G(q_{n+½})`, and
`H_d (q_{n+1} − q_n) = h(q_{n+1}) − h(q_n)` holds identically (90). We evaluate the integral
with two-point Gauss–Legendre anyway (exact to degree 3, so also for any cubic constraint a
caller might add), which costs nothing here and keeps (89)/(93) literal.

**How the step is solved (three unknowns, same scheme).** Because every constraint is
quadratic and `M = 𝒥 ⊗ I₃`, the system has a Kronecker structure: writing the directors as
the rows of `D`, `H_dᵀλ = S D_{n+½}` with `S` symmetric (6 entries = λ) and `G_dᵀμ` (a = 0)
adds `μ` at entry (1, 2). The step is parametrised as `dᵢ,ₙ₊₁ = cay(ĉ) dᵢ,ₙ` (so the six
`h(q_{n+1}) = 0` hold to round-off), the multipliers are eliminated as
`P = −r D_{n+½}⁻¹`, `r = 𝒥(ΔD − hV_n) − (h²/2)F_{n+½}`, and Newton (library `Newton`,
autodiff Jacobian, 3×3 cofactor solves) solves for `c`: `P` symmetric (standard body), or
`P₁₃ = P₃₁`, `P₂₃ = P₃₂` and `G_d Δq = 0` (non-twisting). `multipliers` recovers
`(Δq, h²λ/2, h²μ/2)` and `residual` is the full 15/16-unknown system (86)/(92) with `H_d`,
`G_d` by AVF: the tests check it vanishes at every step taken. (Newton on the full system
compiled several times longer than this reduced form: bench/README.md, "Measurements behind
the source's design choices".) The stopping rule
`max|δc| ≤ eps^¾ (1 + max|c|)` (≈ 1.8e-12, tighter than the paper's 1e-10) leaves an error of
order its square (full Newton). The guess is `c = h ω_n`, `ω_n = ½ Σ dᵢ × ḋᵢ` (twist removed
for the non-twisting body); 1–3 iterations in §6's cases.

**What is conserved (measured in tests/test_energy_momentum.py, test_nontwisting.py).**
Standard body: `K` and `π` to round-off (Theorem 5.1). Non-twisting body: `K` to round-off
(the proof of Theorem 5.2 is exact for `K`). `Π¹, Π²`: the proof (103) is only O(h²) per step;
measured, they are constant to round-off in Case 1 (a steady rotation) and, after the load of
Cases 2–3, free of drift but fluctuating by ~1e-8 relative at h = 0.005. `Π³ = d3 · π` at the
nodes is not zero (≈ 3.5e-8 relative after the load, 1e-4 during it): the twist constraint
holds at the midpoint (94) — `Π³` of `(q_{n+½}, Δq/h)` is zero to round-off — and the nodal
velocities `q̇_{n+1} = 2Δq/h − q̇_n` oscillate about the midpoint ones, step to step.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .. import _linalg
from ..models.director import (
    DirectorRigidBody,
    DirectorState,
    angular_velocity,
    constraint_jacobian,
    constraints,
    directors,
    mass_matrix,
    nontwisting_matrix,
)
from ..models.structures import AbstractDirectorBody
from ..newton import Newton
from .base import AbstractImplicitIntegrator
from .dmv import cayley_minus_identity

# two-point Gauss–Legendre on [−1, 1] (weights 1, halved by the ½ of (89))
_GAUSS2 = (-1.0 / np.sqrt(3.0), 1.0 / np.sqrt(3.0))


def average_vector_field(jac, q0, q1):
    """`½∫₋₁¹ jac(q(ξ)) dξ`, `q(ξ) = ½(1 − ξ)q0 + ½(1 + ξ)q1` (89), (93), by two-point
    Gauss–Legendre: exact for Jacobians of degree ≤ 3 in `q` (here they are linear)."""
    return sum(0.5 * jac(0.5 * (1.0 - x) * q0 + 0.5 * (1.0 + x) * q1) for x in _GAUSS2)


def discrete_constraint_jacobian(q0, q1):
    """`H_d(q_n, q_{n+1}) (6, 9)` (89)."""
    return average_vector_field(constraint_jacobian, q0, q1)


def discrete_nontwisting_matrix(q0, q1):
    """`G_d(q_n, q_{n+1}) (1, 9)` (93)."""
    return average_vector_field(nontwisting_matrix, q0, q1)


def residual(model: DirectorRigidBody, state: DirectorState, t, dt, x):
    """The full step equations (86)/(92), times `h²/2`, with `x = (Δq, h²λ/2[, h²μ/2])`
    (16 unknowns for the non-twisting body): used to verify the reduced solve below."""
    q0, v0 = state
    dq = x[:9]
    q1 = q0 + dq
    M = mass_matrix(model.euler_inertia)
    H = discrete_constraint_jacobian(q0, q1)
    load = model.generalized_forces(t + 0.5 * dt, q0 + 0.5 * dq)
    r_q = M @ (dq - dt * v0) + H.T @ x[9:15] - (0.5 * dt * dt) * load
    parts = [r_q, constraints(q1)]
    if model.nontwisting:
        G = discrete_nontwisting_matrix(q0, q1)
        parts[0] = r_q + G[0] * x[15]
        parts.append(G @ dq)
    return jnp.concatenate(parts)


def increment(state: DirectorState, c):
    """`Δq = q_{n+1} − q_n` for `dᵢ,ₙ₊₁ = cay(ĉ) dᵢ,ₙ` (rows: `ΔD = D_n (cay(−ĉ) − 1)`).

    Here and in `_balance` the products are the component algebra's (`_linalg`): Newton's
    Jacobian evaluates the residual batched over its basis, where `@` is a `dot_general`
    XLA:CPU does not fuse (an ensemble ran 1.37× as long; design note 49)."""
    D = state.q.reshape(3, 3)
    return _linalg.matmul(D, cayley_minus_identity(-c)).reshape(9)


def _balance(model, state, t, dt, dq):
    """`P = −r D_{n+½}⁻¹ (3, 3)`, `r = 𝒥(ΔD − hV_n) − (h²/2)F_{n+½}`: the multiplier matrix
    with `H_dᵀλ + G_dᵀμ = P D_{n+½}` (rows: directors)."""
    q0, v0 = state
    E = model.euler_inertia
    D_half = (q0 + 0.5 * dq).reshape(3, 3)
    load = model.generalized_forces(t + 0.5 * dt, q0 + 0.5 * dq).reshape(3, 3)
    r = _linalg.matmul(E, (dq - dt * v0).reshape(3, 3)) - (0.5 * dt * dt) * load
    return -_linalg.matmul(r, _linalg.inv3(D_half))


def reduced_residual(model, state, t, dt, c):
    """Three equations in the Cayley vector `c` of the step, equivalent to (86)/(92).

    With `q_{n+1}` from `increment` the six `h(q_{n+1}) = 0` hold identically. For quadratic
    `h` the AVF Jacobian is `H_d = H(q_{n+½})` and `H_dᵀλ` is `S D_{n+½}` with `S` symmetric
    (rows: directors); `G_dᵀμ` (a = 0) adds `μ` at (1, 2). So (86) has multipliers iff
    `P = −r D_{n+½}⁻¹` (`_balance`) is symmetric — three equations; for (92) only `P₁₃ = P₃₁`,
    `P₂₃ = P₃₂` remain, and `G_d Δq = 0` (94) is the third.
    """
    dq = increment(state, c)
    P = _balance(model, state, t, dt, dq)
    skew = jnp.stack([P[1, 2] - P[2, 1], P[0, 2] - P[2, 0], P[0, 1] - P[1, 0]])
    if model.nontwisting:
        q1 = state.q + dq
        g = _linalg.matvec(discrete_nontwisting_matrix(state.q, q1), dq)
        return jnp.concatenate([skew[:2], g])
    return skew


def multipliers(model, state, t, dt, dq):
    """`x = (Δq, h²λ/2[, h²μ/2])` of the full system (`residual`) from a step's `Δq`."""
    P = _balance(model, state, t, dt, dq)
    lam = jnp.stack([P[0, 0], P[1, 1], P[2, 2], P[1, 2], P[0, 2], P[1, 0]])
    parts = [dq, lam]
    if model.nontwisting:
        parts.append((P[0, 1] - P[1, 0])[None])
    return jnp.concatenate(parts)


def velocity(dq, v0, dt):
    """`q̇ₙ₊₁ = (2/h)(qₙ₊₁ − qₙ) − q̇ₙ` (after (87b)), each quotient rounded once.

    A product with a rounded `2/h` (40.0 for h = 0.05, where `2/fl(0.05)` is 2.2e-15 less)
    scales every step's velocity alike, and `K` rose by about eps per step (design note 51).
    XLA turns a division by a broadcast scalar into that product (`x / h` is `x * (1/h)`):
    the divisor `h + 0·Δq` has `Δq`'s own shape, and XLA keeps `0·x` for floats (it is NaN
    for an infinite `x`), so the division stays a division, also under `vmap` and with `h`
    a constant."""
    return (2.0 * dq) / (dt + 0.0 * dq) - v0


def _guess(model, state, dt):
    """`c = h ω_n` (`ω_n = ½ Σ dᵢ × ḋᵢ`, its twist removed for the non-twisting body)."""
    omega = angular_velocity(state)
    if model.nontwisting:
        d3 = directors(state.q)[2]
        omega = omega - jnp.dot(omega, d3) * d3
    return dt * omega


class EnergyMomentumAVF(AbstractImplicitIntegrator):
    """The energy–momentum scheme for directors with AVF constraint Jacobians: §5.1 (86–91)
    for the standard body, §5.2 (92–95, with `G_d`) when `model.nontwisting`. Second order,
    symmetric; keeps `K` and (standard body) `π` to round-off without load."""

    name: ClassVar[str] = "EM-AVF"
    structures = (AbstractDirectorBody,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({"K", "pi"})
    reference: ClassVar[str] = "Gebhardt & Romero (2020), §5, eqs. (86)–(95)"
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, solver_state, t, dt):
        c, info = self.newton.solve(
            lambda c: reduced_residual(model, state, t, dt, c), _guess(model, state, dt)
        )
        dq = increment(state, c)
        return DirectorState(state.q + dq, velocity(dq, state.v, dt)), solver_state, info


ENERGY_MOMENTUM_METHODS = {EnergyMomentumAVF.name: EnergyMomentumAVF}
