"""Butcher tableaux as validated data (diffrax's `ButcherTableau` pattern).

A method is a table; its defining conditions are checked once, when the table is built.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


# identity hash: a static field of integrators
@dataclasses.dataclass(frozen=True, eq=False, init=False)
class ButcherTableau:
    """`c | A` over `b`, with the classical `order` the table attains.

    `c` are the nodes: stage `i` is evaluated at time `t + c_i h`. Checked at construction:
    square `A` of size `s`, `b` and `c` of length `s`, consistency `Σ b = 1`, and the order
    conditions up to `order`.

    By default the nodes are the row sums, `c_i = Σ_j a_ij` (checked): then time behaves as one
    more component of `y` and the order conditions are those of autonomous problems, all of
    them (rooted trees) up to order 5; order 6 through the simplifying assumptions `B(6)`,
    `C(3)`, `D(2)`, which imply it (Butcher's theorem; Hairer, Nørsett & Wanner I,
    Thm. II.7.4) and which the Gauss methods satisfy.

    `nodes_are_row_sums=False` declares nodes of the table's own that are not its row sums
    (Lobatto IIIB: `c = (0, 1)`, row sums `(½, ½)`; GNI Table II.2.2). Then `order` is checked
    for non-autonomous problems `y' = f(t, y)` with stages at `t + c_i h`: every rooted tree up
    to `order` whose leaves are either stages of `y` (weight `Σ_j a_ij`) or the time (weight
    `c_i`), which contains the autonomous conditions and the quadrature conditions
    `Σ b_i c_i^(k−1) = 1/k` (`tree_conditions`)."""

    name: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    order: int
    nodes_are_row_sums: bool = True

    # written out rather than generated so that `a`, `b`, `c` are typed as what they may be
    # given (nested lists), not as the float64 arrays `__post_init__` makes of them
    def __init__(
        self,
        name: str,
        a: ArrayLike,
        b: ArrayLike,
        c: ArrayLike,
        order: int,
        nodes_are_row_sums: bool = True,
    ):
        for field, value in (
            ("name", name),
            ("a", a),
            ("b", b),
            ("c", c),
            ("order", order),
            ("nodes_are_row_sums", nodes_are_row_sums),
        ):
            object.__setattr__(self, field, value)
        self.__post_init__()

    def __post_init__(self):
        a, b, c = (np.asarray(x, dtype=np.float64) for x in (self.a, self.b, self.c))
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "c", c)
        s = len(b)
        if a.shape != (s, s) or c.shape != (s,):
            raise ValueError(f"tableau {self.name}: A must be ({s}, {s}) and c ({s},)")
        if self.nodes_are_row_sums:
            if not np.allclose(a.sum(axis=1), c, atol=1e-14):
                raise ValueError(
                    f"tableau {self.name}: row sums of A must equal c (or declare "
                    "nodes_are_row_sums=False for nodes of the table's own)"
                )
            conditions = _order_conditions(a, b, c, self.order)
        else:
            conditions = tree_conditions([("", a, b)], c, self.order)
        for cond, lhs, rhs in conditions:
            if abs(lhs - rhs) > 1e-13:
                raise ValueError(
                    f"tableau {self.name}: order condition {cond} fails ({lhs} != {rhs})"
                )

    @property
    def stages(self) -> int:
        return len(self.b)

    @property
    def row_sums(self) -> np.ndarray:
        """`Σ_j a_ij`, for the stage increments' predictor `Z_i ≈ h (Σ_j a_ij) f(y₀)`: `c` itself
        (as checked) unless the table declares nodes of its own."""
        return self.c if self.nodes_are_row_sums else self.a.sum(axis=1)

    @property
    def explicit(self) -> bool:
        return bool(np.all(np.triu(self.a) == 0.0))

    @property
    def stability_order(self) -> int:
        """Order on linear problems `y' = λy`: the largest `p ≤ 2s` with `R(z) = e^z + O(z^{p+1})`
        for the stability function `R(z) = 1 + z bᵀ(1 − zA)⁻¹𝟙 = 1 + Σ_k bᵀA^{k−1}𝟙 zᵏ`.
        At least `order`; larger for Sun Geng's method (6, its `R` is Gauss6's (3,3)-Padé)."""
        term, factorial = np.ones(self.stages), 1.0
        for k in range(1, 2 * self.stages + 1):
            factorial *= k
            if abs(self.b @ term - 1.0 / factorial) > 1e-13 / factorial:
                return k - 1
            term = self.a @ term
        return 2 * self.stages

    @property
    def symplectic(self) -> bool:
        """`b_i a_ij + b_j a_ji = b_i b_j` for all i, j."""
        M = self.b[:, None] * self.a + (self.b[:, None] * self.a).T - np.outer(self.b, self.b)
        return bool(np.allclose(M, 0.0, atol=1e-14))

    @property
    def symmetric(self) -> bool:
        """`a_ij + a_{s+1−i, s+1−j} = b_j` for all i, j: the method is self-adjoint (HLW, GNI
        Thm. V.2.3)."""
        flipped = self.a[::-1, ::-1]
        return bool(np.allclose(self.a + flipped, self.b[None, :], atol=1e-14))


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
    if order >= 5:
        ac = a @ c
        conds += [
            ("Σbc⁴ = 1/5", b @ c**4, 1 / 5),
            ("Σ b c² A c = 1/10", (b * c**2) @ ac, 1 / 10),
            ("Σ b c A c² = 1/15", (b * c) @ a @ c**2, 1 / 15),
            ("Σ b c A A c = 1/30", (b * c) @ a @ ac, 1 / 30),
            ("Σ b (A c)² = 1/20", b @ ac**2, 1 / 20),
            ("Σ b A c³ = 1/20", b @ a @ c**3, 1 / 20),
            ("Σ b A (c A c) = 1/40", b @ a @ (c * ac), 1 / 40),
            ("Σ b A A c² = 1/60", b @ a @ a @ c**2, 1 / 60),
            ("Σ b A A A c = 1/120", b @ a @ a @ ac, 1 / 120),
        ]
    if order >= 6:
        if order > 6:
            raise ValueError(f"order conditions are checked up to order 6, not {order}")
        conds.append(("B(6): Σbc⁵ = 1/6", b @ c**5, 1 / 6))  # B(1..5) are listed above
        for k in (1, 2, 3):  # C(3): Σ_j a_ij c_j^(k−1) = c_i^k / k, worst row
            lhs, rhs = a @ c ** (k - 1), c**k / k
            i = int(np.argmax(np.abs(lhs - rhs)))
            conds.append((f"C(3): Σ_j a_ij c_j^{k - 1} = c_i^{k}/{k}", lhs[i], rhs[i]))
        for k in (1, 2):  # D(2): Σ_i b_i c_i^(k−1) a_ij = b_j (1 − c_j^k) / k, worst column
            lhs, rhs = (b * c ** (k - 1)) @ a, b * (1 - c**k) / k
            j = int(np.argmax(np.abs(lhs - rhs)))
            conds.append((f"D(2): Σ_i b_i c_i^{k - 1} a_ij = b_j(1 − c_j^{k})/{k}", lhs[j], rhs[j]))
    return conds


def _trees(max_order, colours):
    """Rooted trees up to `max_order`, their vertices coloured by `colours` (indices of
    tables) or `None` (the time: a leaf only, its derivative being 1). A tree is
    `(colour, children)`, `children` a sorted tuple of trees; returns `[(tree, order)]`."""
    found = [((k, ()), 1) for k in (*colours, None)]
    index = {t: i for i, (t, _) in enumerate(found)}

    def forests(m, start, pool):  # multisets of trees from `pool[start:]` of total order m
        if m == 0:
            yield ()
            return
        for i in range(start, len(pool)):
            tree, n = pool[i]
            if n <= m:
                for rest in forests(m - n, i, pool):
                    yield (tree, *rest)

    for order in range(2, max_order + 1):
        pool = list(found)
        for children in forests(order - 1, 0, pool):
            ordered = tuple(sorted(children, key=index.__getitem__))
            for k in colours:
                tree = (k, ordered)
                if tree not in index:
                    index[tree] = len(found)
                    found.append((tree, order))
    return found


def tree_conditions(parts, c, order):
    """The order conditions up to `order` of a (partitioned) RK method with stages at
    `t + c_i h`, for non-autonomous problems (Hairer, Nørsett & Wanner I, §II.15).

    `parts`: `[(label, A, b)]`, one table per component (one for a plain RK method; `q`, `p`
    for a partitioned pair). One condition per tree with coloured vertices: the root's table
    gives the weights `b`, an edge into a vertex of table `k` the matrix `A_k`; a time leaf
    contributes `c_i`. `Φ(tree) = 1/γ(tree)`, `γ` the tree's density. Returns
    `[(name, Φ, 1/γ)]`, the name in bracket notation (`τ` the time, `•` a leaf)."""
    if order > 6:
        raise ValueError(f"order conditions are checked up to order 6, not {order}")
    A = [np.asarray(a) for _, a, _ in parts]
    ones = np.ones(len(c))

    def weight(tree):  # the stage vector of a vertex, and its density γ
        _, children = tree
        g, gamma, size = ones.copy(), 1, 1
        for child in children:
            if child[0] is None:
                g, size = g * c, size + 1
            else:
                gc, gamma_c, size_c = weight(child)
                g, gamma, size = g * (A[child[0]] @ gc), gamma * gamma_c, size + size_c
        return g, gamma * size, size

    def name(tree):
        k, children = tree
        label = "τ" if k is None else parts[k][0]
        if not children:
            return label if k is None else label + "•"
        return label + "[" + ", ".join(name(ch) for ch in children) + "]"

    conds = []
    for tree, _ in _trees(order, range(len(parts))):
        if tree[0] is None:
            continue  # the time itself is not integrated
        g, gamma, _ = weight(tree)
        conds.append((f"Φ({name(tree)}) = 1/{gamma}", parts[tree[0]][2] @ g, 1 / gamma))
    return conds


def _rooted_trees(order: int):
    """Rooted trees with at most `order` vertices, as `(tree, γ)`: a tree is the sorted tuple of
    its children (a leaf is `()`), `γ` its density (Hairer, Nørsett & Wanner I, §II.2). One
    colour and no time leaves, to any order (`_trees` colours them for `tree_conditions`)."""
    by_order: dict[int, list] = {1: [()]}
    for n in range(2, order + 1):
        pool = [t for k in range(1, n) for t in by_order[k]]
        size = {t: k for k in range(1, n) for t in by_order[k]}

        def forests(m, start):  # multisets of trees from `pool[start:]` with m vertices in all
            if m == 0:
                yield ()
                return
            for i in range(start, len(pool)):
                if size[pool[i]] <= m:
                    for rest in forests(m - size[pool[i]], i):
                        yield (pool[i], *rest)

        by_order[n] = sorted({tuple(sorted(f)) for f in forests(n - 1, 0)})
    gamma = {}

    def density(tree):
        if tree not in gamma:
            n = 1 + sum(_tree_size(ch) for ch in tree)
            gamma[tree] = n * math.prod(density(ch) for ch in tree)
        return gamma[tree]

    return [(t, density(t)) for n in range(1, order + 1) for t in by_order[n]]


@functools.cache
def _tree_size(tree) -> int:
    return 1 + sum(_tree_size(ch) for ch in tree)


def rooted_tree_residual(tableau: ButcherTableau, order: int) -> float:
    """`max |bᵀΦ(τ) − 1/γ(τ)|` over every rooted tree `τ` with at most `order` vertices (the
    order conditions of autonomous problems, complete, to any order; 200 trees up to order 8):
    `Φ(leaf) = 𝟙`, `Φ([τ₁, …, τₘ]) = Πₖ AΦ(τₖ)`. With `c = A𝟙` (checked by `ButcherTableau`)
    they are also those of non-autonomous ones."""
    a, b = tableau.a, tableau.b
    phi: dict = {}

    def weight(tree):
        if tree not in phi:
            phi[tree] = np.prod([a @ weight(ch) for ch in tree], axis=0) * np.ones(len(b))
        return phi[tree]

    return max(abs(b @ weight(t) - 1.0 / g) for t, g in _rooted_trees(order))


_s3 = np.sqrt(3.0)

EULER = ButcherTableau("euler", [[0.0]], [1.0], [0.0], 1)
IMPLICIT_EULER = ButcherTableau("implicit-euler", [[1.0]], [1.0], [1.0], 1)
IMPLICIT_MIDPOINT = ButcherTableau("implicit-midpoint", [[0.5]], [1.0], [0.5], 2)
TRAPEZOIDAL = ButcherTableau("trapezoidal", [[0.0, 0.0], [0.5, 0.5]], [0.5, 0.5], [0.0, 1.0], 2)
HEUN = ButcherTableau("heun", [[0.0, 0.0], [1.0, 0.0]], [0.5, 0.5], [0.0, 1.0], 2)
"""Heun's method (the explicit trapezoidal rule), order 2."""
RK4 = ButcherTableau(
    "rk4",
    [[0.0, 0, 0, 0], [0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 1.0, 0]],
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

# Gauss–Legendre collocation (Hairer, Lubich & Wanner, GNI §II.1.3): s stages, order 2s,
# symplectic and symmetric. The 1-stage method is the implicit midpoint rule.
GAUSS2 = ButcherTableau("gauss2", [[0.5]], [1.0], [0.5], 2)

_s15 = np.sqrt(15.0)
GAUSS6 = ButcherTableau(
    "gauss6",
    [
        [5 / 36, 2 / 9 - _s15 / 15, 5 / 36 - _s15 / 30],
        [5 / 36 + _s15 / 24, 2 / 9, 5 / 36 - _s15 / 24],
        [5 / 36 + _s15 / 30, 2 / 9 + _s15 / 15, 5 / 36],
    ],
    [5 / 18, 4 / 9, 5 / 18],
    [0.5 - _s15 / 10, 0.5, 0.5 + _s15 / 10],
    6,
)

_s6 = np.sqrt(6.0)
RADAU_IIA5 = ButcherTableau(
    "radau5",
    [
        [(88 - 7 * _s6) / 360, (296 - 169 * _s6) / 1800, (-2 + 3 * _s6) / 225],
        [(296 + 169 * _s6) / 1800, (88 + 7 * _s6) / 360, (-2 - 3 * _s6) / 225],
        [(16 - _s6) / 36, (16 + _s6) / 36, 1 / 9],
    ],
    [(16 - _s6) / 36, (16 + _s6) / 36, 1 / 9],
    [(4 - _s6) / 10, (4 + _s6) / 10, 1.0],
    5,
)
"""Radau IIA, 3 stages, order 5 (Hairer & Wanner II, Table IV.5.6): L-stable, not symplectic."""

SUN_GENG5 = ButcherTableau(
    "sungeng5",
    [
        [(16 - _s6) / 72, (328 - 167 * _s6) / 1800, (-2 + 3 * _s6) / 450],
        [(328 + 167 * _s6) / 1800, (16 + _s6) / 72, (-2 - 3 * _s6) / 450],
        [(85 - 10 * _s6) / 180, (85 + 10 * _s6) / 180, 1 / 18],
    ],
    [(16 - _s6) / 36, (16 + _s6) / 36, 1 / 9],
    [(4 - _s6) / 10, (4 + _s6) / 10, 1.0],
    5,
)
"""Sun Geng's symplectic method of order 5 (Sun Geng, J. Comput. Math. 11, 1993; Hairer, Nørsett
& Wanner I, §II.16), used by Chaurasia (2012) Table 2.1 d). The thesis does not print it: the
nodes and weights are Radau IIA's, the diagonal is `b_i / 2`; the table is checked here against
all order-5 conditions and `symplectic`, and fails `Σbc⁵ = 1/6` (order exactly 5)."""
