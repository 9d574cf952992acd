"""RATTLE for a rigid body in rotation-matrix form (Chaurasia 2012, App. B; Leimkuhler & Reich
2004, §8.2), family `"constrained"`.

    P½  = Pⁿ − h/2 ∂V(Rⁿ) − h Rⁿ Λ_r,          R¹ = Rⁿ + h P½ J⁻¹,      (R¹)ᵀR¹ = 1,
    Pⁿ⁺¹ = P½ − h/2 ∂V(R¹) − h R¹ Λ_v,          (R¹)ᵀPⁿ⁺¹J⁻¹ + J⁻¹(Pⁿ⁺¹)ᵀR¹ = 0,

with symmetric multipliers `Λ_r`, `Λ_v` (six unknowns each). In Appendix B the unsuperscripted
`R⁻¹` is the inverse mass matrix `J⁻¹` (not the attitude's inverse); its (B.1) drops the factor
`J⁻¹` of the `h²` term that (B.14) restores, and (B.6) has the sign of `2RΛ` flipped; (B.13)
does not show second order (the `Λ` terms differ at O(h)): the order 2 is measured instead
(`tests/test_rattle.py`).

Position step (B.14)–(B.19): with `R̄ = Rⁿ + hPⁿJ⁻¹ − h²/2 ∂V(Rⁿ)J⁻¹` and the unknown
`X = h²Λ_r`, solve `(R̄ − RⁿXJ⁻¹)ᵀ(R̄ − RⁿXJ⁻¹) = 1` (the six upper-triangle entries) with
`Newton` (Jacobian by autodiff, the 6×6 system by unrolled elimination) from the guess
(B.23), `X_ij = (R̄ᵀR̄ − 1)_ij / (d_i + d_j)`, `d = diag J⁻¹`. The thesis keeps "the root of
smaller magnitude"; here the root must be the one continuous in h (`solve_on_branch`, `X → 0`
as `h → 0`), else the step is reported as not converged. Momentum step (B.24)–(B.28): linear,
closed form for diagonal `J`: `hΛ_v = M_ij / (d_i + d_j)`, `M = R¹ᵀP̄J⁻¹ + J⁻¹P̄ᵀR¹`.

The method is symmetric, symplectic and of order 2; it keeps `RᵀR = 1` to the Newton
tolerance and the momentum constraint to round-off. The two projections of one body,
`position_projection` and `momentum_projection`, are shared with the chain's RATTLE
(`chain_rattle.py`), which `vmap`s them over bodies.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp

from ..models.structures import AbstractConstrainedBody
from ..newton import Newton
from .base import AbstractImplicitIntegrator, solve_on_branch

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


def position_projection(newton: Newton, R, R_bar, d, active=None):
    """RATTLE's position projection for one body (B.15)–(B.23): `X = h²Λ_r` symmetric with
    `R¹ = R̄ − RⁿXJ⁻¹` orthogonal, solved by `newton` from the guess (B.23) on the branch
    continuous in `h` (`solve_on_branch`). `R`, `R_bar (3, 3)`, `d (3,)` the diagonal of `J⁻¹`;
    `active` (optional scalar bool): where false the unknown is held at `X = 0` (`R¹ = R̄`),
    for a body held by a boundary. Returns `(R¹, X (3, 3), info)`; `vmap` it over bodies."""
    eye = jnp.eye(3, dtype=R.dtype)

    def position(x):  # (B.15) with X = h²Λ_r
        return R_bar - (R @ _symmetric(x)) * d[None, :]

    def residual(x):  # (B.16)
        R1 = position(x)
        res = _upper(R1.T @ R1 - eye)
        return res if active is None else jnp.where(active, res, x)

    guess = _upper(_lyapunov_diag(R_bar.T @ R_bar - eye, d))  # (B.23)
    if active is not None:
        guess = jnp.where(active, guess, 0)
    x, info = solve_on_branch(newton, residual, guess, jnp.zeros_like(guess))
    return position(x), _symmetric(x), info


def momentum_projection(R1, P_bar, d):
    """RATTLE's momentum projection for one body (B.25)–(B.28), in closed form for diagonal
    `J`: `Pⁿ⁺¹ = P̄ − R¹(hΛ_v)` with `hΛ_v = M_ij/(d_i + d_j)`, `M = R¹ᵀP̄J⁻¹ + J⁻¹P̄ᵀR¹`.
    `R1`, `P_bar (3, 3)`, `d (3,)` the diagonal of `J⁻¹`."""
    A = R1.T @ P_bar * d[None, :]
    return P_bar - R1 @ _lyapunov_diag(A + A.T, d)


class RATTLE(AbstractImplicitIntegrator):
    """RATTLE on `ConstrainedRigidBody` (Appendix B). The model supplies `J (3,)` and
    `potential_gradient(t, R)`; the state is `ConstrainedRigidBodyState(R, P)`."""

    name: ClassVar[str] = "rattle"
    structures = (AbstractConstrainedBody,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({"RtR_error", "tangency_error"})
    reference: ClassVar[str] = "Chaurasia (2012) App. B; Leimkuhler & Reich (2004) §8.2"
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, solver_state, t, dt):
        R, P = state
        d = 1.0 / model.J  # diag J⁻¹
        dV0 = model.potential_gradient(t, R)
        R_bar = R + (dt * P - 0.5 * dt**2 * dV0) * d[None, :]  # (B.14)
        R1, X, info = position_projection(self.newton, R, R_bar, d)
        P_half = P - 0.5 * dt * dV0 - (R @ X) / dt
        P_bar = P_half - 0.5 * dt * model.potential_gradient(t + dt, R1)  # (B.24)
        P1 = momentum_projection(R1, P_bar, d)  # (B.25)–(B.28), hΛ_v
        return type(state)(R1, P1), solver_state, info


RATTLE_METHODS = {RATTLE.name: RATTLE}
"""The integrators of the `"constrained"` family (rotation matrices with `RᵀR = 1`)."""
