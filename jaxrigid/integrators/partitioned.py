"""Partitioned Runge–Kutta methods for canonical Hamiltonian systems `(q, p)`.

    Q_i = q₀ + h Σ_j a_ij ∂H/∂p(Q_j, P_j),    P_i = p₀ − h Σ_j â_ij ∂H/∂q(Q_j, P_j),
    q₁  = q₀ + h Σ_i b_i ∂H/∂p(Q_i, P_i),     p₁  = p₀ − h Σ_i b̂_i ∂H/∂q(Q_i, P_i)

(Hairer, Lubich & Wanner, GNI §II.2.1, eq. 2.2). A method is a `PartitionedTableau`: the
Butcher table `a` of the positions and `â` of the momenta. H need not be separable, so the
stages are always solved together, for the `2sn` increments `(Q_i − q₀, P_i − p₀)`, with full
`Newton` to its default near-round-off tolerance (see `classical`); for a separable H the
explicit stages make the residual linear in the unknowns that matter and Newton stops after
two iterations. The model supplies `grad_q(q, p)` and `grad_p(q, p)` (`HamiltonianSystem`).

The named methods (Chaurasia 2012, ch. 2; Leimkuhler & Reich 2004, §4.1):
symplectic Euler A, `H` evaluated at `(q₁, p₀)`; symplectic Euler B, at `(q₀, p₁)` (its
adjoint); Störmer–Verlet, the Lobatto IIIA–IIIB pair, i.e. GNI eq. (VI.3.4):
`p½ = p₀ − h/2 H_q(q₀, p½)`, `q₁ = q₀ + h/2 (H_p(q₀, p½) + H_p(q₁, p½))`,
`p₁ = p½ − h/2 H_q(q₁, p½)`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..newton import Newton
from .classical import AbstractHamiltonianTableauIntegrator
from .tableau import ButcherTableau


@dataclasses.dataclass(frozen=True, eq=False)  # identity hash: a static field of integrators
class PartitionedTableau:
    """Tables `q` (positions) and `p` (momenta) of one partitioned RK method.

    Checked at construction: equal stage numbers, each table valid for `order`, the coupling
    conditions of order 2 (`Σ b_i ĉ_i = Σ b̂_i c_i = 1/2`) when `order ≥ 2` (orders above 2
    are not checked here: `ValueError`), and `symplectic` when claimed: `b_i = b̂_i` and
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
        if self.order > 2:
            raise ValueError(f"tableau {self.name}: coupling conditions are checked up to order 2")
        for part in (self.q, self.p):
            if part.order < self.order:
                raise ValueError(f"tableau {self.name}: table {part.name} has order < {self.order}")
        if self.order >= 2:
            for lhs, what in ((self.q.b @ self.p.c, "Σ b ĉ"), (self.p.b @ self.q.c, "Σ b̂ c")):
                if abs(lhs - 0.5) > 1e-13:
                    raise ValueError(f"tableau {self.name}: order condition {what} = 1/2 fails")
        if self.symplectic and not self.is_symplectic():
            raise ValueError(
                f"tableau {self.name}: not symplectic (needs b = b̂ and "
                "b_i â_ij + b̂_j a_ji = b_i b̂_j)"
            )

    @property
    def stages(self) -> int:
        return self.q.stages

    def is_symplectic(self) -> bool:
        b, bh, a, ah = self.q.b, self.p.b, self.q.a, self.p.a
        M = b[:, None] * ah + (bh[:, None] * a).T - np.outer(b, bh)
        return bool(np.allclose(b, bh, atol=1e-14) and np.allclose(M, 0.0, atol=1e-14))


def _table(name, a, b, c, order):
    return ButcherTableau(name, a, b, c, order)


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
    _table("lobatto-IIIB", [[0.5, 0.0], [0.5, 0.0]], [0.5, 0.5], [0.5, 0.5], 2),
    2,
    symmetric=True,
)


class PartitionedRungeKutta(AbstractHamiltonianTableauIntegrator):
    """The partitioned RK method of `tableau` for a canonical system `(q, p)`.

    Order, symmetry and symplecticity are the tableau's. Symplectic partitioned methods keep
    bilinear invariants `qᵀ B p` (Kepler's angular momentum `L`) to round-off (GNI Thm. IV.2.3).
    """

    reference: ClassVar[str] = "Chaurasia (2012) ch. 2; Hairer, Lubich & Wanner, GNI §II.2, §VI.3"
    tableau: PartitionedTableau = eqx.field(default=STORMER_VERLET, static=True)
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, t, dt):
        del t  # canonical systems here are autonomous
        q0, p0 = state
        dtype = q0.dtype
        tq, tp = self.tableau.q, self.tableau.p
        a, ah = jnp.asarray(tq.a, dtype), jnp.asarray(tp.a, dtype)
        s, n = self.tableau.stages, q0.shape[0]

        def derivatives(Zq, Zp):
            Q, P = q0[None, :] + Zq, p0[None, :] + Zp
            Hp = jnp.stack([model.grad_p(Q[i], P[i]) for i in range(s)])
            Hq = jnp.stack([model.grad_q(Q[i], P[i]) for i in range(s)])
            return Hp, Hq

        def residual(z):
            Zq, Zp = z[: s * n].reshape(s, n), z[s * n :].reshape(s, n)
            Hp, Hq = derivatives(Zq, Zp)
            return jnp.concatenate([(Zq - dt * (a @ Hp)).ravel(), (Zp + dt * (ah @ Hq)).ravel()])

        hp0, hq0 = model.grad_p(q0, p0), model.grad_q(q0, p0)
        cq, cp = jnp.asarray(tq.c, dtype)[:, None], jnp.asarray(tp.c, dtype)[:, None]
        guess = jnp.concatenate(
            [(dt * cq * hp0[None, :]).ravel(), (-dt * cp * hq0[None, :]).ravel()]
        )
        z, info = self.newton.solve(residual, guess)
        Hp, Hq = derivatives(z[: s * n].reshape(s, n), z[s * n :].reshape(s, n))
        q1 = q0 + dt * (jnp.asarray(tq.b, dtype) @ Hp)
        p1 = p0 - dt * (jnp.asarray(tp.b, dtype) @ Hq)
        return type(state)(q1, p1), info


PARTITIONED_METHODS = {
    t.name: (lambda t=t: PartitionedRungeKutta(tableau=t))
    for t in (SYMPLECTIC_EULER_A, SYMPLECTIC_EULER_B, STORMER_VERLET)
}
