"""Runge–Kutta stages on a flat vector ODE `y' = F(τ, y)`, driven by a `ButcherTableau`.

The shared engine of the tableau-driven steppers (classical RK, Munthe-Kaas RK; partitioned
RK uses its starting values). Explicit tables are evaluated stage by stage; implicit ones
solve for all stage increments `Z_k = h Σ_j a_kj F(c_j h, y0 + Z_j)` at once with `Newton`.

Starting values (Hairer & Wanner II, §IV.8). Newton starts from `Z_k = h Σ_j a_kj K̂_j`, with
`K̂` a guess of the stage derivatives `K_j = F(c_j h, y0 + Z_j)` carried in the solver state.
The first step's guess is `K̂_j = F(0, y0)` (`Z_k ≈ h (Σ_j a_kj) f(y0)`, an O(h²) start). After
each step, the next guess extrapolates the stage derivatives just computed: the polynomial
`p` of degree `s − 1` through `(c_j, K_j)` (the derivative of the collocation polynomial, for
collocation methods) evaluated at the next step's nodes, `K̂_i = p(1 + c_i)`; its error is
O(hˢ), so Newton starts O(h^(s+1)) from the stages (for collocation methods this is HW's
extrapolated collocation polynomial, `Z_i = u(1 + c_i) − y1`). The extrapolation assumes the
next step is as long as this one (as in `simulate`, and in each member of a `Composition`);
with another step it is only a worse start. After a step that did not converge, the next
guess is the step's mean slope `Σ_j b_j K_j`, an O(h²) start like the first. A table of one
node (implicit Euler and midpoint, Gauss2, the symplectic Eulers) has no polynomial to
extrapolate beyond a constant, which starts a node one step away (no better than `f(y0)`,
half a step from the midpoint's node: bench/README.md, `newton_warm_start.py`), so those
carry nothing and start every step from `f(y0)`.
The guess is a starting value only: the root, and its gradient (implicit function theorem),
do not depend on it beyond Newton's tolerance, so it carries no derivative
(`stop_gradient`).

Two layouts of the state (the model's `state_layout`). A flat vector `y (n,)`: the unknowns
`Z (s, n)`, one Newton system over all of them. A body axis `y (B, w)` (a chain): the unknowns
laid out body first, `Z (B, s, w)`, every stage's field in one `vmap`, so that a linear solver
can keep the work per body (`BlockDiagonal`: `B` blocks of `s·w`). Either way Newton solves
`P r(Z) = 0` with `P` the linear solver's `stage_preconditioner`: the identity, or
`StageJacobian`'s `M⁻¹ = (I − h A ⊗ D)⁻¹` from the field's Jacobian blocks `D` at `y₀` (per
body by `body_blocks` over the model's `coupling_reach`; one block without a body axis), the
simplified Newton iteration of Hairer & Wanner II §IV.8.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..linear_solvers import body_blocks
from .base import explicit_info
from .tableau import ButcherTableau


def _distinct(c) -> list[int]:
    """The stages of the distinct nodes (a repeated node's first stage)."""
    return [j for j in range(len(c)) if not np.any(np.isclose(c[:j], c[j], rtol=0, atol=1e-14))]


def extrapolation_matrix(c) -> np.ndarray:
    """`E (s, s)` with `(E K)_i = p(1 + c_i)`, `p` the polynomial through `(c_j, K_j)` over the
    distinct nodes (a repeated node's later stages get weight 0): `E_ij = ℓ_j(1 + c_i)`, the
    Lagrange basis of the nodes."""
    c = np.asarray(c, dtype=np.float64)
    distinct = _distinct(c)
    nodes = c[distinct]
    E = np.zeros((len(c), len(c)))
    for i, x in enumerate(1.0 + c):
        for k, j in enumerate(distinct):
            others = np.delete(nodes, k)
            E[i, j] = np.prod((x - others) / (nodes[k] - others))
    return E


def extrapolates(c) -> bool:
    """Whether the stages of a table with nodes `c` are extrapolated to the next step (at
    least two distinct nodes); else every step starts from `f(y0)`."""
    return len(_distinct(np.asarray(c, dtype=np.float64))) >= 2


def first_slopes(f0, stages: int):
    """The first step's guess of the stage derivatives: `K̂_j = f0 = F(0, y0)`, `(s, n)`."""
    return jnp.broadcast_to(f0[None], (stages,) + f0.shape)


def initial_slopes(F, y0, h, tableau: ButcherTableau):
    """The solver state of an implicit RK method before its first step: `first_slopes`, or
    `None` for a table whose stages are not extrapolated (`extrapolates`)."""
    if not extrapolates(tableau.c):
        return None
    return first_slopes(F(0.0 * h, y0), tableau.stages)


def next_slopes(K, c, b, converged):
    """The next step's guess of the stage derivatives from this step's `K (s, n)`: extrapolated
    (`extrapolation_matrix(c) K`) after a converged step, else the mean slope `Σ_j b_j K_j`.
    Carries no derivative."""
    E, b = jnp.asarray(extrapolation_matrix(c), K.dtype), jnp.asarray(b, K.dtype)
    mean = jnp.broadcast_to((b @ K)[None], K.shape)
    return lax.stop_gradient(jnp.where(converged, E @ K, mean))


def explicit_rk_step(F, y0, h, tableau: ButcherTableau):
    """One explicit RK step for `y' = F(τ, y)` from `τ = 0`. Returns `(y1, StepInfo)`."""
    a = jnp.asarray(tableau.a, y0.dtype)
    b = jnp.asarray(tableau.b, y0.dtype)
    K: list[jax.Array] = []
    for i in range(tableau.stages):
        yi = y0 + h * sum((a[i, j] * K[j] for j in range(i)), jnp.zeros_like(y0))
        K.append(F(tableau.c[i] * h, yi))  # the tableau's own nodes: stage i at τ = c_i h
    return y0 + h * (b @ jnp.stack(K)), explicit_info(y0.dtype)


def implicit_rk_step(F, y0, h, tableau: ButcherTableau, newton, slopes, reach=None):
    """One implicit RK step for `y' = F(τ, y)` from `τ = 0`, Newton started from the stage
    derivatives' guess `slopes (s, *y0.shape)` (`None`: from `f(y0)`). `y0 (n,)` flat
    (`reach=None`), or `(B, w)` along a body axis whose field couples bodies within `reach`
    (`_body_first_step`).
    Returns `(y1, next slopes, StepInfo)` (next slopes `None` where the table's are not
    extrapolated)."""
    if reach is not None:
        return _body_first_step(F, y0, h, tableau, newton, slopes, reach)
    if slopes is None:
        slopes = first_slopes(F(0.0 * h, y0), tableau.stages)
    a = jnp.asarray(tableau.a, y0.dtype)
    b = jnp.asarray(tableau.b, y0.dtype)
    c = tableau.c  # the tableau's own nodes: stage k at τ = c_k h
    s, n = tableau.stages, y0.shape[0]

    def stage_derivatives(Z):
        return jnp.stack([F(c[j] * h, y0 + Z[j]) for j in range(s)])

    def blocks():  # no body axis: the whole Jacobian is the one block
        return jax.jacfwd(lambda y: F(0.0 * h, y))(lax.stop_gradient(y0))

    precondition = newton.linear_solver.stage_preconditioner(blocks, h, tableau.a)

    def residual(z):
        Z = z.reshape(s, n)
        return precondition(Z - h * (a @ stage_derivatives(Z))).reshape(-1)

    z, info = newton.solve(residual, (h * (a @ slopes)).reshape(-1))
    K = stage_derivatives(z.reshape(s, n))
    slopes = next_slopes(K, c, tableau.b, info.converged) if extrapolates(c) else None
    return y0 + h * (b @ K), slopes, info


def _body_first_step(F, y0, h, tableau: ButcherTableau, newton, slopes, reach):
    """`implicit_rk_step` along a body axis, `y0 (B, w)`: the unknowns `Z (B, s, w)`, the
    stages' fields in one `vmap`, Newton on `P r(w·x)/w` in the scaled unknowns
    `x = Z/w` (`roundoff_scale`) from the warm start, with `P` the linear solver's
    `stage_preconditioner` (`StageJacobian`: blocks from `body_blocks` over `reach`)."""
    s = tableau.stages
    a = jnp.asarray(tableau.a, y0.dtype)
    b = jnp.asarray(tableau.b, y0.dtype)
    tau = jnp.asarray(tableau.c, y0.dtype) * h  # stage k at t + c_k h
    if slopes is None:
        slopes = first_slopes(F(0.0 * h, y0), s)

    def stage_derivatives(Z):  # (B, s, w) -> (B, s, w), all stages at once
        return jax.vmap(F, in_axes=(0, 1), out_axes=1)(tau, y0[:, None, :] + Z)

    def residual(Z):
        return Z - h * jnp.einsum("ij,njk->nik", a, stage_derivatives(Z))

    guess = h * jnp.einsum("ij,jnk->nik", a, slopes)
    w = roundoff_scale(stage_derivatives, y0, guess, jnp.abs(h * a))

    def blocks():
        return body_blocks(lambda y: F(0.0 * h, y), lax.stop_gradient(y0), reach)

    precondition = newton.linear_solver.stage_preconditioner(blocks, h, tableau.a)
    x, info = newton.solve(lambda x: precondition(residual(w * x)) / w, guess / w)
    K = stage_derivatives(w * x)
    y1 = y0 + h * jnp.einsum("j,njk->nk", b, K)
    if not extrapolates(tableau.c):
        return y1, None, info
    Ks = jnp.moveaxis(K, 1, 0)  # (s, B, w), the flat layout's order of the slopes
    flat = next_slopes(Ks.reshape(s, -1), tableau.c, tableau.b, info.converged)
    return y1, flat.reshape(Ks.shape), info


def roundoff_scale(stage_derivatives, y0, Z, abs_ha):
    """Per-unknown scales `w ≥ 1 (B, s, w)` of the stage increments along a body axis, so that
    Newton's stopping rule on `Z/w` accepts updates down to the round-off floor of the
    residual.

    The floor: a stage value `y₀ + Z` is rounded to `eps·|y₀|`, so a body far from the origin
    (a chain's `r_j ≈ 2j`) has its position, and through a stiff pair potential its forces,
    perturbed by `K·eps·|r_j|`: Newton's updates then cycle at `h Σ|a_ij| K eps |r_j|`, which
    on long chains lies above the default tolerance `eps^(3/4)(1 + max|Z|)` (every step would
    run into `max_steps`). It is measured here by the stage derivatives' change under a
    perturbation of one ulp of `y₀` (alternating signs), and `w = max(1, 8·floor/eps^(3/4))`:
    `1` wherever the floor is below the tolerance (a short chain in float64), so those
    unknowns keep the default rule. Scaling the unknowns does not move the root (nor its
    gradient: `w` carries none)."""
    dtype = y0.dtype
    eps = jnp.finfo(dtype).eps
    n, width = y0.shape
    signs = jnp.where((jnp.arange(n)[:, None] + jnp.arange(width)[None, :]) % 2, 1.0, -1.0)
    delta = eps * jnp.abs(y0) * signs.astype(dtype)
    dK = jnp.abs(stage_derivatives(Z + delta[:, None, :]) - stage_derivatives(Z))
    floor = jnp.einsum("ij,njk->nik", abs_ha, dK)
    tol = float(eps) ** 0.75
    return lax.stop_gradient(jnp.maximum(1.0, 8.0 * floor / tol))
