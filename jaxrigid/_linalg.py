"""Small dense linear algebra: closed forms for the 3×3 systems of the rotation integrators.

Newton systems in jaxrigid are 3×3 (the Lie-group and DMV steps: solved by cofactors, no LAPACK
call per ensemble member, DESIGN.md "Speed is part of the contract") to a few dozen unknowns
(Gauss6 stages, RATTLE, coupled bodies: LU with partial pivoting, `jnp.linalg.solve`).
"""

from __future__ import annotations

import functools

import jax.numpy as jnp

# Component-wise small-vector algebra. Each result is built from scalar components with
# `jnp.stack`, never with `dot`, `einsum` or a reduction over the last axis: under `vmap` over
# an ensemble, XLA's simplifier cancels the stack/slice pairs between consecutive calls and the
# compiled step is elementwise loops over the members, laid out component-major (`f64[3, N]`),
# where a batched `dot` per member or an `(N, 3)` minor-axis reduction would be a pass over the
# ensemble of its own. `python bench/hlo_census.py "jr.IMIDM()"` counts the compiled run's
# fusions, dots (none) and reductions.


def dot(a, b):
    """`a · b` over the last axis, `(..., n) -> (...)`."""
    return functools.reduce(
        lambda s, k: s + a[..., k] * b[..., k], range(1, a.shape[-1]), a[..., 0] * b[..., 0]
    )


def cross(a, b):
    """`a × b` of `(..., 3)` vectors."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def matvec(A, v):
    """`A @ v` for `A (..., m, n)`, `v (..., n)`."""
    return jnp.stack([dot(A[..., i, :], v) for i in range(A.shape[-2])], axis=-1)


def matmul(A, B):
    """`A @ B` for `(..., m, k)` and `(..., k, n)`."""
    m, k, n = A.shape[-2], A.shape[-1], B.shape[-1]

    def entry(i, j):
        return functools.reduce(
            lambda s, l: s + A[..., i, l] * B[..., l, j], range(1, k), A[..., i, 0] * B[..., 0, j]
        )

    rows = [jnp.stack([entry(i, j) for j in range(n)], axis=-1) for i in range(m)]
    return jnp.stack(rows, axis=-2)


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
    adj = jnp.stack([cross(c1, c2), cross(c2, c0), cross(c0, c1)], axis=-2)
    det = dot(c0, adj[..., 0, :])
    # one division and nine products, not nine divisions (a division costs several products)
    return adj * (1.0 / det)[..., None, None]


def solve(A, b):
    """Solve `A x = b` for one small system: `A (n, n)`, `b (n,)`.

    n ≤ 3 by cofactors (Cramer): plain arithmetic that fuses under an ensemble `vmap`.
    Larger n by LU with partial pivoting (`jnp.linalg.solve`, LAPACK on CPU, batched over a
    `vmap`). Measured on CPU against Gauss–Jordan elimination in a `fori_loop`: BBTRAPWD
    (n = 6, 10⁴ members) 1.3× faster; Gauss6 on the galactic orbit (n = 18) 3× faster for one
    trajectory and 7.5× for 10³; an elimination unrolled at trace time took minutes to
    compile at n = 18. Linear in `b`, so reverse-mode derivatives through `Newton` work.
    Leading batch axes are accepted, `A (..., n, n)` and `b (..., n)`: `BlockDiagonal`
    solves its N blocks in one call (a batched LU above n = 3).
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
        return matvec(inv3(A), b)
    return jnp.linalg.solve(A, b[..., None])[..., 0]
