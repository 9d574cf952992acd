"""Small dense linear algebra: closed forms for the 3×3 systems of the rotation integrators.

Newton systems in jaxrigid are 3×3 (the Lie-group and DMV steps: solved by cofactors, no LAPACK
call per ensemble member, DESIGN.md "Speed is part of the contract") to a few dozen unknowns
(Gauss6 stages, RATTLE, coupled bodies: LU with partial pivoting, `jnp.linalg.solve`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# Component-wise small-vector algebra. Each result is built from scalar components with
# `jnp.stack`, never with `dot`, `einsum` or a reduction over the last axis: under `vmap` over
# an ensemble, XLA's simplifier cancels the stack/slice pairs between consecutive calls and the
# compiled step is elementwise loops over the members, laid out component-major (`f64[3, N]`),
# where a batched `dot` per member or an `(N, 3)` minor-axis reduction would be a pass over the
# ensemble of its own. `python bench/hlo_census.py "jr.IMIDM()"` counts the compiled run's
# fusions, dots (none) and reductions.


def _operands(a, b):
    """`(a, b)` as a `lax` primitive takes them where it computes what the operator would:
    arrays (tracers included) of one shape, dtype and weak type, or a floating array of a
    strong type and a Python number (which the operator takes in the array's dtype, as
    here); else `None`."""
    if isinstance(a, jax.Array):
        if isinstance(b, jax.Array):
            same = a.shape == b.shape and a.dtype == b.dtype and _weak(a) == _weak(b)
            return (a, b) if same and _weak(a) is not None else None
        if _number(b) and _strong_float(a):
            return a, np.asarray(b, a.dtype)
    elif _number(a) and isinstance(b, jax.Array) and _strong_float(b):
        return np.asarray(a, b.dtype), b
    return None


def _number(x) -> bool:
    return isinstance(x, float | int) and not isinstance(x, bool)


def _strong_float(x) -> bool:
    return _weak(x) is False and x.dtype in (np.float64, np.float32)


def _weak(x) -> bool | None:
    """`x`'s weak type (`None` where an array type does not say)."""
    return getattr(x, "weak_type", None)


# The algebra's products and sums by the primitives themselves where `_operands` allows (every
# product and sum of the component algebra): `*`, `+` and `-` on jax arrays go through
# jax.numpy's ufuncs, each a nested `jit` staged and inlined at every call, several times a
# primitive's trace time, and an implicit step makes hundreds (bench/README.md, "The
# operators' trace time"). The program is the same. Anything else takes the operator.
def mul(a, b):
    """`a * b`."""
    ops = _operands(a, b)
    return a * b if ops is None else lax.mul(*ops)


def add(a, b):
    """`a + b`."""
    ops = _operands(a, b)
    return a + b if ops is None else lax.add(*ops)


def sub(a, b):
    """`a - b`."""
    ops = _operands(a, b)
    return a - b if ops is None else lax.sub(*ops)


def components(v):
    """The last axis of `v (..., n)` as `n` arrays `(...)`: one slice each, taken once per
    call (indexing inside the products would slice the same entry once per use), by one
    `lax.split` (`_split`)."""
    return _split(v, v.ndim - 1)


def _split(v, axis):
    """`v`'s entries along `axis`, that axis dropped, by one `lax.split`. The compiled forward
    program is the same as with a slice per entry (`lax.index_in_dim`; the forward programs of
    `bench/compile_cost.py` compile to the same instructions), but the transpose is one
    `concatenate` of the entries' cotangents, where a slice per entry transposes to a
    zero-padded array each and their sum, a pad per entry that made the reverse pass of an
    IMIDM step markedly slower (bench/README.md, "Measurements behind the source's design
    choices")."""
    parts = lax.split(v, (1,) * v.shape[axis], axis)
    return [lax.squeeze(p, (axis,)) for p in parts]


def entries(A):
    """`A (..., m, n)` as rows of its `m × n` entries `(...)`, each sliced once."""
    return [components(row) for row in _split(A, A.ndim - 2)]


def matrix_entries(A):
    """`A (..., m, n)` as rows of its entries `(...)`, each one slice straight from `A`.

    `matmul`'s form: through `entries` (a row sliced, then its entries), XLA:CPU copied out
    each row of the carried attitude (a value with three users) under `vmap`, and LP-split's
    compositions ran markedly slower; slicing straight from the matrix in `entries` too
    slowed IMIDM's step (its `inv3`, `det3`; both in bench/README.md, "LP-split's run-time
    regression"). Rows
    and then entries by `lax.split`, no reshape between: XLA merges the two slices into the
    one of each entry (the same compiled forward program), and the transpose is two
    `concatenate`s, not a zero-padded matrix per entry (`_split`)."""
    *batch, m, n = A.shape
    rows = lax.split(A, (1,) * m, A.ndim - 2)  # (..., 1, n): no reshape between the slices
    return [
        [lax.reshape(e, tuple(batch)) for e in lax.split(row, (1,) * n, A.ndim - 1)] for row in rows
    ]


def stack_entries(rows):
    """The `(..., m, n)` matrix of rows of entries `(...)` (the inverse of `entries`)."""
    return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)


def _sum_of_products(pairs):
    return functools.reduce(
        lambda s, ab: add(s, mul(ab[0], ab[1])), pairs[1:], mul(pairs[0][0], pairs[0][1])
    )


def dot(a, b):
    """`a · b` over the last axis, `(..., n) -> (...)`."""
    return _sum_of_products(list(zip(components(a), components(b))))


def cross3(a, b):
    """`a × b` on lists of the three components (arrays `(...)`)."""
    a0, a1, a2 = a
    b0, b1, b2 = b
    return [
        sub(mul(a1, b2), mul(a2, b1)),
        sub(mul(a2, b0), mul(a0, b2)),
        sub(mul(a0, b1), mul(a1, b0)),
    ]


def cross(a, b):
    """`a × b` of `(..., 3)` vectors."""
    return jnp.stack(cross3(components(a), components(b)), axis=-1)


class Vec3(NamedTuple):
    """A 3-vector as its three components (arrays of any common shape), with the arithmetic
    written on them: `+`, scalar `*`, `cross`, `dot`; `of` and `stack` convert from and to
    `(..., 3)`. `RollingBall.omega_dot` uses it, so that (B.8) reads as written and compiles
    to scalar arithmetic."""

    x: jax.Array
    y: jax.Array
    z: jax.Array
    # a numpy scalar times a `Vec3` is `__rmul__`, not an array (a class attribute, not the
    # field mypy takes every assignment in a NamedTuple body for)
    __array_ufunc__ = None  # type: ignore[misc]

    @classmethod
    def of(cls, v):
        return cls(v[..., 0], v[..., 1], v[..., 2])

    def stack(self):
        return jnp.stack(self, axis=-1)

    def __add__(self, other):
        return Vec3(add(self.x, other.x), add(self.y, other.y), add(self.z, other.z))

    def __rmul__(self, k):
        return Vec3(mul(k, self.x), mul(k, self.y), mul(k, self.z))

    def cross(self, b):
        return Vec3(*cross3(self, b))

    def dot(self, b):
        return _sum_of_products(list(zip(self, b)))


def matvec(A, v):
    """`A @ v` for `A (..., m, n)`, `v (..., n)`."""
    vs = components(v)
    return jnp.stack([_sum_of_products(list(zip(row, vs))) for row in entries(A)], axis=-1)


def matmul(A, B):
    """`A @ B` for `(..., m, k)` and `(..., k, n)`."""
    a = matrix_entries(A)
    b_cols = list(zip(*matrix_entries(B)))
    return stack_entries([[_sum_of_products(list(zip(r, c))) for c in b_cols] for r in a])


def det3(A):
    """Determinant of `(..., 3, 3)`."""
    (a00, a01, a02), (a10, a11, a12), (a20, a21, a22) = entries(A)
    return (
        a00 * (a11 * a22 - a12 * a21)
        - a01 * (a10 * a22 - a12 * a20)
        + a02 * (a10 * a21 - a11 * a20)
    )


def eigvalsh3(A):
    """Eigenvalues of symmetric `(..., 3, 3)` in ascending order, in closed form (Smith, CACM 4,
    1961: the roots of the characteristic cubic by trigonometry), elementwise over an ensemble
    with no LAPACK call. For quoting in messages: near a repeated eigenvalue the formula loses
    half the digits (error ~√eps of the largest |eigenvalue|); decide definiteness with
    `positive_definite3`."""
    a00, a11, a22 = A[..., 0, 0], A[..., 1, 1], A[..., 2, 2]
    a01, a02, a12 = A[..., 0, 1], A[..., 0, 2], A[..., 1, 2]
    q = (a00 + a11 + a22) / 3
    off = a01 * a01 + a02 * a02 + a12 * a12
    d0, d1, d2 = a00 - q, a11 - q, a22 - q
    p = jnp.sqrt((d0 * d0 + d1 * d1 + d2 * d2 + 2 * off) / 6)
    safe_p = jnp.where(p > 0, p, 1.0)  # p = 0: A = q·1, all three eigenvalues q
    b00, b11, b22 = d0 / safe_p, d1 / safe_p, d2 / safe_p
    b01, b02, b12 = a01 / safe_p, a02 / safe_p, a12 / safe_p
    det_b = (
        b00 * (b11 * b22 - b12 * b12)
        - b01 * (b01 * b22 - b12 * b02)
        + b02 * (b01 * b12 - b11 * b02)
    )
    phi = jnp.arccos(jnp.clip(det_b / 2, -1.0, 1.0)) / 3
    largest = q + 2 * p * jnp.cos(phi)
    smallest = q + 2 * p * jnp.cos(phi + 2 * jnp.pi / 3)
    middle = 3 * q - largest - smallest
    return jnp.stack([smallest, middle, largest], axis=-1)


def positive_definite3(A, shift=0.0):
    """Whether symmetric `(..., 3, 3)` `A + shift·1` is positive definite, by Sylvester's
    criterion (all leading principal minors positive): elementwise, and accurate to a few eps
    of `|A|³` in the determinant, where the closed-form eigenvalues are not."""
    a00, a11, a22 = A[..., 0, 0] + shift, A[..., 1, 1] + shift, A[..., 2, 2] + shift
    a01, a02, a12 = A[..., 0, 1], A[..., 0, 2], A[..., 1, 2]
    minor2 = a00 * a11 - a01 * a01
    minor3 = (
        a00 * (a11 * a22 - a12 * a12)
        - a01 * (a01 * a22 - a12 * a02)
        + a02 * (a01 * a12 - a11 * a02)
    )
    return (a00 > 0) & (minor2 > 0) & (minor3 > 0)


def inv3(A):
    """Inverse of `(..., 3, 3)` by cofactors: rows of the adjugate are cross products of columns."""
    c0, c1, c2 = (list(column) for column in zip(*entries(A)))
    adj = [cross3(c1, c2), cross3(c2, c0), cross3(c0, c1)]
    det = _sum_of_products(list(zip(c0, adj[0])))
    # one division and nine products, not nine divisions (a division costs several products)
    # (scaling the stacked matrix, not entry by entry, is bit-identical across batch shapes;
    # the entry-wise form differed by an ulp between (20,) and (4, 5) batches)
    return stack_entries(adj) * (1.0 / det)[..., None, None]


def solve(A, b):
    """Solve `A x = b` for one small system: `A (n, n)`, `b (n,)`.

    n ≤ 3 by cofactors (Cramer): plain arithmetic that fuses under an ensemble `vmap`.
    Larger n by LU with partial pivoting (`jnp.linalg.solve`, LAPACK on CPU, batched over a
    `vmap`): on the CPU it runs faster than Gauss–Jordan elimination in a `fori_loop`, the
    more so the larger `n` and the ensemble, and an elimination unrolled at trace time
    compiles far longer (bench/README.md, "Measurements behind the source's design choices").
    Linear in `b`, so reverse-mode derivatives through `Newton` work.
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
