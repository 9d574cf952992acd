"""Butcher tableaux as validated data (diffrax's `ButcherTableau` pattern).

A method is a table; its defining conditions are checked once, when the table is built.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)  # identity hash: a static field of integrators
class ButcherTableau:
    """`c | A` over `b`, with the classical `order` the table attains.

    Checked at construction: square `A` of size `s`, `b` and `c` of length `s`, the row sums
    `c_i = Σ_j a_ij`, consistency `Σ b = 1`, and the order conditions up to `order` (≤ 4)."""

    name: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    order: int

    def __post_init__(self):
        a, b, c = (np.asarray(x, dtype=np.float64) for x in (self.a, self.b, self.c))
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "c", c)
        s = len(b)
        if a.shape != (s, s) or c.shape != (s,):
            raise ValueError(f"tableau {self.name}: A must be ({s}, {s}) and c ({s},)")
        if not np.allclose(a.sum(axis=1), c, atol=1e-14):
            raise ValueError(f"tableau {self.name}: row sums of A must equal c")
        for cond, lhs, rhs in _order_conditions(a, b, c, self.order):
            if abs(lhs - rhs) > 1e-13:
                raise ValueError(
                    f"tableau {self.name}: order condition {cond} fails ({lhs} != {rhs})"
                )

    @property
    def stages(self) -> int:
        return len(self.b)

    @property
    def explicit(self) -> bool:
        return bool(np.all(np.triu(self.a) == 0.0))

    @property
    def symplectic(self) -> bool:
        """`b_i a_ij + b_j a_ji = b_i b_j` for all i, j."""
        M = self.b[:, None] * self.a + (self.b[:, None] * self.a).T - np.outer(self.b, self.b)
        return bool(np.allclose(M, 0.0, atol=1e-14))


def _order_conditions(a, b, c, order):
    conds = [("Σb = 1", b.sum(), 1.0)]
    if order >= 2:
        conds.append(("Σbc = 1/2", b @ c, 1 / 2))
    if order >= 3:
        conds += [("Σbc² = 1/3", b @ c**2, 1 / 3), ("Σb A c = 1/6", b @ a @ c, 1 / 6)]
    if order >= 4:
        conds += [
            ("Σbc³ = 1/4", b @ c**3, 1 / 4),
            ("Σ b c A c = 1/8", (b * c) @ a @ c, 1 / 8),
            ("Σ b A c² = 1/12", b @ a @ c**2, 1 / 12),
            ("Σ b A A c = 1/24", b @ a @ a @ c, 1 / 24),
        ]
    return conds


_s3 = np.sqrt(3.0)

EULER = ButcherTableau("euler", [[0.0]], [1.0], [0.0], 1)
IMPLICIT_EULER = ButcherTableau("implicit-euler", [[1.0]], [1.0], [1.0], 1)
IMPLICIT_MIDPOINT = ButcherTableau("implicit-midpoint", [[0.5]], [1.0], [0.5], 2)
TRAPEZOIDAL = ButcherTableau("trapezoidal", [[0.0, 0.0], [0.5, 0.5]], [0.5, 0.5], [0.0, 1.0], 2)
RK4 = ButcherTableau(
    "rk4",
    [[0, 0, 0, 0], [0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 1, 0]],
    [1 / 6, 1 / 3, 1 / 3, 1 / 6],
    [0, 0.5, 0.5, 1],
    4,
)
GAUSS4 = ButcherTableau(
    "gauss4",
    [[1 / 4, 1 / 4 - _s3 / 6], [1 / 4 + _s3 / 6, 1 / 4]],
    [0.5, 0.5],
    [0.5 - _s3 / 6, 0.5 + _s3 / 6],
    4,
)
