"""The linear solvers of `Newton`: how each update `J Δx = −r` is formed and solved.

A solver lays the unknowns (any pytree) out as one array, linearises the residual there,
solves with that linearisation, and solves the linear system of the implicit-function gradient
(`tangent_solve`, always exact: gradients never inherit an approximate Jacobian).

- `Auto` (the default): the fast path for ensembles of single bodies. Closed form for n ≤ 3,
  LU above, the Jacobian from one `jacfwd`.
- `DenseLU`: the dense Jacobian (`jacfwd`) and LU (`jnp.linalg.solve`) at any size.
- `BlockDiagonal`: N bodies with b unknowns each, the Jacobian's diagonal blocks only, from
  b coloured JVPs, solved as N small systems: cost linear in N.
- `Krylov`: matrix-free GMRES on the JVP.
- `StageJacobian`: the simplified Newton of the implicit Runge–Kutta stage equations
  (Hairer & Wanner II §IV.8), per body: the residual premultiplied by `M⁻¹`,
  `M = I − h A ⊗ D` with the per-body Jacobian blocks `D` (`body_blocks`).
- `StructureDefault`: no solver of its own; it stands for the one the model's structure
  declares (`stage_linear_solver`), resolved by the integrator at each step.
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
    """`max |v_i|` of a small flat vector, as a chain of elementwise maxima up to 3 entries:
    under `vmap` XLA fuses it into its neighbours, where a reduction would be its own pass over
    an ensemble. Above, where the LU solve is a pass of its own anyway, one reduction: the
    chain's slices and maxima grew the unreduced ball's 13-unknown programs by a twentieth
    (design note 59). The same value either way (a maximum does not round)."""
    if v.shape[0] > 3:
        return jnp.max(jnp.abs(v))
    return functools.reduce(jnp.maximum, [jnp.abs(v[i]) for i in range(v.shape[0])])


def value_and_jacobian(f, x):
    """`f(x)` and its Jacobian by forward-mode autodiff: one `jax.jacfwd`, the JVP traced once
    and batched over the unit vectors, the residual's value carried as its aux (traced once).
    At every size: unrolled JVP columns (one linearisation, then one evaluation of it per
    column) built slower at 6 unknowns (MKRK, BBTRAPWD), and at 3 (IMIDM, IMID, bEM, DMV)
    built the gradients slower and ran a full Newton's ensemble up to twice as long
    (bench/README.md, `newton_jacobian_build.py`; design notes 33 and 49)."""
    J, r = jax.jacfwd(lambda z: (lambda r: (r, r))(f(z)), has_aux=True)(x)
    return r, J


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

    def resolve(self, default: AbstractLinearSolver) -> AbstractLinearSolver:
        """The solver Newton runs where a model's structure declares `default`: this one
        (`StructureDefault` stands for `default`)."""
        del default
        return self

    def stage_preconditioner(self, blocks, h, a):
        """`r ↦ P r` on stage residuals `(..., s, w)` of an implicit Runge–Kutta step: Newton
        solves `P r(Z) = 0`, whose root is the stages' (`P` invertible). Default: the identity
        (Newton solves the stage residual itself). `blocks()`: the Jacobian blocks
        `D (..., w, w)` of the vector field at the step's start (per body along a body axis,
        one block without one), called only by a solver that uses them; `h` the step, `a` the
        table's `A (s, s)` (NumPy)."""
        del blocks, h, a
        return _identity


class Auto(AbstractLinearSolver):
    """The default, for small dense systems (the implicit steps of single bodies): the
    Jacobian from one `jacfwd` (`value_and_jacobian`), solved in closed
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
        return value_and_jacobian(f, x)

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
    # Up to 3 unknowns (the closed-form solve) a product per column: one `vmap`ped product
    # ran 10⁴–10⁵ bodies' Newton 1.6–1.7× as long at b = 3. Above, one `vmap`ped product: at
    # b = 4–6 (LU) it ran in 0.81–0.87× the unrolled products' time and compiled no slower
    # (bench/README.md, `block_columns.py`; design note 50).
    if b > 3:
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


def body_blocks(f, y, reach: int):
    """`D (B, w, w)`, `D_n = ∂f_n/∂y_n`, of a map `f` on `(B, w)` arrays whose `f_n` depends on
    the bodies `n − reach … n + reach` only: `reach + 1` colours of `w` JVPs each, a unit
    tangent on every body of one colour (`n mod (reach + 1)`) at once, exact because no two
    bodies of a colour are within reach of each other (for `reach = 1`, parity). The JVPs run
    one after another (`lax.map`): on the CPU faster than their `vmap` on long chains, and
    quicker to compile than an unrolled loop (bench/README.md, "Measurements behind the
    source's design choices")."""
    n, w = y.shape
    colours = reach + 1
    colour = (jnp.arange(n) % colours)[:, None]
    basis = jnp.eye(w, dtype=y.dtype)
    tangents = jnp.stack(
        [jnp.where(colour == c, basis[k][None, :], 0.0) for c in range(colours) for k in range(w)]
    )  # (colours·w, n, w)
    _, jvp = jax.linearize(f, y)
    cols = jax.lax.map(jvp, tangents).reshape(colours, w, n, w)  # (colour, k, body, row)
    own = cols[colours - 1]
    for c in reversed(range(colours - 1)):
        own = jnp.where(colour[None, :, :] == c, cols[c], own)  # (k, body, row)
    return jnp.transpose(own, (1, 2, 0))  # (body, row, k)


def _stage_inverse(D, h, a):
    """`r ↦ M⁻¹ r` for `r (..., s, w)`, `M = I − h A ⊗ D` per block `D (..., w, w)`: with
    `A = TΛT⁻¹`, `M⁻¹ = (T ⊗ I) diag_i (I − hλ_i D)⁻¹ (T⁻¹ ⊗ I)` (Hairer & Wanner II §IV.8).
    For real `r` the components of a conjugate pair `λ, λ̄` are conjugate, so one inverse per
    pair is formed (Gauss6: one real eigenvalue and a pair, 2 complex `w×w` inverses per
    block) and the pair's term is twice the real part of one."""
    lam, T = np.linalg.eig(np.asarray(a, np.float64))
    Tinv = np.linalg.inv(T)
    keep = [i for i in range(len(lam)) if lam[i].imag >= 0]  # reals and one of each pair
    weight = np.where(lam[keep].imag > 0, 2.0, 1.0)
    cdtype = jnp.result_type(D.dtype, jnp.complex64)
    lam_k = jnp.asarray(lam[keep], cdtype)
    T_k = jnp.asarray(T[:, keep] * weight[None, :], cdtype)  # (s, kept)
    Tinv_k = jnp.asarray(Tinv[keep, :], cdtype)  # (kept, s)
    lead = (None,) * (D.ndim - 2)  # the body axis, if any
    eye = jnp.eye(D.shape[-1], dtype=cdtype)[lead + (None,)]
    blocks = eye - (h * lam_k)[lead + (slice(None), None, None)] * D[..., None, :, :].astype(cdtype)
    inv = jnp.linalg.inv(blocks)  # (..., kept, w, w)

    def apply(r):
        u = jnp.einsum("ij,...jk->...ik", Tinv_k, r.astype(cdtype))
        v = jnp.einsum("...ikl,...il->...ik", inv, u)
        return jnp.real(jnp.einsum("ij,...jk->...ik", T_k, v)).astype(r.dtype)

    return apply


class StageJacobian(AbstractLinearSolver):
    """The simplified Newton iteration of the implicit Runge–Kutta stage equations (Hairer &
    Wanner II §IV.8), block by block: once per step the stage residual is premultiplied by
    `M⁻¹`, `M = I − h A ⊗ D` with `D` the Jacobian blocks of the field at `y₀` (per body,
    `body_blocks`, along a body axis; the whole Jacobian without one), inverted through the
    eigenvalues of `A` (`_stage_inverse`); each iteration is then one residual evaluation and
    `x ← x − M⁻¹ r(x)`, so this solver's own solve is the identity. Along a body axis the
    neighbours' coupling is left out of `M` (block Jacobi: linear convergence at a rate
    `O(h²)` of the coupling), and the cost is linear in the number of bodies. The default of
    a chain's Gauss methods (`AbstractCanonicalChain.stage_linear_solver`); for a solver that
    is not an implicit Runge–Kutta method's, a fixed-point iteration. The gradient's
    `tangent_solve` is exact: GMRES (`tangent`, a `Krylov`'s settings) on the true Jacobian of
    the preconditioned residual, which is close to the identity."""

    tangent: Krylov = eqx.field(default=Krylov(), static=True)

    def linearise(self, f, x):
        return f(x), None

    def solve(self, op, r):
        return r

    def tangent_solve(self, g, y):
        return self.tangent.tangent_solve(g, y)

    def stage_preconditioner(self, blocks, h, a):
        return _stage_inverse(blocks(), lax.stop_gradient(h), a)


class StructureDefault(AbstractLinearSolver):
    """The linear solver the model's structure declares for its stage equations
    (`stage_linear_solver`: `Auto()` for a canonical Hamiltonian system, `StageJacobian()` for
    a chain of bodies), resolved by the implicit Runge–Kutta methods at each step (`resolve`):
    their default `newton`'s solver. Not a solver itself: unresolved, Newton refuses it."""

    def resolve(self, default: AbstractLinearSolver) -> AbstractLinearSolver:
        return default

    def layout(self, guess):
        raise TypeError(
            "StructureDefault() stands for a model structure's linear solver and is resolved "
            "by the implicit Runge–Kutta methods; elsewhere give a solver (Auto, DenseLU, "
            "BlockDiagonal, Krylov, StageJacobian)"
        )

    def linearise(self, f, x):
        return self.layout(x)

    def solve(self, op, r):
        return self.layout(r)

    def tangent_solve(self, g, y):
        return self.layout(y)
