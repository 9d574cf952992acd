"""Small dense linear algebra in closed form (no LAPACK call per ensemble member).

Newton systems in jaxrigid are 3×3 to a few dozen unknowns; a batched LAPACK call per member
costs far more than the arithmetic (DESIGN.md, "Speed is part of the contract").
"""

from __future__ import annotations

import jax.numpy as jnp


def det3(A):
    """Determinant of `(..., 3, 3)`."""
    return (
        A[..., 0, 0] * (A[..., 1, 1] * A[..., 2, 2] - A[..., 1, 2] * A[..., 2, 1])
        - A[..., 0, 1] * (A[..., 1, 0] * A[..., 2, 2] - A[..., 1, 2] * A[..., 2, 0])
        + A[..., 0, 2] * (A[..., 1, 0] * A[..., 2, 1] - A[..., 1, 1] * A[..., 2, 0])
    )


def inv3(A):
    """Inverse of `(..., 3, 3)` by cofactors: rows of the adjugate are cross products of columns."""
    c0, c1, c2 = A[..., :, 0], A[..., :, 1], A[..., :, 2]
    adj = jnp.stack([jnp.cross(c1, c2), jnp.cross(c2, c0), jnp.cross(c0, c1)], axis=-2)
    det = jnp.sum(c0 * adj[..., 0, :], axis=-1)
    return adj / det[..., None, None]


def solve(A, b):
    """Solve `A x = b` for one small system: `A (n, n)`, `b (n,)`.

    n ≤ 3 by cofactors (Cramer), larger n by Gaussian elimination with partial pivoting,
    unrolled at trace time (n is static), so a `vmap` over members stays plain arithmetic.
    """
    n = b.shape[-1]
    if A.shape[-2:] != (n, n):
        raise ValueError(
            f"solve needs A of shape (n, n) and b of shape (n,), got {A.shape}, {b.shape}"
        )
    if n == 1:
        return b / A[..., 0, :]
    if n == 2:
        det = A[..., 0, 0] * A[..., 1, 1] - A[..., 0, 1] * A[..., 1, 0]
        x0 = A[..., 1, 1] * b[..., 0] - A[..., 0, 1] * b[..., 1]
        x1 = A[..., 0, 0] * b[..., 1] - A[..., 1, 0] * b[..., 0]
        return jnp.stack([x0, x1], axis=-1) / det[..., None]
    if n == 3:
        return jnp.einsum("...ij,...j->...i", inv3(A), b)
    return _gauss_solve(A, b)


def _gauss_solve(A, b):
    n = b.shape[-1]
    M = jnp.concatenate([A, b[..., None]], axis=-1)
    rows = jnp.arange(n)
    for k in range(n):
        # partial pivoting: swap row k with the row of largest |M[i, k]|, i ≥ k
        col = jnp.where(rows >= k, jnp.abs(M[..., :, k]), -1.0)
        p = jnp.argmax(col, axis=-1)
        row_k, row_p = M[..., k, :], jnp.take(M, p, axis=-2)
        is_k, is_p = rows == k, rows == p
        M = jnp.where(is_k[:, None], row_p, jnp.where(is_p[:, None], row_k, M))
        pivot_row = M[..., k, :] / M[..., k, k]
        factors = jnp.where(rows == k, 0.0, M[..., :, k])
        M = M - factors[..., :, None] * pivot_row[..., None, :]
        M = jnp.where(is_k[:, None], pivot_row, M)
    return M[..., :, n]
