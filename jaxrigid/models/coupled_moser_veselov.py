"""The discrete mechanics of two rigid bodies coupled by a ball-and-socket joint that DMV
integrates (Dixon §8, (52)–(67), Tables 5–6), body and spatial forms: the discrete Lagrangian,
its discrete Legendre transforms and the updates, which `AbstractCoupledBodies.moser_veselov_body`
and `moser_veselov_spatial` return as a `MoserVeselovStep` (`models.moser_veselov`); the model
is `models.CoupledBodies`.

**The discrete Lagrangian.** (52) is, up to a constant and the factor −h, the kinetic energy
of all mass points with velocities `Δx/h`: with `W_i = R_i^kᵀR_i^{k+1}` (the paper's
`Ω_i^{k+1}`), the Moser–Veselov mass matrices `Ĵ_i = J(𝕀̂_i) = J(𝕀_i) + εd_id_iᵀ` (see
`models.coupled_bodies`), `u_i = (W_i − 1)d_i` and `Λ_k = R_1^kᵀR_2^k`,

    h L_d = Σ_i tr(Ĵ_i(1 − W_i)) − ε u_1ᵀΛ_k u_2.

(Symmetric under exchanging the ends with h → −h, so the map is symmetric: second order.)

**Discrete Euler–Poincaré equations, derived.** Varying `R_i^k → R_i^k exp(ξ̂_i)` in the two
steps that contain it (Λ_k varies as `−ξ̂_1Λ_k`, `Λ_kξ̂_2`) gives the discrete Legendre
transforms at the start and at the end of a step; the discrete Euler–Lagrange equations say
that they agree at every node, `Π_i^k`:

    hΠ_1^k     = 2 vee(W_1Ĵ_1) − ε d_1 × Λ_k u_2,      hΠ_2^k     = 2 vee(W_2Ĵ_2) − ε d_2 × Λ_kᵀu_1,
    hΠ_1^{k+1} = 2 vee(Ĵ_1W_1) − ε d_1 × W_1ᵀΛ_k u_2,
    hΠ_2^{k+1} = 2 vee(Ĵ_2W_2) − ε d_2 × W_2ᵀΛ_kᵀu_1,
    R_1^{k+1} = R_1^k W_1,   Λ_{k+1} = W_1ᵀ Λ_k W_2   ((60)).

The first line (6 equations for the two rotations) is solved by Newton on the two Cayley
vectors (`W_i = cay(ĉ_i)`, as for the free body in `models.moser_veselov`), from the predictor
`c = h M(Λ)⁻¹Π`. Without coupling (ε = 0) each line is the free body's Moser–Veselov step.
In the spatial frame (`δ_i = R_id_i`, `ω_i = R_iW_iR_iᵀ`, `Ĵ_i^s = R_iĴ_iR_iᵀ`, the spatial
momenta `π_i = R_iΠ_i`) the same equations read

    hπ_1^k = 2 vee((ω_1 − 1)Ĵ_1^s) − ε δ_1 × (ω_2 − 1)δ_2   (and 1 ↔ 2),
    π_1^{k+1} = π_1^k − (ε/h) Δδ_1 × Δδ_2,   π_2^{k+1} = π_2^k + (ε/h) Δδ_1 × Δδ_2,

with `Δδ_i = (ω_i − 1)δ_i` the displacement of the joint seen from body i: the bodies exchange
angular momentum through the joint and the total `π_1 + π_2` is kept exactly by the update
(discrete Noether; Lemma 8.1.1), whatever the accuracy of the Newton solve.

**Where the paper's printed equations differ** (the free body's slips: `models.moser_veselov`).
- (59) `M_i^{k+1} = Ad*_{Ω_i^k} M_i^k` would rotate each body's momentum separately and keep
  each `‖M_i‖`, i.e. no exchange between the bodies — contradicting the paper's own Figure 10
  ("exchanges of momentum between the two bodies"). The derived update has the exchange
  term: `Π_1^{k+1} = W_1ᵀΠ_1^k − (ε/h)(W_1ᵀd_1 − d_1) × W_1ᵀΛ_k u_2`.
- Table 5's discrete body momentum `M_1^k = Î_1Ω_1^k − Ω_1^{kT}Î_1 + 2ε skew(D_12 + Ω_2^{k+1T}
  D_12ᵀ)` has no `Λ` in its coupling term, so it adds vectors of the two bodies' frames
  (`D_12 = d_1 ⊗ d_2` is "fixed in the body frame"); the Legendre transforms above replace it.
- (66) writes body 2's coupling with `D_12^{kT}`, Table 6 with `D_12^k`; Table 6's is the
  consistent one (`(ω_1 − 1)D_12 = Δδ_1δ_2ᵀ`). (66)'s `m_i = 2 skew((∇_ωL)ᵀω)` is the
  derivative at *fixed* advected `Î_i^k`, `D_12^k`; (67) adds their variations only as the
  unevaluated `∇_Î L ◇ Î` (and omits the `D_12` term of Table 6), so the spatial equations
  cannot be implemented as printed. Evaluated, they are the spatial form above, which is the
  body form conjugated by `R_i^k`: `DMV-spatial` is tested equal to `DMV-body` to round-off.
- The paper gives no masses or joint vectors for §9 (`jaxrigid.cases.dmv` documents ours).
"""

from __future__ import annotations

import jax.numpy as jnp

from .. import _linalg
from ..lie import so3
from .moser_veselov import MoserVeselovStep, cayley_minus_identity, mass_matrix


def body_start_momenta(J, d, eps, Lam, E1, E2):
    """`h(Π_1^k, Π_2^k)` from the increments `E_i = W_i − 1` (start-of-step transform)."""
    u1, u2 = E1 @ d[0], E2 @ d[1]
    p1 = 2.0 * so3.vee(E1 @ J[0]) - eps * jnp.cross(d[0], Lam @ u2)
    p2 = 2.0 * so3.vee(E2 @ J[1]) - eps * jnp.cross(d[1], Lam.T @ u1)
    return p1, p2


def body_end_momenta(J, d, eps, Lam, E1, E2):
    """`h(Π_1^{k+1}, Π_2^{k+1})` (end-of-step transform)."""
    u1, u2 = E1 @ d[0], E2 @ d[1]
    v2, v1 = Lam @ u2, Lam.T @ u1
    p1 = 2.0 * so3.vee(J[0] @ E1) - eps * jnp.cross(d[0], v2 + E1.T @ v2)
    p2 = 2.0 * so3.vee(J[1] @ E2) - eps * jnp.cross(d[1], v1 + E2.T @ v1)
    return p1, p2


def body_step(model, state, dt) -> MoserVeselovStep:
    """The body form ((52)–(60), Table 5, as derived above): `r(c)` of the start-of-step
    transforms in the Cayley vectors `c = (c_1, c_2)` of `(W_1, W_2)`, predicted by
    `c = hM(Λ)⁻¹Π`; then `R_1 ← R_1W_1`, `Λ ← W_1ᵀΛW_2`, `Π_i` from the end-of-step
    transforms."""
    R, Lam, Pi = state
    J = jnp.stack([mass_matrix(I) for I in model.augmented_inertia()])
    d, eps = model.joint, model.reduced_mass
    hPi = dt * Pi

    def residual(c):
        E1, E2 = cayley_minus_identity(c[:3]), cayley_minus_identity(c[3:])
        p1, p2 = body_start_momenta(J, d, eps, Lam, E1, E2)
        return jnp.concatenate([p1 - hPi[0], p2 - hPi[1]])

    def update(c):
        E1, E2 = cayley_minus_identity(c[:3]), cayley_minus_identity(c[3:])
        p1, p2 = body_end_momenta(J, d, eps, Lam, E1, E2)
        A = Lam + Lam @ E2  # Λ W_2
        Lam1 = A + E1.T @ A  # W_1ᵀ Λ W_2
        return state._replace(R=R + R @ E1, Lambda=Lam1, Pi=jnp.stack([p1, p2]) / dt)

    return MoserVeselovStep(residual, dt * model.angular_velocity(Lam, Pi).reshape(6), update)


def spatial_step(model, state, dt) -> MoserVeselovStep:
    """The spatial form ((61)–(67), Table 6, as derived above): `r(e)` of the start-of-step
    transforms in the Cayley vectors of `(ω_1, ω_2)`, with the advected spatial mass matrices
    and joint vectors `δ_i = R_id_i`, predicted by `e = h` times the spatial angular
    velocities; then `π_{1,2} ∓= (ε/h)Δδ_1 × Δδ_2`, `R_i ← ω_iR_i`."""
    R1, Lam, Pi = state
    R2 = R1 @ Lam
    Rs = (R1, R2)
    Ih = model.augmented_inertia()
    Js = [Ri @ mass_matrix(Ih[i]) @ Ri.T for i, Ri in enumerate(Rs)]
    delta = [Ri @ model.joint[i] for i, Ri in enumerate(Rs)]
    pi = [Ri @ Pi[i] for i, Ri in enumerate(Rs)]
    eps = model.reduced_mass

    def residual(e):
        F1, F2 = cayley_minus_identity(e[:3]), cayley_minus_identity(e[3:])
        r1 = 2.0 * so3.vee(F1 @ Js[0]) - eps * jnp.cross(delta[0], F2 @ delta[1])
        r2 = 2.0 * so3.vee(F2 @ Js[1]) - eps * jnp.cross(delta[1], F1 @ delta[0])
        return jnp.concatenate([r1 - dt * pi[0], r2 - dt * pi[1]])

    # predictor e_i = h ω_i, the spatial angular velocities from the spatial mass matrix
    C = eps * so3.hat(delta[0]) @ so3.hat(delta[1])
    Is = [Ri @ Ih[i] @ Ri.T for i, Ri in enumerate(Rs)]
    M = jnp.block([[Is[0], C], [C.T, Is[1]]])
    guess = dt * _linalg.solve(M, jnp.concatenate(pi))

    def update(e):
        F1, F2 = cayley_minus_identity(e[:3]), cayley_minus_identity(e[3:])
        exchange = (eps / dt) * jnp.cross(F1 @ delta[0], F2 @ delta[1])
        kicks = (-exchange, exchange)
        pi1 = [pi[i] + kicks[i] for i in range(2)]
        # Back to the body frames by increments, as the free body's spatial form does:
        # Π_i^{k+1} = Π_i^k + R_i⁻¹((π_i^{k+1} − π_i^k) + (ω_iᵀ − 1)π_i^{k+1}).
        Fs = (F1, F2)
        Pi1 = jnp.stack(
            [Pi[i] + _linalg.inv3(Rs[i]) @ (kicks[i] + Fs[i].T @ pi1[i]) for i in range(2)]
        )
        # Λ_{k+1} = R_1ᵀω_1ᵀω_2R_2 = Λ + R_1⁻¹(ω_1ᵀω_2 − 1)R_2.
        G = F1.T + F2 + F1.T @ F2
        Lam1 = Lam + _linalg.inv3(R1) @ (G @ R2)
        return state._replace(R=R1 + F1 @ R1, Lambda=Lam1, Pi=Pi1)

    return MoserVeselovStep(residual, guess, update)
