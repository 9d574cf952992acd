"""Gauss collocation for the quaternion chain (Chaurasia 2012, §3.3–3.5: Gauss6 on (3.28a–d)),
laid out body by body so that a step's cost is linear in the number of bodies.

The `s`-stage Gauss method on `ẏ = F(y)` solves for the stage increments
`Z_i = h Σ_j a_ij F(y₀ + Z_j)` and steps `y₁ = y₀ + h Σ_j b_j F(y₀ + Z_j)`. Here `y` is the
chain's `(N+2, 14)` array of `(r, p, q, g)` per body and the unknowns are laid out with the body
axis first, `Z (N+2, s, 14)`. Newton starts from the previous step's stage derivatives
extrapolated (`runge_kutta.next_slopes`, Hairer & Wanner II §IV.8), carried in the solver state.

Two ways to solve the stage equations, both linear in `N` (no system over the whole chain):

- `StageJacobian()` (the default `newton`'s solver): the simplified Newton iteration of
  Hairer & Wanner II §IV.8. Once per step, the per-body blocks `D_n = ∂F_n/∂y_n (14×14)` at `y₀`
  (exact: 2 × 14 JVPs, bodies coloured by parity, since `F_n` depends on bodies `n−1, n, n+1`
  only), and the inverse of `M_n = I − h A ⊗ D_n` through the eigenvalues of `A`
  (`A = TΛT⁻¹`: one complex `14×14` inverse per body for each real eigenvalue and
  conjugate pair); each iteration is then one residual
  evaluation and `x ← x − M⁻¹ r(x)`. Neighbours' coupling is left out of `M` (a block-Jacobi
  approximation, linear convergence at a rate `O(h²)` of the pair stiffness).
- any other `Newton` linear solver on the stage residual itself, e.g.
  `Newton(chord=True, linear_solver=BlockDiagonal())`: the Jacobian's `N+2` diagonal
  `14s × 14s` blocks from `14s` JVPs of the whole `s`-stage residual (colouring all bodies at
  once, so each block also holds its neighbours' blocks) and a `14s × 14s` LU per body:
  larger blocks and a dense LU, so slower per step than the default, and more so on long
  chains (bench/README.md, `chain_gauss_timing.py`).

Either way the root is the collocation solution, and gradients come from the implicit
function theorem with the exact Jacobian (GMRES), never from the approximation.

Newton's stopping rule is applied to `Z/w` with per-unknown scales `w ≥ 1` (`_roundoff_scale`)
that lift it to the residual's round-off floor: bodies far from the origin carry absolute
position errors `eps·|r_j|` which the stiff pair forces amplify above the default tolerance.

Facts from the tableau: symmetric and symplectic. The multiplier (3.32) keeps the unit sphere
and `qᵀg = 0` for the exact flow; `qᵀg` is a quadratic first integral of the vector field
(`QuaternionChain.multiplier`), so the Gauss methods keep it to round-off, and the unit-norm
error is the method's own error (measured in tests/test_chain_gauss.py against the thesis's
Figure 3.3 claim of second order).
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..linear_solvers import AbstractLinearSolver, Krylov
from ..models.chain_quaternion import ChainQuaternionState
from ..models.structures import AbstractCanonicalChain
from ..newton import Newton
from . import tableau as tb
from .base import AbstractImplicitIntegrator, AbstractTableauIntegrator
from .runge_kutta import extrapolates, first_slopes, next_slopes

__all__ = [
    "CHAIN_GAUSS_CLASSES",
    "AbstractChainGauss",
    "ChainGauss2",
    "ChainGauss4",
    "ChainGauss6",
    "StageJacobian",
    "pack",
    "unpack",
]

_WIDTH = 14  # (r, p, q, g) of one body


def pack(state: ChainQuaternionState):
    """`(N+2, 14)`: each body's `(r, p, q, g)` in one row."""
    return jnp.concatenate(list(state), axis=-1)


def unpack(y) -> ChainQuaternionState:
    """The inverse of `pack`."""
    return ChainQuaternionState(y[..., 0:3], y[..., 3:6], y[..., 6:10], y[..., 10:14])


class StageJacobian(AbstractLinearSolver):
    """The chain's simplified Newton (module docstring): the integrator multiplies the stage
    residual by `M⁻¹`, `M = I − h A ⊗ D` with `D` the per-body Jacobian blocks at `y₀`, so this
    solver's update is that preconditioned residual itself (identity solve). Only the chain
    integrators can use it (they build `M`). The gradient's `tangent_solve` is exact: GMRES
    (`tangent`, a `Krylov`'s settings) on the true Jacobian of the preconditioned residual,
    which is close to the identity."""

    tangent: Krylov = eqx.field(default=Krylov(), static=True)

    def linearise(self, f, x):
        return f(x), None

    def solve(self, op, r):
        return r

    def tangent_solve(self, g, y):
        return self.tangent.tangent_solve(g, y)


def _default_newton() -> Newton:
    return Newton(linear_solver=StageJacobian())


def _body_blocks(F, y0):
    """`D (N+2, 14, 14)`, `D_n = ∂F_n/∂y_n`, from 2 × 14 JVPs: a unit tangent on every other
    body at once (parity colouring) is exact because `F_n` depends on `y_{n−1}, y_n, y_{n+1}`
    only. The JVPs run one after another (`lax.map`): on the CPU faster than their `vmap` on
    long chains, and quicker to compile than an unrolled loop (bench/README.md,
    "Measurements behind the source's design choices")."""
    n, w = y0.shape
    parity = (jnp.arange(n) % 2)[:, None]
    basis = jnp.eye(w, dtype=y0.dtype)
    tangents = jnp.stack(
        [jnp.where(parity == c, basis[k][None, :], 0.0) for c in (0, 1) for k in range(w)]
    )  # (2w, n, w)
    _, jvp = jax.linearize(F, y0)
    cols = jax.lax.map(jvp, tangents).reshape(2, w, n, w)  # (colour, k, body, row)
    own = jnp.where(parity[None, :, :] == 0, cols[0], cols[1])  # (k, body, row)
    return jnp.transpose(own, (1, 2, 0))  # (body, row, k)


def _stage_inverse(D, dt, a):
    """`r ↦ M⁻¹ r` for `r (N+2, s, 14)`, `M_n = I − h A ⊗ D_n`: with `A = TΛT⁻¹`,
    `M⁻¹ = (T ⊗ I) diag_i (I − hλ_i D_n)⁻¹ (T⁻¹ ⊗ I)`. For real `r` the components of a
    conjugate pair `λ, λ̄` are conjugate, so one inverse per pair is formed (Gauss6: one real
    eigenvalue and a pair, 2 complex `14×14` inverses per body) and the pair's term is twice
    the real part of one."""
    lam, T = np.linalg.eig(np.asarray(a, np.float64))
    Tinv = np.linalg.inv(T)
    keep = [i for i in range(len(lam)) if lam[i].imag >= 0]  # reals and one of each pair
    weight = np.where(lam[keep].imag > 0, 2.0, 1.0)
    cdtype = jnp.result_type(D.dtype, jnp.complex64)
    lam_k = jnp.asarray(lam[keep], cdtype)
    T_k = jnp.asarray(T[:, keep] * weight[None, :], cdtype)  # (s, kept)
    Tinv_k = jnp.asarray(Tinv[keep, :], cdtype)  # (kept, s)
    eye = jnp.eye(D.shape[-1], dtype=cdtype)
    blocks = eye[None, None] - (dt * lam_k)[None, :, None, None] * D[:, None, :, :].astype(cdtype)
    inv = jnp.linalg.inv(blocks)  # (N+2, kept, 14, 14)

    def apply(r):
        u = jnp.einsum("ij,njk->nik", Tinv_k, r.astype(cdtype))
        v = jnp.einsum("nikl,nil->nik", inv, u)
        return jnp.real(jnp.einsum("ij,njk->nik", T_k, v)).astype(r.dtype)

    return apply


def _roundoff_scale(stage_derivatives, y0, Z, abs_ha):
    """Per-unknown scales `w ≥ 1 (N+2, s, 14)` of the stage increments, so that Newton's
    stopping rule on `Z/w` accepts updates down to the round-off floor of the residual.

    The floor: a stage value `y₀ + Z` is rounded to `eps·|y₀|`, so a body far from the origin
    (`r_j ≈ 2j`) has its position, and through the stiff pair potential its forces, perturbed
    by `K·eps·|r_j|`: Newton's updates then cycle at `h Σ|a_ij| K eps |r_j|` (5·10⁻¹² at body
    570 of a 1000-body chain, above the default tolerance `eps^(3/4)(1 + max|Z|)`, so every
    step ran into `max_steps`). It is measured here by the stage derivatives' change under a
    perturbation of one ulp of `y₀` (alternating signs), and `w = max(1, 8·floor/eps^(3/4))`:
    `1` wherever the floor is below the tolerance (a short chain in float64), so those
    unknowns keep the default rule. Scaling the unknowns does not move the root (nor its
    gradient: `w` carries none)."""
    dtype = y0.dtype
    eps = jnp.finfo(dtype).eps
    n = y0.shape[0]
    signs = jnp.where((jnp.arange(n)[:, None] + jnp.arange(_WIDTH)[None, :]) % 2, 1.0, -1.0)
    delta = eps * jnp.abs(y0) * signs.astype(dtype)
    dK = jnp.abs(stage_derivatives(Z + delta[:, None, :]) - stage_derivatives(Z))
    floor = jnp.einsum("ij,njk->nik", abs_ha, dK)
    tol = float(eps) ** 0.75
    return jax.lax.stop_gradient(jnp.maximum(1.0, 8.0 * floor / tol))


class AbstractChainGauss(AbstractTableauIntegrator, AbstractImplicitIntegrator):
    """Gauss collocation of the class's `tableau` on `QuaternionChain.vector_field`, the stage
    increments `(N+2, s, 14)` solved body-first by `newton` (default
    `Newton(linear_solver=StageJacobian())`, the simplified Newton of the module docstring;
    any other `jaxrigid.linear_solvers` solver is applied to the stage residual itself).

    Solver state: the guess `(s, N+2, 14)` of the next step's stage derivatives (`None` for
    one stage, which starts every step from `F(y₀)`)."""

    structures = (AbstractCanonicalChain,)
    symplectic: ClassVar[bool] = False
    reference: ClassVar[str] = (
        "Chaurasia (2012) §3.3–3.5; Hairer, Lubich & Wanner, GNI §II.1; Hairer & Wanner II §IV.8"
    )
    newton: Newton = eqx.field(default_factory=_default_newton)

    @classmethod
    def tableau_facts(cls, tableau):
        return {
            **super().tableau_facts(tableau),
            "symmetric": bool(tableau.symmetric),
            "symplectic": bool(tableau.symplectic),
        }

    @staticmethod
    def _field(model, t):
        def F(tau, y):
            return pack(model.vector_field(t + tau, unpack(y)))

        return F

    def init(self, model, state0, t0, dt):
        if not extrapolates(self.tableau.c):
            return None
        y0 = pack(state0)
        return first_slopes(self._field(model, t0)(0.0 * dt, y0), self.tableau.stages)

    def step(self, model, state, solver_state, t, dt):
        F = self._field(model, t)
        y0 = pack(state)
        tab = self.tableau
        s = tab.stages
        a = jnp.asarray(tab.a, y0.dtype)
        b = jnp.asarray(tab.b, y0.dtype)
        tau = jnp.asarray(tab.c, y0.dtype) * dt  # stage k at t + c_k h
        slopes = first_slopes(F(0.0 * dt, y0), s) if solver_state is None else solver_state

        def stage_derivatives(Z):  # (N+2, s, 14) -> (N+2, s, 14), all stages at once
            return jax.vmap(F, in_axes=(0, 1), out_axes=1)(tau, y0[:, None, :] + Z)

        def residual(Z):
            return Z - dt * jnp.einsum("ij,njk->nik", a, stage_derivatives(Z))

        guess = dt * jnp.einsum("ij,jnk->nik", a, slopes)
        w = _roundoff_scale(stage_derivatives, y0, guess, jnp.abs(dt * a))
        if isinstance(self.newton.linear_solver, StageJacobian):
            y_frozen = jax.lax.stop_gradient(y0)
            D = _body_blocks(lambda y: F(0.0 * dt, y), y_frozen)
            precondition = _stage_inverse(D, jax.lax.stop_gradient(dt), tab.a)
        else:
            precondition = lambda r: r  # noqa: E731
        x, info = self.newton.solve(lambda x: precondition(residual(w * x)) / w, guess / w)
        K = stage_derivatives(w * x)
        y1 = y0 + dt * jnp.einsum("j,njk->nk", b, K)
        if extrapolates(tab.c):
            Ks = jnp.moveaxis(K, 1, 0)
            flat = next_slopes(Ks.reshape(s, -1), tab.c, tab.b, info.converged)
            slopes = flat.reshape(Ks.shape)
        else:
            slopes = None
        return unpack(y1), slopes, info


class ChainGauss2(AbstractChainGauss):
    """Gauss–Legendre collocation, 1 stage (the implicit midpoint rule), order 2."""

    tableau = tb.GAUSS2


class ChainGauss4(AbstractChainGauss):
    """Gauss–Legendre collocation, 2 stages, order 4."""

    tableau = tb.GAUSS4


class ChainGauss6(AbstractChainGauss):
    """Gauss–Legendre collocation, 3 stages, order 6: the thesis's Gauss6 (§3.5)."""

    tableau = tb.GAUSS6


CHAIN_GAUSS_CLASSES = (ChainGauss2, ChainGauss4, ChainGauss6)
"""The chain's Gauss methods (names `gauss2`, `gauss4`, `gauss6`)."""
