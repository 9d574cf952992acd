"""A discrete Lagrange–d'Alembert (DLA) integrator on SO(3) × ℝ² for the rolling ball
(`jaxrigid.models.rolling_ball.RollingBall`, masses on prescribed or fixed rail positions).

**Construction.** The DLA principle of Cortés & Martínez (Nonlinearity 14 (2001) 1365–1392)
in the form McLachlan & Perlmutter analyse (J. Nonlinear Sci. 16 (2006) 283–328): a discrete
Lagrangian `L_d` on `Q × Q`, a discrete constraint manifold `D_d ⊂ Q × Q`, and

    D₂L_d(g_{k−1}, g_k) + D₁L_d(g_k, g_{k+1}) ∈ D°(g_k),    (g_k, g_{k+1}) ∈ D_d,        (1)

variations in the continuous constraint distribution `D` and the discrete constraint held
exactly. We take it, rather than a nonholonomic RATTLE or the discrete LL systems of Fedorov
& Zenkov (Nonlinearity 18 (2005); a left-invariant Lagrangian and left-invariant constraints
on the group, which the rolling ball with gravity and an offset centre of mass is not), because
with a symmetric `L_d` and a symmetric `D_d` it is symmetric and, for a time-reversible
system, reversible — the property McLachlan & Perlmutter and Modin & Verdier ("What makes
nonholonomic integrators work?", Numer. Math. 145 (2020) 405–435) identify behind the good
long-time energy behaviour of such methods — and because on a Lie group with the exponential
as the interpolating curve the discrete rolling constraint below is the exact integral of the
continuous one. (Equation numbers here are this module's: the papers' texts were not at hand;
the derivation is self-contained and `tests/test_nonholonomic_integrator.py` checks (1) with an
independent autodiff `L_d`.)

**The system** (the model note, `docs/rolling-ball-model.md`). `Q = SO(3) × ℝ²`, `g = (Λ, x)`
with `x₃ = r`; with `u = ẋ` (spatial) and `Ω` (body), mass `i = 0..n` has body velocity
`Vᵢ = Λᵀu + Ω × χᵢ + χ̇ᵢ` and

    L(Λ, Ω, u, t) = ½ Ω·𝕀Ω + Σᵢ ½ mᵢ|Vᵢ|² − g Σᵢ mᵢ Γ·χᵢ + F·x,    Γ = Λᵀe₃,                (2)

(`F` the model's external force at the centre). Rolling, `u = r ΛΩ × e₃`, gives the
distribution `D(g) = {(ΛΣ̂, r ΛΣ × e₃) : Σ ∈ ℝ³}`, so a covector is known on `D` by its
pairing with `Σ` (a body vector). The continuous Legendre map restricted to `D` is the angular
momentum about the contact point,

    ⟨∂L/∂(Ω, u), (Σ, rΛΣ × e₃)⟩ = K·Σ,   K(Γ, Ω, t) = 𝕀Ω + Σᵢ mᵢ sᵢ × (Ω × sᵢ + χ̇ᵢ),       (3)

`sᵢ = rΓ + χᵢ`: symmetric positive definite in `Ω` (`𝕀 − Σ mᵢŝᵢ²`), so it identifies a
constrained velocity with a covector on `D`.

**Discretisation.** With `ξ = log(Λ₀ᵀΛ₁)` and the step `h`,

    D_d:  x₁ − x₀ = r (Λ₀ξ) × e₃  (= r (Λ₁ξ) × e₃),                                     (4)
    L_d(g₀, g₁) = (h/2) [L(Λ₀, ξ/h, Δx/h, t₀) + L(Λ₁, ξ/h, Δx/h, t₁)],   Δx = x₁ − x₀.       (5)

(4) is the rolling constraint integrated exactly along `Λ(τ) = Λ₀ exp(τξ̂/h)`, whose spatial
angular velocity `Λ₀ξ/h` is constant. Both are symmetric: `L_d` with `h → −h`, `g₀ ↔ g₁`
changes sign, and (4) is unchanged. The pairings with `D` of `D₁L_d` and `D₂L_d` follow from
`δξ = −dexp⁻¹_ξ Σ` (varying `Λ₀ → Λ₀e^{εΣ̂}`) and `δξ = dexp⁻¹_{−ξ} Σ` (varying `Λ₁`),
`so3.dexpinv` being the inverse of the right-trivialised `dexp`, and `δ(Λᵀu) = Λᵀu × Σ`,
`δΓ = Γ × Σ`, `δx = r ΛΣ × e₃`. At node `j` (`t_j`, `Γ_j`, `χᵢⱼ`, `χ̇ᵢⱼ`) with `w = ξ/h` and
`Uⱼ = r w × Γⱼ` (`= Λⱼᵀ Δx/h` on `D_d`):

    Vᵢⱼ = Uⱼ + w × χᵢⱼ + χ̇ᵢⱼ,   Bⱼ = Σᵢ mᵢVᵢⱼ,   Mⱼ = 𝕀w + Σᵢ mᵢ χᵢⱼ × Vᵢⱼ,
    Nⱼ = Bⱼ × Uⱼ − g Σᵢ mᵢ χᵢⱼ × Γⱼ + r Γⱼ × ΛⱼᵀF,                                          (6)

(`Bⱼ` the body linear momentum, `Mⱼ = ∂L/∂Ω`, `Nⱼ·Σ` the derivative of `L` along `Λⱼ → ΛⱼΣ̂`
and `x → x + rΛⱼΣ × e₃`), and

    −D₁L_d|_D = −(h/2) N₀ + ½ dexp⁻¹_{−ξ}(M₀ + M₁) + (r/2) Γ₀ × (B₀ + e^{ξ̂} B₁),          (7)
     D₂L_d|_D =  (h/2) N₁ + ½ dexp⁻¹_{ξ}(M₀ + M₁) + (r/2) Γ₁ × (e^{−ξ̂} B₀ + B₁).          (8)

Writing the DLA map with the node velocities `Ω_k` defined by (3) — `K(Ω_k)` pairs on `D` with
both `D₂L_d(g_{k−1}, g_k)` and `−D₁L_d(g_k, g_{k+1})`, which (1) says agree there — gives the
one-step method `(q₀, Ω₀, x₀) ↦ (q₁, Ω₁, x₁)`:

    K(Γ₀, Ω₀, t₀) = −D₁L_d|_D(g₀, g₁)     (3 equations for w = ξ/h, by `Newton`),          (9)
    q₁ = q₀ ⊗ exp(ξ),  x₁ from (4),  K(Γ₁, Ω₁, t₁) = D₂L_d|_D(g₀, g₁)  (linear in Ω₁).    (10)

A sequence of its configurations satisfies (1) exactly (to the Newton tolerance). As `h → 0`
(9) is `K = M + rΓ × B`, i.e. (3), and (10) − (9) is `K̇ + Ω × K = −(rΩ × Γ) × B − gΣmᵢsᵢ × Γ
+ rΓ × ΛᵀF`, the balance of angular momentum about the moving contact point, which is (B.8)
(the cross terms cancel by Jacobi's identity).

**What it keeps** (class facts, tested): the discrete rolling constraint (4) to round-off
(`x` is updated by it; `discrete_rolling_defect`); `x₃ = r` to the bit (the update's third
component is exactly zero); `|q| = 1` to round-off (a product with the unit quaternion
`exp(ξ)`, renormalised each step so that rounding does not random-walk over 10⁶ steps); the
DLA equations (1). It is symmetric (`Φ_{−h} ∘ Φ_h = id`) and, with the masses fixed, reversible
under `(q, Ω, x) ↦ (q, −Ω, x)`; order 2 (measured). Energy is not conserved exactly. With the
masses fixed and `F = 0` (`bench/rolling_ball_energy.py`, 10⁶ steps): on the reversible
integrable configurations (Routh's sphere, Chaplygin's ball) its error is bounded — the same
maximum, to three digits, over every decade of steps, `∝ h²` — while explicit methods drift; on
the general offset, non-symmetric ball (non-integrable, no invariant measure) the error is not
stationary (its window maximum grows over the run): no theorem promises boundedness there
(Modin & Verdier 2020), and none is claimed.

**Newton.** The unknown is `w = ξ/h` (3,), started from the explicit predictor
`Ω₀ + (h/2) Ω̇₀` (`RollingBall.omega_dot`), solved on the branch continuous in `h`
(`solve_on_branch`, `start = Ω₀`); gradients pass the solve by the implicit function theorem
(the predictor is cut from them: the root's derivative does not depend on where Newton starts).
A step turning by more than π (`|ξ| > π`: far past any useful step) is reported as
`step_bound_broken`.
"""

from __future__ import annotations

import math
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jax import lax

from .. import _linalg, results
from .._linalg import cross
from ..lie import quaternion, so3
from ..models.rolling_ball import RollingBall, RollingBallState, vertical
from ..models.structures import AbstractRollingBall
from ..newton import Newton
from ..results import RESULTS
from .base import AbstractImplicitIntegrator, solve_on_branch

__all__ = ["NonholonomicDLA", "contact_momentum", "discrete_rolling_defect"]


def _rows(v, k):
    """`v (3,)` as `k` rows (explicit: rank promotion may be disabled)."""
    return jnp.broadcast_to(v, (k,) + v.shape)


def _node(model, t):
    """`(m (k,), χ (k, 3), χ̇ (k, 3))` at time `t`, row 0 the shell (`k = n + 1`)."""
    chi, chid, _ = model.mass_kinematics(t)
    return model.weights(), chi, chid


def _contact_inertia(model, node, Gamma):
    """`(𝕀 − Σᵢ mᵢŝᵢ², Σᵢ mᵢ sᵢ × χ̇ᵢ)`: (3) is `K = A Ω + k`, `A` SPD."""
    m, chi, chid = node
    k = m.shape[0]
    s = model.radius * _rows(Gamma, k) + chi
    A = (
        model.inertia
        + jnp.sum(m * jnp.sum(s * s, axis=-1)) * jnp.eye(3, dtype=s.dtype)
        - jnp.einsum("i,ij,ik->jk", m, s, s)
    )
    return A, jnp.sum(m[:, None] * cross(s, chid), axis=0)


def _contact_momentum(model, node, Gamma, Omega):
    """(3): `K = 𝕀Ω + Σᵢ mᵢ sᵢ × (Ω × sᵢ + χ̇ᵢ)`."""
    A, k = _contact_inertia(model, node, Gamma)
    return _linalg.matvec(A, Omega) + k


def contact_momentum(model: RollingBall, t, state: RollingBallState):
    """The body angular momentum about the contact point, (3): `K(Γ, Ω, t) (3,)` — the
    covector on the rolling distribution that the DLA step matches at each node."""
    return _contact_momentum(model, _node(model, t), vertical(state.q), state.Omega)


def _node_terms(model, node, Gamma, F_body, w):
    """(6) at one node: `(B, M, N)` for the body angular velocity `w` and vertical `Γ`."""
    m, chi, chid = node
    k = m.shape[0]
    r = model.radius
    U = r * cross(w, Gamma)
    V = _rows(U, k) + cross(_rows(w, k), chi) + chid
    mV = m[:, None] * V
    B = jnp.sum(mV, axis=0)
    M = _linalg.matvec(model.inertia, w) + jnp.sum(cross(chi, mV), axis=0)
    gravity = model.gravity * jnp.sum(m[:, None] * cross(chi, _rows(Gamma, k)), axis=0)
    N = cross(B, U) - gravity + r * cross(Gamma, F_body)
    return B, M, N


def _horizontal(model, omega):
    """`r ω × e₃ = r (ω₂, −ω₁, 0)`: third component exactly zero."""
    r = model.radius
    return jnp.stack([r * omega[1], -r * omega[0], jnp.zeros_like(omega[0])])


def discrete_rolling_defect(model: RollingBall, state0, state1):
    """`x₁ − x₀ − r (Λ₀ξ) × e₃`, `ξ = log(Λ₀ᵀΛ₁)`: the residual of the discrete rolling
    constraint (4) between two consecutive states, `(3,)` (zero to round-off along
    `NonholonomicDLA` trajectories)."""
    p = quaternion.multiply(quaternion.conjugate(state0.q), state1.q)
    xi = so3.log(quaternion.to_matrix(p))
    omega = _linalg.matvec(quaternion.to_matrix(state0.q), xi)
    return state1.x - state0.x - _horizontal(model, omega)


class NonholonomicDLA(AbstractImplicitIntegrator):
    """The discrete Lagrange–d'Alembert method (9)–(10) on `SO(3) × ℝ²` for `RollingBall`
    (the module's docstring): implicit (one 3×3 Newton solve per step), symmetric, order 2;
    keeps the discrete rolling constraint (4), `|q| = 1` and `x₃ = r` to round-off."""

    name: ClassVar[str] = "DLA"
    structures = (AbstractRollingBall,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({"quaternion_norm_error", "height_error"})
    reference: ClassVar[str] = (
        "Cortés & Martínez (2001); McLachlan & Perlmutter (2006), discrete Lagrange–d'Alembert"
    )
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, solver_state, t, dt):
        q0, Omega0, x0 = state
        node0, node1 = _node(model, t), _node(model, t + dt)
        Lam0 = quaternion.to_matrix(q0)
        Gamma0 = vertical(q0)
        F0 = _linalg.matvec(Lam0.T, model.external_force)
        K0 = _contact_momentum(model, node0, Gamma0, Omega0)
        r = model.radius

        def terms(w):
            xi = dt * w
            B0, M0, N0 = _node_terms(model, node0, Gamma0, F0, w)
            Gamma1 = so3.rotate_exp(-xi, Gamma0)
            B1, M1, _ = _node_terms(model, node1, Gamma1, so3.rotate_exp(-xi, F0), w)
            return xi, B0, M0, N0, B1, M1

        def residual(w):  # (9) with (7)
            xi, B0, M0, N0, B1, M1 = terms(w)
            minus_d1 = (
                -0.5 * dt * N0
                + 0.5 * so3.dexpinv_apply(-xi, M0 + M1)
                + 0.5 * r * cross(Gamma0, B0 + so3.rotate_exp(xi, B1))
            )
            return minus_d1 - K0

        guess = lax.stop_gradient(Omega0 + 0.5 * dt * model.omega_dot(t, state))
        w, info = solve_on_branch(self.newton, residual, guess, Omega0)
        xi, B0, M0, _, _, M1 = terms(w)

        q1 = quaternion.normalize(quaternion.multiply(q0, quaternion.from_rotation_vector(xi)))
        x1 = x0 + _horizontal(model, _linalg.matvec(Lam0, xi))  # (4)
        Lam1 = quaternion.to_matrix(q1)
        Gamma1 = vertical(q1)
        F1 = _linalg.matvec(Lam1.T, model.external_force)
        B1, M1, N1 = _node_terms(model, node1, Gamma1, F1, w)
        d2 = (  # (8)
            0.5 * dt * N1
            + 0.5 * so3.dexpinv_apply(xi, M0 + M1)
            + 0.5 * r * cross(Gamma1, so3.rotate_exp(-xi, B0) + B1)
        )
        A1, k1 = _contact_inertia(model, node1, Gamma1)
        Omega1 = _linalg.solve(A1, d2 - k1)  # (10)

        within = jnp.sum(xi * xi) <= math.pi**2
        info = info._replace(result=results.where(~within, RESULTS.step_bound_broken, info.result))
        return RollingBallState(q1, Omega1, x1), solver_state, info


NONHOLONOMIC_LIE_CLASSES = (NonholonomicDLA,)
"""This module's integrators, for the registry."""
