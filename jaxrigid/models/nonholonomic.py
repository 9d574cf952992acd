"""Nonholonomic mechanics by autodiff: the Lagrange–d'Alembert equations (Putkaradze & Rogers
2018, App. A, (A.32)–(A.33)) of a Lagrangian `L(q, q̇, t)` on coordinates `q ∈ ℝⁿ`, with `m`
velocity constraints affine in `q̇` and generalised forces `Q(q, q̇, t)`:

    d/dt ∂L/∂q̇ − ∂L/∂q = Q + Aᵀλ,      A(q, t) q̇ + a(q, t) = 0.

Differentiating the constraint once in time and writing `d/dt ∂L/∂q̇ = M q̈ + ṗ` gives the saddle
(KKT) system solved here,

    [ M   −Aᵀ ] [ q̈ ]   [ Q + ∂L/∂q − ṗ ]         M = ∂²L/∂q̇²,
    [ A    0  ] [ λ  ] = [ −(Ȧ q̇ + ȧ)    ],        ṗ = ∂²L/∂q̇∂q q̇ + ∂²L/∂q̇∂t,

every term by `jax` autodiff (`Ȧ q̇ + ȧ` is one JVP of the constraint along `(q̇, 1)`). `λ`
carries the sign of (A.33): `Aᵀλ` is the generalised constraint force. For a row `ẋ − … = 0` of a
point `x` the multiplier is the force the constraint exerts at it (for a rolling ball, the
contact force).

Holonomic constraints enter differentiated: for a unit quaternion `|q|² = 1` becomes
`q · q̇ = 0`, and with `Ω = 2 Im(q* q̇)` (`quaternion_angular_velocity`) the kinetic energy of a
rigid body is a Lagrangian in `q̇`, valid for every attitude (no chart, no gimbal lock).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ..lie import quaternion
from .base import Check, event_ndims, finite
from .structures import AbstractLagrangeDAlembert

__all__ = [
    "Derivatives",
    "LagrangeDAlembertState",
    "LagrangeDAlembertSystem",
    "callable_parameter",
    "quaternion_angular_velocity",
    "quaternion_rate",
    "saddle",
]


# --- small pure helpers --------------------------------------------------------------------


def quaternion_angular_velocity(q, qdot):
    """Body angular velocity `Ω = 2 Im(q* q̇)` (the inverse of (D.21)). `(..., 4) -> (..., 3)`.

    Linear in `q̇`; for a unit `q` and a tangent `q̇` (`q · q̇ = 0`) it is the exact `Ω`."""
    return 2.0 * quaternion.conjugate_product_imag(q, qdot)


def quaternion_rate(q, Omega):
    """`q̇ = ½ q Ω♯` (D.21). `(..., 4), (..., 3) -> (..., 4)`."""
    pure = jnp.concatenate([jnp.zeros_like(Omega[..., :1]), Omega], axis=-1)
    return 0.5 * quaternion.multiply(q, pure)


def callable_parameter(f):
    """A callable as a model field: an `equinox.Module` stays a pytree (its arrays are traced,
    differentiable parameters); a plain function is wrapped in `jax.tree_util.Partial`, which
    keeps it out of the traced leaves (so `jax.jit` can take the model as an argument)."""
    if f is None or isinstance(f, eqx.Module | jax.tree_util.Partial):
        return f
    if not callable(f):
        raise TypeError(f"expected a callable, got {type(f).__name__}")
    return jax.tree_util.Partial(f)


def as_time(t, q):
    """`t` as an inexact array (JVPs along time need a float); the dtype follows `t` and `q`."""
    t = jnp.asarray(t)
    return t if jnp.issubdtype(t.dtype, jnp.inexact) else t.astype(q.dtype)


# --- the engine ------------------------------------------------------------------------------


class Derivatives(NamedTuple):
    """The derivatives of (A.33) at one `(q, q̇, t)` (`LagrangeDAlembertSystem.derivatives`):
    `∂L/∂q`, `p = ∂L/∂q̇`, `M = ∂²L/∂q̇²`, `ṗ = ∂²L/∂q̇∂q q̇ + ∂²L/∂q̇∂t`, the constraint's
    value `c = A q̇ + a`, `A = ∂c/∂q̇` and `Ȧ q̇ + ȧ` (its derivative along `(q̇, 1)`)."""

    dL_dq: jax.Array
    p: jax.Array
    M: jax.Array
    pdot: jax.Array
    c: jax.Array
    A: jax.Array
    cdot: jax.Array


def saddle(d: Derivatives):
    """`[[M, −Aᵀ], [A, 0]]`, `(n + m, n + m)`."""
    return _saddle(d.M, d.A)


def _saddle(M, A):
    m = A.shape[0]
    return jnp.block([[M, -A.T], [A, jnp.zeros((m, m), M.dtype)]])


def _with_value(f):
    """`x ↦ (f(x), f(x))`: `jax.jacfwd(_with_value(f), has_aux=True)` gives the Jacobian and
    the value from one trace of `f`."""

    def both(x):
        y = f(x)
        return y, y

    return both


class LagrangeDAlembertState(NamedTuple):
    """Generalised coordinates `q (..., n)` and velocities `qdot (..., n)`."""

    q: jax.Array
    qdot: jax.Array


class LagrangeDAlembertSystem(AbstractLagrangeDAlembert):
    """A mechanical system given by its Lagrangian and linear velocity constraints (A.33).

    **Fields:** `lagrangian(q, qdot, t, params) -> scalar`; `constraint(q, qdot, t, params) ->
    (m,)`, affine in `qdot` (`A(q, t) q̇ + a(q, t)`: `A = ∂c/∂q̇` and `a = c(q, 0, t)` are read
    off by autodiff) or `None`; `params`, any pytree of arrays (the traced, differentiable
    parameters); `force(q, qdot, t, params) -> (n,)` generalised forces or `None`. The three
    callables are static configuration: put what should be swept or differentiated in `params`.
    Coordinates are flat vectors `(n,)`; the methods take one member (`jax.vmap` for more).
    """

    state_type: ClassVar[type] = LagrangeDAlembertState
    time_dependent: ClassVar[bool] = True  # the vector field takes `t`
    lagrangian: Callable = eqx.field(static=True)
    constraint: Callable | None = eqx.field(static=True)
    params: Any = None
    force: Callable | None = eqx.field(default=None, static=True)

    # -- the pieces of (A.33) --

    def _L(self, q, qdot, t):
        return self.lagrangian(q, qdot, t, self.params)

    def _c(self, q, qdot, t):
        if self.constraint is None:
            return jnp.zeros((0,), q.dtype)
        return jnp.asarray(self.constraint(q, qdot, t, self.params))

    def momentum(self, t, q, qdot):
        """Generalised momentum `p = ∂L/∂q̇`, `(n,)`."""
        return jax.grad(self._L, argnums=1)(q, qdot, as_time(t, q))

    def _forward_momentum(self, t, q, qdot):
        """`∂L/∂q̇` by forward mode (`jacfwd`), to be differentiated once more, forward."""
        return jax.jacfwd(self._L, argnums=1)(q, qdot, t)

    def mass_matrix(self, t, q, qdot):
        """`M = ∂²L/∂q̇²`, `(n, n)`, forward over forward mode: XLA builds it in about half the
        time of a `jacfwd` of the momentum's `grad`, to the same values (design note 59)."""
        return jax.jacfwd(self._forward_momentum, argnums=2)(as_time(t, q), q, qdot)

    def constraint_matrix(self, t, q):
        """`(A (m, n), a (m,))` of the constraint `A q̇ + a = 0`."""
        t, zero = as_time(t, q), jnp.zeros_like(q)
        return jax.jacfwd(_with_value(lambda v: self._c(q, v, t)), has_aux=True)(zero)

    def constraint_residual(self, t, q, qdot):
        """`A q̇ + a`, `(m,)`: zero on the constraint."""
        return self._c(q, qdot, as_time(t, q))

    def generalised_force(self, t, q, qdot):
        """`Q(q, q̇, t)`, `(n,)` (zero when `force` is `None`)."""
        if self.force is None:
            return jnp.zeros_like(q)
        return jnp.asarray(self.force(q, qdot, as_time(t, q), self.params))

    def derivatives(self, t, q, qdot) -> Derivatives:
        """Every derivative of (A.33) at `(q, q̇, t)` from two passes over `L` and two over `c`:
        a JVP of `(∂L/∂q, ∂L/∂q̇)` along `(q̇, 1)` at fixed `q̇` gives
        `∂L/∂q`, `p` and `ṗ` (one of `c` gives `c` and `Ȧq̇ + ȧ`); `jacfwd` in `q̇` alone gives
        `M` and `A` (`c` is affine in `q̇`). Tangents only where they are needed: a merged
        pass along all `n + 1` directions traced `L` once but carried dense zero tangents for
        `q` and `t` through every column, which slowed the unreduced ball's RKMK4
        (bench/README.md, "The unreduced ball: the engine's derivatives in two passes")."""
        t = as_time(t, q)
        one = jnp.ones_like(t)
        gradient = lambda q_, t_: jax.grad(self._L, argnums=(0, 1))(q_, qdot, t_)  # noqa: E731
        (dL_dq, p), (_, pdot) = jax.jvp(gradient, (q, t), (qdot, one))
        c, cdot = jax.jvp(lambda q_, t_: self._c(q_, qdot, t_), (q, t), (qdot, one))
        M = self.mass_matrix(t, q, qdot)
        A = jax.jacfwd(lambda v: self._c(q, v, t))(qdot)
        return Derivatives(dL_dq, p, M, pdot, c, A, cdot)

    def saddle_matrix(self, t, q, qdot):
        """The matrix `[[M, −Aᵀ], [A, 0]]` of the saddle system, `(n + m, n + m)`."""
        return saddle(self.derivatives(t, q, qdot))

    def accelerations(self, t, q, qdot, derivatives: Derivatives | None = None):
        """`(q̈ (n,), λ (m,))`: the solution of the saddle system (A.33) differentiated once
        (`derivatives`, when given, are `self.derivatives(t, q, qdot)`).

        The saddle matrix is invertible iff `A` has full row rank and `M` is positive definite
        on the null space of `A`; where it is not the result is meaningless (non-finite or
        arbitrary): check with `saddle_checks`."""
        d = self.derivatives(t, q, qdot) if derivatives is None else derivatives
        rhs = jnp.concatenate([self.generalised_force(t, q, qdot) + d.dL_dq - d.pdot, -d.cdot])
        sol = jnp.linalg.solve(saddle(d), rhs)
        n = q.shape[-1]
        return sol[:n], sol[n:]

    def velocity_from_momentum(self, t, q, p):
        """The constrained inverse Legendre map at `(q, t)`: `q̇ (n,)` on the constraint
        `A q̇ + a = 0` whose momentum is `p` modulo `range Aᵀ`, from the saddle system

            [ M  −Aᵀ ] [ q̇ ]   [ p − ∂L/∂q̇(q, 0, t) ]
            [ A   0  ] [ μ  ] = [ −a                 ],      M = ∂²L/∂q̇² at (q, 0, t),

        exact when `L` is quadratic in `q̇` (`∂L/∂q̇ = M q̇ + ∂L/∂q̇(q, 0, t)`). `M` and
        `∂L/∂q̇(q, 0, t)` come from one `jacfwd` of the momentum taken in forward mode (the
        value its aux; forward over forward, as `mass_matrix`), `A` and `a` from one of the
        constraint: none of `derivatives`' other terms is needed here."""
        t, zero = as_time(t, q), jnp.zeros_like(q)
        momentum = _with_value(lambda v: self._forward_momentum(t, q, v))
        M, p_zero = jax.jacfwd(momentum, has_aux=True)(zero)
        A, a = self.constraint_matrix(t, q)
        rhs = jnp.concatenate([p - p_zero, -a])
        return jnp.linalg.solve(_saddle(M, A), rhs)[: q.shape[-1]]

    def energy(self, t, q, qdot):
        """`E = q̇ · ∂L/∂q̇ − L` (conserved when `L`, the constraints and `Q = 0` do not depend
        on `t`: the constraint forces do no work on `A q̇ = 0`)."""
        return jnp.dot(qdot, self.momentum(t, q, qdot)) - self._L(q, qdot, as_time(t, q))

    # -- singular systems --

    def saddle_condition(self, t, q, qdot):
        """`(rank, definiteness)`: `σ_min(A)/σ_max(A)` and `μ_min(Zᵀ M Z)/‖M‖₂`, `Z` an
        orthonormal basis of the null space of `A` (from the SVD of `A`). The saddle matrix is
        invertible iff both are positive (Nocedal & Wright, Lemma 16.1). `1` for a zero `A`
        row count (no constraints) or an `A` with no null space (`m = n`), respectively."""
        A, _ = self.constraint_matrix(t, q)
        M = self.mass_matrix(t, q, qdot)
        M = 0.5 * (M + M.T)
        m, n = A.shape
        if m > n:
            raise ValueError(f"{m} constraints on {n} coordinates: at most n constraints")
        if m == 0:
            rank, Z = jnp.ones((), M.dtype), jnp.eye(n, dtype=M.dtype)
        else:
            _, s, Vt = jnp.linalg.svd(A, full_matrices=True)
            rank = s[-1] / jnp.where(s[0] > 0, s[0], 1.0)
            Z = Vt[m:].T
        scale = jnp.max(jnp.abs(jnp.linalg.eigvalsh(M)))
        scale = jnp.where(scale > 0, scale, 1.0)
        if m == n:
            return rank, jnp.ones((), M.dtype)
        return rank, jnp.linalg.eigvalsh(Z.T @ M @ Z)[0] / scale

    def saddle_checks(self, t, q, qdot) -> list[Check]:
        """`Check`s (flags over leading axes of `q`, `qdot`) that the saddle matrix is
        invertible. A ratio at or below `max(m, n)·eps` is a singular matrix in floating point:
        the rank tolerance of `numpy.linalg.matrix_rank` (the SVD's backward error is about eps
        times the largest singular value); the same bound applies to the reduced Hessian's
        eigenvalues relative to `‖M‖₂`."""
        cond = jnp.vectorize(self.saddle_condition, signature="(),(n),(n)->(),()")
        rank, definite = cond(t, q, qdot)
        one = q[(0,) * (q.ndim - 1)]
        m = jax.eval_shape(self.constraint_residual, jnp.zeros(()), one, one).shape[0]
        tol = max(m, q.shape[-1]) * float(jnp.finfo(rank.dtype).eps)
        return [
            Check(
                rank <= tol,
                "the constraint matrix A = ∂c/∂q̇ is rank-deficient (σ_min/σ_max ≤ max(m, n) "
                "eps): a constraint is repeated or vanishes here; drop or rewrite it",
                rank,
            ),
            Check(
                (rank > tol) & (definite <= tol),
                "the mass matrix ∂²L/∂q̇² is not positive definite on the constraints' null "
                "space (μ_min/‖M‖ ≤ max(m, n) eps): a velocity the constraints allow has no "
                "kinetic energy (a coordinate without inertia, or a missing constraint)",
                definite,
            ),
        ]

    # -- the model contract --

    def lagrange_dalembert_system(self) -> LagrangeDAlembertSystem:
        """This system itself: its coordinates are its state's."""
        return self

    def coordinates(self, state: LagrangeDAlembertState):
        """`(q, q̇)` of a state."""
        return state.q, state.qdot

    def from_coordinates(self, Q, Qdot) -> LagrangeDAlembertState:
        """The state of `(q, q̇)`."""
        return LagrangeDAlembertState(Q, Qdot)

    def vector_field(self, t, state: LagrangeDAlembertState) -> LagrangeDAlembertState:
        """`(q̇, q̈)` for one member."""
        qddot, _ = self.accelerations(t, state.q, state.qdot)
        return LagrangeDAlembertState(state.qdot, qddot)

    def invariants(self, t, state: LagrangeDAlembertState) -> dict[str, jax.Array]:
        """`energy` (`q̇·∂L/∂q̇ − L`) and `constraint_residual` (`‖A q̇ + a‖∞`) of one member."""
        residual = self.constraint_residual(t, state.q, state.qdot)
        return {
            "energy": self.energy(t, state.q, state.qdot),
            "constraint_residual": jnp.max(jnp.abs(residual), initial=0.0),
        }

    def state_event_ndims(self) -> LagrangeDAlembertState:
        return event_ndims(LagrangeDAlembertState, q=1, qdot=1)

    def check_state_shapes(self, state) -> None:
        q, qdot = state
        if jnp.ndim(q) < 1 or jnp.shape(q) != jnp.shape(qdot):
            raise ValueError(
                f"state needs q (..., n) and qdot (..., n) of one shape, got "
                f"{jnp.shape(q)}, {jnp.shape(qdot)}"
            )

    def state_checks(self, state, t=None) -> list[Check]:
        """Finite, on the constraint (each row `|A q̇ + a|` within √eps of the magnitudes it
        sums, `|A| |q̇| + |a|`), and an invertible saddle matrix, at time `t` (`simulate`
        passes its `t0`; `None` is 0)."""
        q, qdot = state
        t = 0.0 if t is None else t

        def rows(q, qdot):
            A, a = self.constraint_matrix(t, q)
            residual = self.constraint_residual(t, q, qdot)
            scale = jnp.abs(A) @ jnp.abs(qdot) + jnp.abs(a)
            return jnp.max(
                jnp.abs(residual) - jnp.sqrt(jnp.finfo(q.dtype).eps) * scale, initial=0.0
            )

        excess = jnp.vectorize(rows, signature="(n),(n)->()")(q, qdot)
        ok = finite(q, 1) & finite(qdot, 1)
        return [
            Check(~ok, "state contains NaN or inf"),
            Check(
                ok & (excess > 0),
                "state is off the velocity constraint: |A q̇ + a| > √eps (|A| |q̇| + |a|)",
                excess,
            ),
            *self.saddle_checks(t, q, qdot),
        ]
