"""Runge–Kutta stages on a flat vector ODE `y' = F(τ, y)`, driven by a `ButcherTableau`.

The shared engine of the tableau-driven steppers (Munthe-Kaas RK here; classical and
partitioned RK build on it). Explicit tables are evaluated stage by stage; implicit ones
solve for all stage increments `Z_k = h Σ_j a_kj F(c_j h, y0 + Z_j)` at once with `Newton`.
"""

from __future__ import annotations

import jax.numpy as jnp

from .base import explicit_info
from .tableau import ButcherTableau


def rk_step(F, y0, h, tableau: ButcherTableau, newton):
    """One RK step for `y' = F(τ, y)` from `τ = 0`. Returns `(y1, StepInfo)`."""
    a = jnp.asarray(tableau.a, y0.dtype)
    b = jnp.asarray(tableau.b, y0.dtype)
    c = tableau.c  # the tableau's own nodes: stage k at τ = c_k h
    s, n = tableau.stages, y0.shape[0]
    if tableau.explicit:
        K = []
        for i in range(s):
            yi = y0 + h * sum((a[i, j] * K[j] for j in range(i)), jnp.zeros_like(y0))
            K.append(F(c[i] * h, yi))
        K = jnp.stack(K)
        info = explicit_info(y0.dtype)
    else:

        def residual(z):
            Z = z.reshape(s, n)
            K = jnp.stack([F(c[j] * h, y0 + Z[j]) for j in range(s)])
            return (Z - h * (a @ K)).reshape(-1)

        f0 = F(0.0 * h, y0)  # predictor Z_k ≈ h (Σ_j a_kj) f0: the row sums, not the nodes
        guess = (h * jnp.asarray(tableau.row_sums, y0.dtype)[:, None] * f0[None, :]).reshape(-1)
        z, info = newton.solve(residual, guess)
        Z = z.reshape(s, n)
        K = jnp.stack([F(c[j] * h, y0 + Z[j]) for j in range(s)])
    return y0 + h * (b @ K), info
