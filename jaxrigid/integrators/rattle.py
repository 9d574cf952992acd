"""RATTLE for rigid bodies in rotation-matrix form (Chaurasia 2012, §3.2 and App. B; Leimkuhler
& Reich 2004, §8.2), family `"constrained"` (one body about a fixed point) and `"chain"` (a
chain of bodies): Störmer–Verlet for the centres and RATTLE for every attitude, driven by the
same half-step kicks,

    p½ = pⁿ − h/2 ∂_rV(rⁿ, Rⁿ),                 r¹ = rⁿ + h p½/m,
    P½ = Pⁿ − h/2 ∂_RV(rⁿ, Rⁿ) − h RⁿΛ_r,       R¹ = Rⁿ + h P½J⁻¹,     R¹ᵀR¹ = 1,
    pⁿ⁺¹ = p½ − h/2 ∂_rV(r¹, R¹),
    Pⁿ⁺¹ = P½ − h/2 ∂_RV(r¹, R¹) − h R¹Λ_v,      R¹ᵀPⁿ⁺¹J⁻¹ + J⁻¹Pⁿ⁺¹ᵀR¹ = 0,

per body `j`, with symmetric multipliers `Λ_r`, `Λ_v` (six unknowns each). The model gives its
bodies along a body axis (`AbstractConstrainedBodies.bodies`): one body about a fixed point is
a chain of one whose centre is held. In Appendix B the unsuperscripted `R⁻¹` is the inverse
mass matrix `J⁻¹` (not the attitude's inverse); its (B.1) drops the factor `J⁻¹` of the `h²`
term that (B.14) restores, and (B.6) has the sign of `2RΛ` flipped; (B.13) does not show
second order (the `Λ` terms differ at O(h)): the order 2 is measured instead
(`tests/test_rattle.py`, `tests/test_chain_rattle.py`).

Position step (B.14)–(B.19), each body: with `R̄ = Rⁿ + hPⁿJ⁻¹ − h²/2 ∂V(Rⁿ)J⁻¹` and the
unknown `X = h²Λ_r`, solve `(R̄ − RⁿXJ⁻¹)ᵀ(R̄ − RⁿXJ⁻¹) = 1` (the six upper-triangle entries)
with `Newton` (Jacobian by autodiff, the 6×6 system by unrolled elimination) from the guess
(B.23), `X_ij = (R̄ᵀR̄ − 1)_ij / (d_i + d_j)`, `d = diag J⁻¹`. The thesis keeps "the root of
smaller magnitude"; here the root must be the one continuous in h (`solve_on_branch`, `X → 0`
as `h → 0`), else the step is reported as not converged. Momentum step (B.24)–(B.28): linear,
closed form for diagonal `J`: `hΛ_v = M_ij / (d_i + d_j)`, `M = R¹ᵀP̄J⁻¹ + J⁻¹P̄ᵀR¹`.

Given the gradients of the whole system (one autodiff evaluation per half step, vectorised
over bodies), the bodies' constraint equations are independent: the position projection is
`vmap`ped over bodies, and per-body speed lives there and in the model, not in copies of the
method. The gradient at the end of a step is the next step's first (first same as last): it
is carried in the solver state, one evaluation a step. Held coordinates (`masks`) get no force
and a zero momentum; their Newton unknown is pinned at 0, and they are copied unchanged, so
they stay bit for bit where they started.

The method is symmetric, symplectic and of order 2; it keeps `RᵀR = 1` to the Newton
tolerance and the tangency (3.7) to round-off, and, being equivariant, a free chain's total
momentum and angular momentum to round-off.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import results
from ..models.structures import AbstractConstrainedBodies
from ..newton import Newton
from .base import AbstractImplicitIntegrator, StepInfo, solve_on_branch

_UPPER = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


def _upper(S):
    """The six upper-triangle entries of a symmetric `(3, 3)`, `(6,)`."""
    return jnp.stack([S[i, j] for i, j in _UPPER])


def _symmetric(x):
    """The symmetric `(3, 3)` with upper triangle `x (6,)`."""
    a, b, c, d, e, f = (x[k] for k in range(6))
    return jnp.stack([jnp.stack([a, b, c]), jnp.stack([b, d, e]), jnp.stack([c, e, f])])


def _lyapunov_diag(M, d):
    """`Y` with `Y diag(d) + diag(d) Y = M` (symmetric `M`, `d > 0`): `Y_ij = M_ij/(d_i + d_j)`."""
    return M / (d[:, None] + d[None, :])


def position_projection(newton: Newton, R, R_bar, d, active):
    """RATTLE's position projection for one body (B.15)–(B.23): `X = h²Λ_r` symmetric with
    `R¹ = R̄ − RⁿXJ⁻¹` orthogonal, solved by `newton` from the guess (B.23) on the branch
    continuous in `h` (`solve_on_branch`). `R`, `R_bar (3, 3)`, `d (3,)` the diagonal of `J⁻¹`;
    `active` (scalar bool): where false the unknown is held at `X = 0` (`R¹ = R̄`), for a body
    held by a boundary. Returns `(R¹, X (3, 3), info)`; `vmap` it over bodies."""
    eye = jnp.eye(3, dtype=R.dtype)

    def position(x):  # (B.15) with X = h²Λ_r
        return R_bar - (R @ _symmetric(x)) * d[None, :]

    def residual(x):  # (B.16)
        R1 = position(x)
        return jnp.where(active, _upper(R1.T @ R1 - eye), x)

    guess = jnp.where(active, _upper(_lyapunov_diag(R_bar.T @ R_bar - eye, d)), 0)  # (B.23)
    x, info = solve_on_branch(newton, residual, guess, jnp.zeros_like(guess))
    return position(x), _symmetric(x), info


def momentum_projection(R1, P_bar, d):
    """RATTLE's momentum projection for one body (B.25)–(B.28), in closed form for diagonal
    `J`: `Pⁿ⁺¹ = P̄ − R¹(hΛ_v)` with `hΛ_v = M_ij/(d_i + d_j)`, `M = R¹ᵀP̄J⁻¹ + J⁻¹P̄ᵀR¹`.
    `R1`, `P_bar (3, 3)`, `d (3,)` the diagonal of `J⁻¹`."""
    A = R1.T @ P_bar * d[None, :]
    return P_bar - R1 @ _lyapunov_diag(A + A.T, d)


class RATTLE(AbstractImplicitIntegrator):
    """RATTLE on `AbstractConstrainedBodies` (§3.2, App. B for each body): a
    `ConstrainedRigidBody` or a `RigidBodyChain`. `newton`: the settings of each body's 6×6
    position solve. Solver state: the potential gradients `(∂V/∂r, ∂V/∂R)` at the current
    state, along the body axis."""

    name: ClassVar[str] = "rattle"
    structures = (AbstractConstrainedBodies,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({"RtR_error", "tangency_error"})
    reference: ClassVar[str] = "Chaurasia (2012) §3.2, App. B; Leimkuhler & Reich (2004) §8.2"
    first_same_as_last: ClassVar[bool] = True
    newton: Newton = eqx.field(default_factory=Newton)

    def init(self, model, state0, t0, dt):
        del dt
        r, _, R, _ = model.bodies(state0)
        return model.potential_gradients(t0, r, R)

    def step(self, model, state, solver_state, t, dt):
        r, p, R, P = model.bodies(state)
        tm, rm = model.masks(r.shape[-2], r.dtype)
        moves = jnp.broadcast_to(tm[:, None] > 0, r.shape)
        turns = rm > 0
        turns3 = jnp.broadcast_to(turns[:, None, None], R.shape)
        d = model.inverse_mass_diagonal
        d_cols = jnp.broadcast_to(d, R.shape)

        def kicks(gradients):  # the forces on what moves (where, not ×: no 0·inf)
            gr, gR = gradients
            return jnp.where(moves, gr, 0), jnp.where(turns3, gR, 0)

        gr0, gR0 = kicks(solver_state)
        p_half = p - 0.5 * dt * gr0
        r1 = jnp.where(moves, r + dt * p_half / model.mass, r)
        R_bar = R + (dt * P - 0.5 * dt**2 * gR0) * d_cols  # (B.14), every body
        R1, X, infos = jax.vmap(position_projection, in_axes=(None, 0, 0, None, 0))(
            self.newton, R, R_bar, d, turns
        )
        P_half = P - 0.5 * dt * gR0 - (R @ X) / dt
        gradients1 = model.potential_gradients(t + dt, r1, R1)
        gr1, gR1 = kicks(gradients1)
        p1 = jnp.where(moves, p_half - 0.5 * dt * gr1, p)
        P_bar = P_half - 0.5 * dt * gR1  # (B.24)
        P1 = jax.vmap(momentum_projection, in_axes=(0, 0, None))(R1, P_bar, d)
        R1 = jnp.where(turns3, R1, R)
        P1 = jnp.where(turns3, P1, P)
        return model.with_bodies(state, r1, p1, R1, P1), gradients1, _merge_bodies(infos)


def _merge_bodies(infos) -> StepInfo:
    """One info for the bodies' solves (leaves `(n,)`): the most iterations (the `vmap`ped
    loops ran that many), the worst residual, the first body's failure."""
    failed = infos.result != results.RESULTS.successful
    return StepInfo(
        jnp.max(infos.iterations),
        jnp.max(infos.residual),
        infos.result[jnp.argmax(failed)],
    )


RATTLE_METHODS = {RATTLE.name: RATTLE}
"""The integrators of the `"constrained"` family (rotation matrices with `RᵀR = 1`)."""
