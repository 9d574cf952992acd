"""The linear solvers of `Newton`: how each update `J Δx = −r` is formed and solved.

A solver lays the unknowns (any pytree) out as one array, linearises the residual there,
solves with that linearisation, and solves the linear system of the implicit-function gradient
(`tangent_solve`, always exact: gradients never inherit an approximate Jacobian).

- `Auto` (the default): the fast path for ensembles of single bodies. Closed form for n ≤ 3,
  LU above, the Jacobian column by column from JVPs up to 3 unknowns (`jacfwd` above).
- `DenseLU`: the dense Jacobian (`jacfwd`) and LU (`jnp.linalg.solve`) at any size.
- `BlockDiagonal`: N bodies with b unknowns each, the Jacobian's diagonal blocks only, from
  b coloured JVPs, solved as N small systems: cost linear in N.
- `Krylov`: matrix-free GMRES on the JVP.
"""

from __future__ import annotations

import abc
import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.flatten_util import ravel_pytree
from jax.scipy.sparse.linalg import gmres

from . import _linalg


def max_abs(v):
    """`max |v_i|` of a small flat vector, as a chain of elementwise maxima: under `vmap` XLA
    fuses it into its neighbours, where a reduction would be its own pass over an ensemble."""
    return functools.reduce(jnp.maximum, [jnp.abs(v[i]) for i in range(v.shape[0])])


def _jacfwd_and_value(f, x):
    """`(J, f(x))` from one `jax.jacfwd`, the residual traced once (its value is the aux)."""
    return jax.jacfwd(lambda z: (lambda r: (r, r))(f(z)), has_aux=True)(x)


def value_and_jacobian(f, x):
    """`f(x)` and its Jacobian by forward-mode autodiff. Up to 3 unknowns column by column
    from `n` JVPs along the unit vectors: unlike `jax.jacfwd` (a `vmap` of the JVP over the
    basis) every column stays a separate small vector, so under an ensemble `vmap` the closed-
    form solve that follows is plain elementwise arithmetic (see `_linalg`). Larger systems
    use `jacfwd`, whose program does not grow with `n`: at 6 unknowns the unrolled columns
    build an ensemble's run slower and it runs no faster (bench/README.md,
    `newton_jacobian_build.py`)."""
    n = x.shape[0]
    if n > 3:
        J, r = _jacfwd_and_value(f, x)
        return r, J
    r, f_jvp = jax.linearize(f, x)
    basis = jnp.eye(n, dtype=x.dtype)
    return r, jnp.stack([f_jvp(basis[j]) for j in range(n)], axis=-1)


def _identity(x):
    return x


def _flat_layout(guess):
    """A flat vector as it is (no ops, so the flat fast path compiles as before), any other
    pytree through `ravel_pytree`."""
    if isinstance(guess, (jax.Array, np.ndarray)) and guess.ndim == 1 and guess.size > 0:
        return guess, _identity, _identity
    flat, unravel = ravel_pytree(guess)
    if flat.size == 0:
        raise ValueError("Newton needs at least one unknown; the guess has no array entries")
    return flat, lambda tree: ravel_pytree(tree)[0], unravel


class AbstractLinearSolver(eqx.Module):
    """How Newton lays out the unknowns, linearises the residual and solves with it."""

    def layout(self, guess):
        """`(x0, to_array, from_array)`: the unknowns as one array, and the maps between a
        pytree shaped like `guess` and that array. Default: one flat vector."""
        return _flat_layout(guess)

    @abc.abstractmethod
    def linearise(self, f, x):
        """`(f(x), op)`: the residual and what `solve` needs of its Jacobian at `x`."""

    @abc.abstractmethod
    def solve(self, op, r):
        """`J⁻¹ r` (exactly or approximately) for the `op` of `linearise`."""

    @abc.abstractmethod
    def tangent_solve(self, g, y):
        """Exact solve of `g(x) = y` for the linear map `g` (the Jacobian at the root):
        the implicit-function derivative of `Newton`. Must be linear (transposable) in `y`."""

    def norm(self, v):
        """`max |v|`, for the stopping rule."""
        return jnp.max(jnp.abs(v))


class Auto(AbstractLinearSolver):
    """The default, for small dense systems (the implicit steps of single bodies): the
    Jacobian column by column from JVPs up to 3 unknowns (`jacfwd` above), solved in closed
    form for n ≤ 3 (cofactors: plain arithmetic that fuses under an ensemble `vmap`) and by LU
    above (`_linalg.solve`). The stopping rule's norm is an unrolled chain of maxima."""

    def linearise(self, f, x):
        return value_and_jacobian(f, x)

    def solve(self, op, r):
        return _linalg.solve(op, r)

    def tangent_solve(self, g, y):
        return _linalg.solve(value_and_jacobian(g, jnp.zeros_like(y))[1], y)

    def norm(self, v):
        return max_abs(v)


class DenseLU(AbstractLinearSolver):
    """The dense Jacobian (`jax.jacfwd`) and LU with partial pivoting (`jnp.linalg.solve`) at
    any size: O(n²) memory and O(n³) time, for coupled systems of up to a few thousand
    unknowns."""

    def linearise(self, f, x):
        J, r = _jacfwd_and_value(f, x)
        return r, J

    def solve(self, op, r):
        return jnp.linalg.solve(op, r[..., None])[..., 0]

    def tangent_solve(self, g, y):
        return self.solve(jax.jacfwd(g)(jnp.zeros_like(y)), y)


class Krylov(AbstractLinearSolver):
    """Matrix-free GMRES (`jax.scipy.sparse.linalg.gmres`) on the JVP: no Jacobian is stored,
    each GMRES iteration costs one JVP. For large systems with no block structure to exploit.

    `rtol`, `atol`: GMRES's own stopping rule, `|J Δx − r| ≤ max(rtol·|r|, atol)` (2-norms;
    `rtol=None` is `eps^(3/4)` of the dtype: an inexact Newton step with relative error η
    converges linearly at rate ~η, so a tight inner tolerance keeps Newton's quadratic rate).
    Newton's own tolerance decides convergence. `restart`: the Krylov space's dimension
    before a restart; `maxiter`: the number of restarts (`None`: GMRES's default, 10 n).
    """

    rtol: float | None = eqx.field(default=None, static=True)
    atol: float = eqx.field(default=0.0, static=True)
    restart: int = eqx.field(default=20, static=True)
    maxiter: int | None = eqx.field(default=None, static=True)

    def gmres(self, matvec, b, preconditioner=None, strict=False):
        """GMRES on `matvec(x) = b` from zero with these settings. `strict`: a solve whose
        true residual `|matvec(x) − b|` misses 100× the stopping rule (GMRES ran out of
        `maxiter` restarts) returns NaN, not an inexact `x`: a gradient is never silently
        wrong. (Newton's own solves are not strict: an inexact Newton step is still a step,
        and Newton's tolerance decides convergence.)"""
        rtol = float(jnp.finfo(b.dtype).eps) ** 0.75 if self.rtol is None else self.rtol
        x, _ = gmres(
            matvec,
            b,
            tol=rtol,
            atol=self.atol,
            restart=self.restart,
            maxiter=self.maxiter,
            M=preconditioner,
        )
        if not strict:
            return x
        residual = jnp.linalg.norm(matvec(x) - b)
        missed = residual > 100 * jnp.maximum(rtol * jnp.linalg.norm(b), self.atol)
        return jnp.where(missed, jnp.nan, x)

    def linearise(self, f, x):
        return jax.linearize(f, x)

    def solve(self, op, r):
        return self.gmres(op, r)

    def tangent_solve(self, g, y):
        # GMRES scales its tolerance by |y|, which is not linear in y: inside
        # custom_linear_solve y is a primal value and the solve is transposed as a whole.
        strict = functools.partial(self.gmres, strict=True)
        return lax.custom_linear_solve(g, y, strict, strict)


def _diagonal_blocks(lin, x):
    """The `(N, b, b)` diagonal blocks of the linear map `lin` on `(N, b)` arrays, from b
    products: a tangent with a unit entry j in every block at once gives column j of all N
    blocks (exact when `lin` is block diagonal; else each block gains the sum of its row's
    off-diagonal blocks' column j)."""
    b = x.shape[-1]
    basis = jnp.eye(b, dtype=x.dtype)
    if b > 6:  # as `value_and_jacobian`: keep the program's size independent of b
        cols = jax.vmap(lambda e: lin(jnp.broadcast_to(e, x.shape)))(basis)
        return jnp.moveaxis(cols, 0, -1)
    return jnp.stack([lin(jnp.broadcast_to(basis[j], x.shape)) for j in range(b)], axis=-1)


class BlockDiagonal(AbstractLinearSolver):
    """For N bodies with b unknowns each: every leaf of the unknowns has the same leading
    (body) axis N, and body i's unknowns are the i-th rows of all leaves, `(N, b)` in all.

    Newton's linear system keeps only the Jacobian's N diagonal `b×b` blocks, formed with b
    JVPs by colouring (`_diagonal_blocks`) and solved as N small systems (closed form for
    b ≤ 3, batched LU above): cost linear in N. Exact Newton when the Jacobian is block
    diagonal (quadratic convergence); for weakly coupled bodies an inexact (quasi-)Newton
    iteration that converges linearly, at a rate set by the coupling, to the same root.

    The gradient's `tangent_solve` would be wrong with the approximate Jacobian, so it solves
    with the true one: GMRES (`tangent`, a `Krylov`'s settings) preconditioned by the inverse
    diagonal blocks, which for weak coupling converges in a few iterations at linear cost.
    """

    tangent: Krylov = eqx.field(default=Krylov(), static=True)

    def layout(self, guess):
        leaves, treedef = jax.tree.flatten(guess)
        leaves = [jnp.asarray(leaf) for leaf in leaves]
        shapes = [leaf.shape for leaf in leaves]
        if not leaves or any(len(s) == 0 or s[0] != shapes[0][0] for s in shapes):
            raise ValueError(
                "BlockDiagonal needs every leaf of the unknowns to have the same leading "
                f"(body) axis N; got leaf shapes {shapes}"
            )
        n = shapes[0][0]
        sizes = [math.prod(s[1:]) for s in shapes]
        if n == 0 or sum(sizes) == 0:
            raise ValueError(f"BlockDiagonal needs N ≥ 1 bodies with unknowns; got {shapes}")
        dtype = jnp.result_type(*leaves)
        splits = np.cumsum(sizes)[:-1].tolist()

        def to_array(tree):
            return jnp.concatenate(
                [jnp.reshape(leaf, (n, -1)).astype(dtype) for leaf in jax.tree.leaves(tree)],
                axis=1,
            )

        def from_array(x):
            parts = jnp.split(x, splits, axis=1)
            return jax.tree.unflatten(
                treedef,
                [p.reshape(s).astype(leaf.dtype) for p, s, leaf in zip(parts, shapes, leaves)],
            )

        return to_array(leaves), to_array, from_array

    def linearise(self, f, x):
        r, f_jvp = jax.linearize(f, x)
        return r, _diagonal_blocks(f_jvp, x)

    def solve(self, op, r):
        return _linalg.solve(op, r)

    def tangent_solve(self, g, y):
        def preconditioned(matvec, b):
            blocks = _diagonal_blocks(matvec, b)
            return self.tangent.gmres(matvec, b, lambda v: _linalg.solve(blocks, v), strict=True)

        return lax.custom_linear_solve(g, y, preconditioned, preconditioned)
