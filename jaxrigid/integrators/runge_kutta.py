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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

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


def implicit_rk_step(F, y0, h, tableau: ButcherTableau, newton, slopes):
    """One implicit RK step for `y' = F(τ, y)` from `τ = 0`, Newton started from the stage
    derivatives' guess `slopes (s, n)` (`None`: from `f(y0)`). Returns `(y1, next slopes,
    StepInfo)` (next slopes `None` where the table's are not extrapolated)."""
    if slopes is None:
        slopes = first_slopes(F(0.0 * h, y0), tableau.stages)
    a = jnp.asarray(tableau.a, y0.dtype)
    b = jnp.asarray(tableau.b, y0.dtype)
    c = tableau.c  # the tableau's own nodes: stage k at τ = c_k h
    s, n = tableau.stages, y0.shape[0]

    def stage_derivatives(Z):
        return jnp.stack([F(c[j] * h, y0 + Z[j]) for j in range(s)])

    def residual(z):
        Z = z.reshape(s, n)
        return (Z - h * (a @ stage_derivatives(Z))).reshape(-1)

    z, info = newton.solve(residual, (h * (a @ slopes)).reshape(-1))
    K = stage_derivatives(z.reshape(s, n))
    slopes = next_slopes(K, c, tableau.b, info.converged) if extrapolates(c) else None
    return y0 + h * (b @ K), slopes, info
