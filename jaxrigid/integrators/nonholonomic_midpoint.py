"""A midpoint discrete Lagrange–d'Alembert (DLA) integrator for any Lagrange–d'Alembert system
(`models.structures.AbstractLagrangeDAlembert`): the engine's own
(`jaxrigid.models.nonholonomic.LagrangeDAlembertSystem`) and the unreduced rolling ball
(`RollingBallUnreduced`: fixed, prescribed or dynamic masses).

**Construction** (Cortés & Martínez, Nonlinearity 14 (2001) 1365–1392; McLachlan & Perlmutter,
J. Nonlinear Sci. 16 (2006) 283–328): the generalisation of `nonholonomic_lie.NonholonomicDLA`
from the ball on `SO(3) × ℝ²` to flat coordinates `q ∈ ℝⁿ`. The continuous equations are the
engine's,

    d/dt ∂L/∂q̇ − ∂L/∂q = Q + Aᵀλ,      A(q, t) q̇ + a(q, t) = 0.                          (1)

With `q½ = (q₀ + q₁)/2`, `t½ = t₀ + h/2` and the discrete velocity `v = (q₁ − q₀)/h`:

    L_d(q₀, q₁) = h L(q½, v, t½),     F∓ = (h/2) Q(q½, v, t½),                              (2)
    D_d:  A(q½, t½) v + a(q½, t½) = 0.                                                     (3)

(3) is the continuous constraint at the midpoint. For the quaternion row `q·q̇ = 0` of a unit
quaternion it is `q½·(q₁ − q₀) = (|q₁|² − |q₀|²)/2 = 0`: `|q|` is kept exactly (to the Newton
tolerance and round-off), with no projection; for the ball's rolling rows it is the midpoint
rolling constraint. The DLA equations at node `k` (variations in the continuous distribution
`ker A(q_k, t_k)`, the discrete constraint held exactly),

    D₂L_d(q_{k−1}, q_k) + F⁺_{k−1} + D₁L_d(q_k, q_{k+1}) + F⁻_k ∈ range A(q_k, t_k)ᵀ,    (4)

are written as a one-step map of `(q, q̇)` with the node momentum `p_k = D₂L_d(q_{k−1}, q_k) +
F⁺_{k−1}`, which (4) determines only modulo `range Aᵀ` — exactly what the continuous Legendre
map restricted to the constraint sees. One step from `(q₀, q̇₀)` at `t₀`:

    p₀ = ∂L/∂q̇(q₀, q̇₀, t₀),
    p₀ + D₁L_d(q₀, q₁) + F⁻ + A(q₀, t₀)ᵀν = 0,   and (3)     (n + m equations for v, ν),  (5)
    q₁ = q₀ + h v,   p₁ = D₂L_d(q₀, q₁) + F⁺,
    [ M₁  −A₁ᵀ ] [ q̇₁ ]   [ p₁ − ∂L/∂q̇(q₁, 0, t₁) ]
    [ A₁    0  ] [ μ  ] = [ −a(q₁, t₁)            ],   M₁ = ∂²L/∂q̇², A₁, a₁ at (q₁, t₁).   (6)

Any part of `p₀` in `range A(q₀)ᵀ` is absorbed by `ν`, so (5)–(6) satisfy (4) exactly along a
trajectory. `ν ≈ (h/2) λ` is the constraint impulse over the first half step (`λ` signed as
the engine's: `Aᵀλ` is the constraint force). (6) is the engine's saddle matrix: `M` may be
singular on its own (quaternion coordinates: `q̇ ∥ q` has no kinetic energy) while the saddle
matrix is not. It inverts the Legendre map `∂L/∂q̇ = M q̇ + ∂L/∂q̇(q, 0, t)` restricted to the
constraint, which is exact when `L` is **quadratic in `q̇`** — the engine's mechanical case
(kinetic energy of positions `y(q, t)`, a potential, gyroscopic terms linear in `q̇`); a
Lagrangian of another form needs a Newton solve there, which this method does not do. `q̇₁`
satisfies the continuous constraint at `(q₁, t₁)` exactly (to round-off).

`D₁L_d` and `D₂L_d` are the gradients of `L_d` by the chain rule through `q½` and `v`:

    D₁L_d = (h/2) ∂L/∂q − ∂L/∂q̇,   D₂L_d = (h/2) ∂L/∂q + ∂L/∂q̇,   both at (q½, v, t½),     (7)

from one `jax.grad` of `L` (checked against `jax.grad` of (2) in
`tests/test_nonholonomic_midpoint.py`). Written in `v` they avoid the cancellation of
`(q₁ − q₀)/h` when `q` is large, and (5) is then `p₀ − ∂L/∂q̇ + (h/2)(∂L/∂q + Q) + A₀ᵀν = 0`,
whose Jacobian in `(v, ν)` is the saddle matrix `[[−M, A₀ᵀ], [A, 0]] + O(h)`: well scaled at
every step size.

**Properties** (class facts, tested). Symmetric: `L_d`, `F∓` and (3) are symmetric under
`h → −h`, `q₀ ↔ q₁`, so `Φ_{−h} ∘ Φ_h = id`; order 2 (measured). Kept to round-off: the
discrete constraint (3), the continuous constraint of `q̇` at each node (the invariant
`constraint_residual`), `|q| = 1` for a unit quaternion with its row (`quaternion_norm_error`),
and for the ball `x₃ = r` (`height_error`: the rolling row `ẋ₃ = 0`). Energy is not conserved
exactly; its long-time behaviour is measured in the tests (see the docstring of
`tests/test_nonholonomic_midpoint.py`).

**Newton.** Unknowns `(v, ν)` as one flat vector, from the root at `h = 0`, `(q̇₀, 0)`,
solved on the branch continuous in `h` (`solve_on_branch` without a predictor: Newton's first
iterate, `(q̇₀ + (h/2) q̈₀, (h/2) λ₀) + O(h²)`, is one; the start's accelerations and
multipliers, a third of the step's program, are not formed: design note 57); gradients pass
the solve by the implicit function theorem (the start is cut from them). A non-finite velocity
from (6) (a singular saddle matrix at `q₁`) is reported as `nonfinite`.

**The model's state** is mapped to the engine's `(Q, Q̇)` by `model.coordinates` and back by
`model.from_coordinates`, which inverts it exactly on the constraint (the structure's
contract); the engine is `model.lagrange_dalembert_system()`. For the engine's own system both
maps are the identity; for the unreduced ball, `(q, Ω, x[, θ, θ̇])` ↔ `(Q, Q̇)` with
`Ω = 2 Im(q* q̇)/|q|²`.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from .. import results
from ..models.nonholonomic import LagrangeDAlembertSystem, as_time
from ..models.structures import AbstractLagrangeDAlembert
from ..newton import Newton
from ..results import RESULTS
from .base import AbstractImplicitIntegrator, solve_on_branch

__all__ = [
    "MidpointDLA",
    "discrete_constraint_residual",
    "midpoint_dla_step",
]


def _midpoint_gradients(system: LagrangeDAlembertSystem, q0, v, t_half, h):
    """`(q½, ∂L/∂q + Q, ∂L/∂q̇)` at `(q½ = q₀ + (h/2) v, v, t½)`: the pieces of (7)."""
    q_half = q0 + 0.5 * h * v
    dL_dq, dL_dv = jax.grad(system.lagrangian, argnums=(0, 1))(q_half, v, t_half, system.params)
    force = system.generalised_force(t_half, q_half, v)
    return q_half, dL_dq + force, dL_dv


def discrete_constraint_residual(system: LagrangeDAlembertSystem, t0, q0, q1, h):
    """(3): `A(q½, t½)(q₁ − q₀)/h + a(q½, t½)`, `(m,)` (zero to round-off along
    `MidpointDLA` trajectories)."""
    t_half = as_time(t0, q0) + 0.5 * h
    return system.constraint_residual(t_half, 0.5 * (q0 + q1), (q1 - q0) / h)


def midpoint_dla_step(system: LagrangeDAlembertSystem, newton: Newton, q0, qdot0, t0, h):
    """One step (5)–(6) of the midpoint DLA method from `(q₀ (n,), q̇₀ (n,))` at `t₀` with step
    `h`: `(q₁, q̇₁, StepInfo)`."""
    t0 = as_time(t0, q0)
    t_half, t1 = t0 + 0.5 * h, t0 + h
    n = q0.shape[-1]
    p0 = system.momentum(t0, q0, qdot0)
    A0, _ = system.constraint_matrix(t0, q0)

    def residual(z):  # (5), with (7)
        v, nu = z[:n], z[n:]
        q_half, f, p_half = _midpoint_gradients(system, q0, v, t_half, h)
        momentum = p0 - p_half + 0.5 * h * f + A0.T @ nu
        return jnp.concatenate([momentum, system.constraint_residual(t_half, q_half, v)])

    # Newton from the Δt → 0 root (q̇₀, 0): its first iterate is the branch check's
    # predictor, in place of (q̇₀ + (h/2) q̈₀, (h/2) λ₀), whose accelerations cost a third of
    # the step's program (design note 57)
    start = lax.stop_gradient(jnp.concatenate([qdot0, jnp.zeros(A0.shape[:1], qdot0.dtype)]))
    z, info = solve_on_branch(newton, residual, None, start)
    v = z[:n]

    q1 = q0 + h * v
    _, f, p_half = _midpoint_gradients(system, q0, v, t_half, h)
    p1 = p_half + 0.5 * h * f  # D₂L_d + F⁺
    # (6): the constrained inverse Legendre map at (q₁, t₁) (L quadratic in q̇)
    qdot1 = system.velocity_from_momentum(t1, q1, p1)
    finite = jnp.all(jnp.isfinite(qdot1))
    info = info._replace(result=results.where(~finite, RESULTS.nonfinite, info.result))
    return q1, qdot1, info


class MidpointDLA(AbstractImplicitIntegrator):
    """The midpoint discrete Lagrange–d'Alembert method (5)–(6) (the module's docstring) for a
    Lagrange–d'Alembert system (`L` quadratic in `q̇`: a `LagrangeDAlembertSystem`, a
    `RollingBallUnreduced`): implicit (one `(n + m)`-unknown Newton solve and one saddle
    solve per step), symmetric, order 2; keeps the discrete constraint (3), the velocity
    constraint at each node, `|q| = 1` of a quaternion with its row `q·q̇ = 0`, and the ball's
    `x₃ = r`, to round-off."""

    name: ClassVar[str] = "DLA-midpoint"
    # its programs are large (the Lagrangian differentiated to second order): XLA's older
    # fusion emitter compiles a first call in 4.0-4.3 s against 5.1-6.2 s, and the run is
    # as fast (bench/README, compile_cost section of 2026-12-01)
    build_profile: ClassVar[str | None] = "repeated"
    structures = (AbstractLagrangeDAlembert,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset(
        {"constraint_residual", "quaternion_norm_error", "height_error"}
    )
    reference: ClassVar[str] = (
        "Cortés & Martínez (2001); McLachlan & Perlmutter (2006), midpoint discrete "
        "Lagrange–d'Alembert"
    )
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, solver_state, t, dt):
        Q0, Qdot0 = model.coordinates(state)
        system = model.lagrange_dalembert_system()
        Q1, Qdot1, info = midpoint_dla_step(system, self.newton, Q0, Qdot0, t, dt)
        return model.from_coordinates(Q1, Qdot1), solver_state, info


NONHOLONOMIC_MIDPOINT_CLASSES = (MidpointDLA,)
"""This module's integrators, for the registry."""
