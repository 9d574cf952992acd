"""RATTLE for the chain of rigid bodies in rotation-matrix form (Chaurasia 2012, §3.2 and
App. B; Leimkuhler & Reich 2004, §8.2): Störmer–Verlet for the centres of mass and RATTLE for
every body's attitude, driven by the same half-step kicks,

    p½ = pⁿ − h/2 ∂_rV(rⁿ, Rⁿ),                 r¹ = rⁿ + h p½/m,
    P½ = Pⁿ − h/2 ∂_RV(rⁿ, Rⁿ) − h RⁿΛ_r,       R¹ = Rⁿ + h P½J⁻¹,     R¹ᵀR¹ = 1,
    pⁿ⁺¹ = p½ − h/2 ∂_rV(r¹, R¹),
    Pⁿ⁺¹ = P½ − h/2 ∂_RV(r¹, R¹) − h R¹Λ_v,      R¹ᵀPⁿ⁺¹J⁻¹ + J⁻¹Pⁿ⁺¹ᵀR¹ = 0,

per body `j` (`V` includes the c1-c2 work `W_F`). The gradients of the whole chain are one
autodiff evaluation per half step (vectorised over bodies and particle pairs); given them, the
six constraint equations of each body are independent: the position projection (a 6×6 Newton
solve, `rattle.position_projection`) is `vmap`ped over bodies, the momentum projection is in
closed form (`rattle.momentum_projection`). The gradient at the end of a step is the next
step's first (first same as last): it is carried in the solver state, one evaluation a step.

Held coordinates (`ChainBoundary`) get no force and a zero momentum; their Newton unknown is
pinned at 0, and they are copied unchanged, so they stay bit for bit where they started. The
method is symmetric, symplectic and of order 2; it keeps `RᵀR = 1` to the Newton tolerance
and the tangency (3.7) to round-off, and, being equivariant, the free chain's total momentum
and angular momentum to round-off.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import results
from ..models.chain_matrix import ChainMatrixState
from ..models.structures import AbstractConstrainedChain
from ..newton import Newton
from .base import AbstractImplicitIntegrator, StepInfo
from .rattle import momentum_projection, position_projection

__all__ = ["ChainRATTLE"]


class ChainRATTLE(AbstractImplicitIntegrator):
    """RATTLE on `RigidBodyChain` (§3.2, App. B for each body). `newton`: the settings of each
    body's 6×6 position solve. Solver state: the potential gradients `(∂V/∂r, ∂V/∂R)` at the
    current state."""

    name: ClassVar[str] = "rattle"
    structures = (AbstractConstrainedChain,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({"RtR_error", "tangency_error"})
    reference: ClassVar[str] = "Chaurasia (2012) §3.2, App. B; Leimkuhler & Reich (2004) §8.2"
    newton: Newton = eqx.field(default_factory=Newton)

    def init(self, model, state0, t0, dt):
        del t0, dt
        return model.gradients(state0.r, state0.R)

    def step(self, model, state, solver_state, t, dt):
        del t
        r, p, R, P = state
        n = r.shape[-2]
        tm, rm = model.masks(n, r.dtype)
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
        gradients1 = model.gradients(r1, R1)
        gr1, gR1 = kicks(gradients1)
        p1 = jnp.where(moves, p_half - 0.5 * dt * gr1, p)
        P_bar = P_half - 0.5 * dt * gR1  # (B.24)
        P1 = jax.vmap(momentum_projection, in_axes=(0, 0, None))(R1, P_bar, d)
        R1 = jnp.where(turns3, R1, R)
        P1 = jnp.where(turns3, P1, P)
        return ChainMatrixState(r1, p1, R1, P1), gradients1, _merge_bodies(infos)


def _merge_bodies(infos) -> StepInfo:
    """One info for the bodies' solves (leaves `(N+2,)`): the most iterations (the `vmap`ped
    loops ran that many), the worst residual, the first body's failure."""
    failed = infos.result != results.RESULTS.successful
    return StepInfo(
        jnp.max(infos.iterations),
        jnp.max(infos.residual),
        infos.result[jnp.argmax(failed)],
    )
