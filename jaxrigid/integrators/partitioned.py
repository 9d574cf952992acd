"""Partitioned Runge–Kutta methods for canonical Hamiltonian systems `(q, p)`.

    Q_i = q₀ + h Σ_j a_ij ∂H/∂p(Q_j, P_j),    P_i = p₀ − h Σ_j â_ij ∂H/∂q(Q_j, P_j),
    q₁  = q₀ + h Σ_i b_i ∂H/∂p(Q_i, P_i),     p₁  = p₀ − h Σ_i b̂_i ∂H/∂q(Q_i, P_i)

(Hairer, Lubich & Wanner, GNI §II.2.1, eq. 2.2). A method is a `PartitionedTableau`: the
Butcher table `a` of the positions and `â` of the momenta. H need not be separable, so the
stages are always solved together, for the `2sn` increments `(Q_i − q₀, P_i − p₀)`, with full
`Newton` to its default near-round-off tolerance (see `classical`); for a separable H the
explicit stages make the residual linear in the unknowns that matter and Newton stops after
two iterations. The model supplies `grad_q(q, p)` and `grad_p(q, p)` (`HamiltonianSystem`).

Time-dependent Hamiltonians `H(q, p, t)`: `HamiltonianSystem` is autonomous (its `H` takes no
time). A model with the class fact `time_dependent = True` supplies `grad_q(q, p, t)` and
`grad_p(q, p, t)`, and stage `i` is evaluated at `t + c_i h` with the pair's nodes `c`
(`PartitionedTableau.c`): the same time for both derivatives of a stage (HNW I, §II.15).

The named methods (Chaurasia 2012, ch. 2; Leimkuhler & Reich 2004, §4.1):
symplectic Euler A, `H` evaluated at `(q₁, p₀)`; symplectic Euler B, at `(q₀, p₁)` (its
adjoint); Störmer–Verlet, the Lobatto IIIA–IIIB pair, i.e. GNI eq. (VI.3.4):
`p½ = p₀ − h/2 H_q(q₀, p½)`, `q₁ = q₀ + h/2 (H_p(q₀, p½) + H_p(q₁, p½))`,
`p₁ = p½ − h/2 H_q(q₁, p½)`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..newton import Newton
from .base import AbstractImplicitIntegrator, construct, tableau_method
from .classical import AbstractHamiltonianTableauIntegrator
from .runge_kutta import extrapolates, first_slopes, next_slopes
from .tableau import ButcherTableau, tree_conditions


@dataclasses.dataclass(frozen=True, eq=False)  # identity hash: a static field of integrators
class PartitionedTableau:
    """Tables `q` (positions) and `p` (momenta) of one partitioned RK method.

    Nodes `c`: stage `i` of both tables is evaluated at `t + c_i h`. A table that declares
    nodes of its own (`nodes_are_row_sums=False`, Lobatto IIIB) must declare the other
    table's: the common nodes (Lobatto IIIA–IIIB: `c = (0, 1)`). Otherwise `c` is the `q`
    table's, its row sums: the time is then one more position, advanced by the `q` table, and
    the method stays symplectic in the extended phase space `(q, t; p, −H)` (for the
    symplectic Eulers, whose tables' row sums differ, any node is of order 1).

    Checked at construction: equal stage numbers, each table valid for `order`, the order
    conditions of the pair for non-autonomous problems up to `order` (≤ 6): every tree with
    vertices of `q` and `p` and time leaves weighted by the common nodes `c`
    (`tableau._tree_conditions`; at order 2: `Σ b_i (Σ_j â_ij) = Σ b̂_i (Σ_j a_ij) = 1/2` and
    `Σ b_i c_i = Σ b̂_i c_i = 1/2`), and `symplectic` when claimed: `b_i = b̂_i` and
    `b_i â_ij + b̂_j a_ji = b_i b̂_j` (GNI Thm. VI.4.6).
    """

    name: str
    q: ButcherTableau
    p: ButcherTableau
    order: int
    symplectic: bool = True
    symmetric: bool = False

    def __post_init__(self):
        if self.q.stages != self.p.stages:
            raise ValueError(f"tableau {self.name}: the q and p tables need equal stage numbers")
        own_nodes = not (self.q.nodes_are_row_sums and self.p.nodes_are_row_sums)
        if own_nodes and not np.allclose(self.q.c, self.p.c, atol=1e-14):
            raise ValueError(
                f"tableau {self.name}: a table with nodes of its own needs common nodes "
                f"(q: c = {self.q.c}, p: c = {self.p.c})"
            )
        for part in (self.q, self.p):
            if part.order < self.order:
                raise ValueError(f"tableau {self.name}: table {part.name} has order < {self.order}")
        parts = [("q", self.q.a, self.q.b), ("p", self.p.a, self.p.b)]
        for cond, lhs, rhs in tree_conditions(parts, self.c, self.order):
            if abs(lhs - rhs) > 1e-13:
                raise ValueError(
                    f"tableau {self.name}: order condition {cond} fails ({lhs} != {rhs})"
                )
        if self.symplectic and not self.is_symplectic():
            raise ValueError(
                f"tableau {self.name}: not symplectic (needs b = b̂ and "
                "b_i â_ij + b̂_j a_ji = b_i b̂_j)"
            )

    @property
    def stages(self) -> int:
        return self.q.stages

    @property
    def explicit(self) -> bool:
        """Never: the method solves its stages together (`AbstractPartitionedRungeKutta`)."""
        return False

    @property
    def c(self) -> np.ndarray:
        """The nodes: stage `i` at `t + c_i h` (the common nodes, else the `q` table's)."""
        return self.q.c

    def is_symplectic(self) -> bool:
        b, bh, a, ah = self.q.b, self.p.b, self.q.a, self.p.a
        M = b[:, None] * ah + (bh[:, None] * a).T - np.outer(b, bh)
        return bool(np.allclose(b, bh, atol=1e-14) and np.allclose(M, 0.0, atol=1e-14))


def _table(name, a, b, c, order, nodes_are_row_sums=True):
    return ButcherTableau(name, a, b, c, order, nodes_are_row_sums)


SYMPLECTIC_EULER_A = PartitionedTableau(
    "symplectic-euler-a", _table("implicit", [[1.0]], [1.0], [1.0], 1),
    _table("explicit", [[0.0]], [1.0], [0.0], 1), 1,
)  # fmt: skip
SYMPLECTIC_EULER_B = PartitionedTableau(
    "symplectic-euler-b", _table("explicit", [[0.0]], [1.0], [0.0], 1),
    _table("implicit", [[1.0]], [1.0], [1.0], 1), 1,
)  # fmt: skip
STORMER_VERLET = PartitionedTableau(
    "stormer-verlet",
    _table("lobatto-IIIA", [[0.0, 0.0], [0.5, 0.5]], [0.5, 0.5], [0.0, 1.0], 2),
    # Lobatto IIIB: the Lobatto nodes (0, 1), not its row sums (1/2, 1/2) (GNI Table II.2.2)
    _table("lobatto-IIIB", [[0.5, 0.0], [0.5, 0.0]], [0.5, 0.5], [0.0, 1.0], 2, False),
    2,
    symmetric=True,
)


class AbstractPartitionedRungeKutta(
    AbstractHamiltonianTableauIntegrator, AbstractImplicitIntegrator
):
    """The partitioned RK method of the class's `tableau` for a canonical system `(q, p)`.

    Order, symmetry and symplecticity are the tableau's (class facts). Symplectic partitioned
    methods keep bilinear invariants `qᵀ B p` (Kepler's angular momentum `L`) to round-off
    (GNI Thm. IV.2.3). Every partitioned method here is implicit: H need not be separable, so
    the stages are solved together with `newton`.
    """

    reference: ClassVar[str] = "Chaurasia (2012) ch. 2; Hairer, Lubich & Wanner, GNI §II.2, §VI.3"
    newton: Newton = eqx.field(default_factory=Newton)

    def _gradients(self, model, t, dt):
        """`∂H/∂p` and `∂H/∂q` of each stage (at `t + c_i h` for a time-dependent H)."""
        s = self.tableau.stages
        if model.time_dependent:  # H(q, p, t): stages at t + c_i h
            times = [t + ci * dt for ci in self.tableau.c]
            grad_p = [functools.partial(model.grad_p, t=ti) for ti in times]
            grad_q = [functools.partial(model.grad_q, t=ti) for ti in times]
            return grad_p, grad_q
        return [model.grad_p] * s, [model.grad_q] * s  # canonical systems here are autonomous

    def init(self, model, state0, t0, dt):
        """The first step's guess of the stage derivatives `(q̇_i, ṗ_i) = (H_p, −H_q)(q₀, p₀)`
        (`(s, n)` each; then Newton starts from `Z_i ≈ h (Σ_j a_ij) H'(q₀, p₀)`, the row sums, not
        the nodes); later steps carry the previous stages extrapolated (`runge_kutta`)."""
        if not extrapolates(self.tableau.c):
            return None
        q0, p0 = state0
        return self._first_slopes(model, q0, p0, t0, dt)

    def _first_slopes(self, model, q0, p0, t, dt):
        grad_p, grad_q = self._gradients(model, t, dt)
        s = self.tableau.stages
        return first_slopes(grad_p[0](q0, p0), s), first_slopes(-grad_q[0](q0, p0), s)

    def step(self, model, state, solver_state, t, dt):
        q0, p0 = state
        dtype = q0.dtype
        tq, tp = self.tableau.q, self.tableau.p
        a, ah = jnp.asarray(tq.a, dtype), jnp.asarray(tp.a, dtype)
        s, n = self.tableau.stages, q0.shape[0]
        grad_p, grad_q = self._gradients(model, t, dt)

        def derivatives(Zq, Zp):
            Q, P = q0[None, :] + Zq, p0[None, :] + Zp
            Hp = jnp.stack([grad_p[i](Q[i], P[i]) for i in range(s)])
            Hq = jnp.stack([grad_q[i](Q[i], P[i]) for i in range(s)])
            return Hp, Hq

        def residual(z):
            Zq, Zp = z[: s * n].reshape(s, n), z[s * n :].reshape(s, n)
            Hp, Hq = derivatives(Zq, Zp)
            return jnp.concatenate([(Zq - dt * (a @ Hp)).ravel(), (Zp + dt * (ah @ Hq)).ravel()])

        if solver_state is None:  # a table of one node: every step from H'(q₀, p₀)
            solver_state = self._first_slopes(model, q0, p0, t, dt)
        slopes_q, slopes_p = solver_state
        guess = jnp.concatenate([(dt * (a @ slopes_q)).ravel(), (dt * (ah @ slopes_p)).ravel()])
        z, info = self.newton.solve(residual, guess)
        Hp, Hq = derivatives(z[: s * n].reshape(s, n), z[s * n :].reshape(s, n))
        q1 = q0 + dt * (jnp.asarray(tq.b, dtype) @ Hp)
        p1 = p0 - dt * (jnp.asarray(tp.b, dtype) @ Hq)
        c, ok = self.tableau.c, info.converged
        slopes = None
        if extrapolates(c):
            slopes = next_slopes(Hp, c, tq.b, ok), next_slopes(-Hq, c, tp.b, ok)
        return type(state)(q1, p1), slopes, info


class SymplecticEulerA(AbstractPartitionedRungeKutta):
    """Symplectic Euler A: `H` evaluated at `(q₁, p₀)` (GNI Thm. VI.3.3)."""

    tableau = SYMPLECTIC_EULER_A


class SymplecticEulerB(AbstractPartitionedRungeKutta):
    """Symplectic Euler B: `H` evaluated at `(q₀, p₁)`, the adjoint of A."""

    tableau = SYMPLECTIC_EULER_B


class StormerVerlet(AbstractPartitionedRungeKutta):
    """Störmer–Verlet, the Lobatto IIIA–IIIB pair (GNI eq. VI.3.4)."""

    tableau = STORMER_VERLET


PARTITIONED_CLASSES = (SymplecticEulerA, SymplecticEulerB, StormerVerlet)
PARTITIONED_METHODS = {cls.name: cls for cls in PARTITIONED_CLASSES}

_CLASS_OF_TABLEAU: dict[PartitionedTableau, type] = {
    cls.tableau: cls for cls in PARTITIONED_CLASSES
}


def partitioned_class(tableau: PartitionedTableau) -> type[AbstractPartitionedRungeKutta]:
    """The method class of `tableau`: the named class of a built-in pair, else one made once
    per pair (always implicit: the stages are solved together)."""
    base = AbstractPartitionedRungeKutta
    return tableau_method(_CLASS_OF_TABLEAU, tableau, base, base)


def PartitionedRungeKutta(
    tableau: PartitionedTableau = STORMER_VERLET, newton: Newton | None = None
):
    """The partitioned RK method of `tableau`: an instance of `partitioned_class(tableau)`
    (default Störmer–Verlet)."""
    return construct(partitioned_class(tableau), newton)
