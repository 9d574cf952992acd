"""Runge–Kutta–Munthe-Kaas (RKMK) methods on SO(3) × Rᵏ with the attitude as a unit quaternion:
explicit, of order 2, 4 and 8 — the rolling ball's Lie-group integrators.

**The models**: those of the structure `models.structures.AbstractAttitudeQuaternion` (the
rolling ball, reduced and unreduced, Suslov's problem): a `NamedTuple` state with a field `q`,
the attitude as a unit quaternion (w, x, y, z), body → space, with `q̇ = ½ q Ω♯` (`Λ̇ = ΛΩ̂`);
`angular_velocity(state) -> Ω (3,)`, the body angular velocity; and `vector_field(t, state)`,
of which every field but `q` is used. Those other fields (Ω, the centre `x`, rail coordinates,
…) are the Euclidean components `y`.

**The method** (Munthe-Kaas, BIT 38 (1998) 92–111; Hairer, Lubich & Wanner, GNI §IV.8.2). On a
step of size `h` from `(q₀, y₀)` at `t`, write `Λ(t + τ) = Λ₀ exp(Θ(τ))`, `Θ(0) = 0`:

    Θ′ = dexp⁻¹_{−Θ} Ω(q₀ ⊗ exp Θ, y),   y′ = f(t + τ, q₀ ⊗ exp Θ, y),            (1)

an equation in the vector space R³ × Rᵏ (`so3.dexpinv` is the inverse of the right-trivialised
differential, `exp(Θ)ᵀ d exp(Θ)[Θ′] = hat(dexp_{−Θ} Θ′)`, so `Ω = dexp_{−Θ} Θ′`; GNI writes the
same map `dexp⁻¹_Θ` of its left-trivialised `dexp`). The tableau `(c, A, b)` applied to (1):

    Θᵢ = h Σⱼ aᵢⱼ kⱼ,   Yᵢ = y₀ + h Σⱼ aᵢⱼ lⱼ,   Qᵢ = q₀ ⊗ exp Θᵢ,
    kᵢ = dexp⁻¹_{−Θᵢ} Ω(Qᵢ, Yᵢ),   lᵢ = f(t + cᵢh, Qᵢ, Yᵢ),
    q₁ = q₀ ⊗ exp(h Σᵢ bᵢkᵢ),   y₁ = y₀ + h Σᵢ bᵢlᵢ.

With `dexp⁻¹` exact this is the tableau's RK method on (1): the order is the tableau's.

**What it keeps.** `|q| = 1` by construction: `exp Θ = (cos φ, (sin φ/φ) Θ/2)`, `φ = |Θ|/2`, from
half-angle series exact to round-off for `|Θ| ≤ π`, and `|q₀ ⊗ p| = |q₀||p|`. Each step's
rounding moves `|q|` by a few units of round-off `u` of either sign, so `|q| − 1` random-walks,
`~u√n` after `n` steps (measured in `tests/test_rolling_ball_integrators.py`: ≤ 1.1e-14 after
10⁵ float64 steps, ≤ 8e-7 after 2000 float32 steps). The rolling ball's `ẋ₃` is exactly zero,
so `x₃ = r` to the bit. Energy is not kept: its error is of the method's order and grows with
time in passive motion (not a structure-preserving method). A stage turning by more than π
(`|Θᵢ| > π`, outside the series' range; a step far too large for the method anyway) is
reported as `step_bound_broken`.
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .. import _linalg, results
from ..lie import quaternion, so3
from ..models.structures import AbstractAttitudeQuaternion
from ..results import RESULTS
from .base import AbstractIntegrator, explicit_info
from .tableau import RK4, ButcherTableau

__all__ = [
    "DOPRI8",
    "HEUN",
    "RKMK2",
    "RKMK4",
    "RKMK8",
    "RKMK_CLASSES",
    "AbstractQuaternionRKMK",
    "rooted_tree_residual",
]


# --- tableaux ---------------------------------------------------------------------------------


def _rooted_trees(order: int):
    """Rooted trees with at most `order` vertices, as `(tree, γ)`: a tree is the sorted tuple of
    its children (a leaf is `()`), `γ` its density (Hairer, Nørsett & Wanner I, §II.2)."""
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


HEUN = ButcherTableau("heun", [[0.0, 0.0], [1.0, 0.0]], [0.5, 0.5], [0.0, 1.0], 2)
"""Heun's method (the explicit trapezoidal rule), order 2."""


def _dopri8() -> ButcherTableau:
    """Prince & Dormand's RK8(7)13M (J. Comput. Appl. Math. 7 (1981) 67–75), its 8th-order
    solution: 13 stages. The rational coefficients as diffrax (v0.6) prints them in
    `diffrax/_solver/dopri8.py` (`_dopri8_tableau`: `a_lower` rows 1–12, `b_sol`, `c`; its 14th
    stage is the FSAL evaluation, not needed at fixed step)."""
    rows = [
        [1 / 18],
        [1 / 48, 1 / 16],
        [1 / 32, 0, 3 / 32],
        [5 / 16, 0, -75 / 64, 75 / 64],
        [3 / 80, 0, 0, 3 / 16, 3 / 20],
        [
            29443841 / 614563906,
            0,
            0,
            77736538 / 692538347,
            -28693883 / 1125000000,
            23124283 / 1800000000,
        ],
        [
            16016141 / 946692911,
            0,
            0,
            61564180 / 158732637,
            22789713 / 633445777,
            545815736 / 2771057229,
            -180193667 / 1043307555,
        ],
        [
            39632708 / 573591083,
            0,
            0,
            -433636366 / 683701615,
            -421739975 / 2616292301,
            100302831 / 723423059,
            790204164 / 839813087,
            800635310 / 3783071287,
        ],
        [
            246121993 / 1340847787,
            0,
            0,
            -37695042795 / 15268766246,
            -309121744 / 1061227803,
            -12992083 / 490766935,
            6005943493 / 2108947869,
            393006217 / 1396673457,
            123872331 / 1001029789,
        ],
        [
            -1028468189 / 846180014,
            0,
            0,
            8478235783 / 508512852,
            1311729495 / 1432422823,
            -10304129995 / 1701304382,
            -48777925059 / 3047939560,
            15336726248 / 1032824649,
            -45442868181 / 3398467696,
            3065993473 / 597172653,
        ],
        [
            185892177 / 718116043,
            0,
            0,
            -3185094517 / 667107341,
            -477755414 / 1098053517,
            -703635378 / 230739211,
            5731566787 / 1027545527,
            5232866602 / 850066563,
            -4093664535 / 808688257,
            3962137247 / 1805957418,
            65686358 / 487910083,
        ],
        [
            403863854 / 491063109,
            0,
            0,
            -5068492393 / 434740067,
            -411421997 / 543043805,
            652783627 / 914296604,
            11173962825 / 925320556,
            -13158990841 / 6184727034,
            3936647629 / 1978049680,
            -160528059 / 685178525,
            248638103 / 1413531060,
            0,
        ],
    ]
    b = [
        14005451 / 335480064,
        0,
        0,
        0,
        0,
        -59238493 / 1068277825,
        181606767 / 758867731,
        561292985 / 797845732,
        -1041891430 / 1371343529,
        760417239 / 1151165299,
        118820643 / 751138087,
        -528747749 / 2220607170,
        1 / 4,
    ]
    c = [0, 1 / 18, 1 / 12, 1 / 8, 5 / 16, 3 / 8, 59 / 400, 93 / 200]
    c += [5490023248 / 9719169821, 13 / 20, 1201146811 / 1299019798, 1, 1]
    a = np.zeros((13, 13))
    for i, row in enumerate(rows, start=1):
        a[i, : len(row)] = row
    # `ButcherTableau` checks order conditions up to 5 for tables with c = A𝟙 (order 6 there
    # goes through the simplifying assumption C(3), which no explicit table meets): the table
    # is built with `order=5` and its order 8 checked here, over all 200 rooted trees.
    table = ButcherTableau("dopri8", a, b, c, 5)
    residual = rooted_tree_residual(table, 8)
    if residual > 1e-14:  # measured 1.1e-15: rounding of the rationals (|aᵢⱼ| ≤ 17)
        raise ValueError(f"DOPRI8: an order-8 condition fails by {residual:.3g}")
    return table


DOPRI8 = _dopri8()
"""Prince & Dormand 8(7), 13 stages, its 8th-order solution (`_dopri8`; diffrax's `Dopri8`,
not Hairer's DOP853, whose 8th-order formula is another). Its `order` field is 5, what
`ButcherTableau` checks; the order-8 conditions are checked at import (`rooted_tree_residual`:
largest residual 1.1e-15; at order 9 it is 8e-6) and the order is measured in the tests."""


# --- the step ---------------------------------------------------------------------------------


def _weighted_sum(h, weights, buffer):
    """`h Σⱼ wⱼ Bⱼ` over the leading (stage) axis of `buffer`."""
    w = jnp.reshape(weights, weights.shape + (1,) * (buffer.ndim - 1))
    return h * jnp.sum(w * buffer, axis=0)


class AbstractQuaternionRKMK(AbstractIntegrator):
    """RKMK on SO(3) × Rᵏ, the attitude a unit quaternion, with the class's explicit `tableau`
    (the module's docstring). Order: the tableau's (exact `dexp⁻¹`). Keeps `|q| = 1` (the
    invariant `quaternion_norm_error`) to round-off and the rolling ball's `x₃ = r`
    (`height_error`) exactly; not energy."""

    tableau: ClassVar[ButcherTableau]
    preserves: ClassVar[frozenset[str]] = frozenset({"quaternion_norm_error", "height_error"})
    structures = (AbstractAttitudeQuaternion,)
    reference: ClassVar[str] = "Munthe-Kaas (1998); Hairer, Lubich & Wanner, GNI §IV.8.2"

    def step(self, model, state, solver_state, t, dt):
        tab, dtype, h = self.tableau, state.q.dtype, dt
        a, b, c = (jnp.asarray(x, dtype) for x in (tab.a, tab.b, tab.c))
        q0, y0 = state.q, state._replace(q=None)
        zeros = lambda x: jnp.zeros((tab.stages,) + jnp.shape(x), jnp.result_type(x))

        # The stages run in a loop, their increments kept in buffers. Unrolled, XLA:CPU fuses
        # each stage's increment into the later stages that read it, recomputing it there
        # (`optimization_barrier` does not survive to the fusion passes), so the unrolled
        # stages ran slower and compiled longer than the loop (bench/README.md, "Measurements
        # behind the source's design choices").
        def stage(i, carry):
            k, l, theta_sq = carry
            theta = _weighted_sum(h, a[i], k)
            Y = jax.tree_util.tree_map(lambda y, B: y + _weighted_sum(h, a[i], B), y0, l)
            Y = Y._replace(q=quaternion.compose_exp(q0, theta))
            k_i = so3.dexpinv_apply(-theta, model.angular_velocity(Y))
            l_i = model.vector_field(t + c[i] * h, Y)._replace(q=None)
            k = k.at[i].set(k_i)
            l = jax.tree_util.tree_map(lambda B, x: B.at[i].set(x), l, l_i)
            return k, l, jnp.maximum(theta_sq, _linalg.dot(theta, theta))

        init = (zeros(q0[..., :3]), jax.tree_util.tree_map(zeros, y0), jnp.zeros((), dtype))
        k, l, theta_sq = jax.lax.fori_loop(0, tab.stages, stage, init)
        theta = _weighted_sum(h, b, k)
        y1 = jax.tree_util.tree_map(lambda y, B: y + _weighted_sum(h, b, B), y0, l)
        state1 = y1._replace(q=quaternion.compose_exp(q0, theta))
        within = jnp.maximum(theta_sq, _linalg.dot(theta, theta)) <= math.pi**2
        info = explicit_info(dtype)
        info = info._replace(result=results.where(~within, RESULTS.step_bound_broken, info.result))
        return state1, solver_state, info


class RKMK2(AbstractQuaternionRKMK):
    """RKMK with Heun's tableau: explicit, order 2, two field evaluations per step."""

    name: ClassVar[str] = "RKMK2"
    order: ClassVar[int] = 2
    tableau: ClassVar[ButcherTableau] = HEUN


class RKMK4(AbstractQuaternionRKMK):
    """RKMK with the classical RK4 tableau: explicit, order 4, four evaluations per step."""

    name: ClassVar[str] = "RKMK4"
    order: ClassVar[int] = 4
    tableau: ClassVar[ButcherTableau] = RK4


class RKMK8(AbstractQuaternionRKMK):
    """RKMK with Prince & Dormand 8(7)'s 8th-order tableau (`DOPRI8`) at fixed step: explicit,
    order 8, 13 evaluations per step — for tight references."""

    name: ClassVar[str] = "RKMK8"
    order: ClassVar[int] = 8
    tableau: ClassVar[ButcherTableau] = DOPRI8


RKMK_CLASSES = (RKMK2, RKMK4, RKMK8)
"""The quaternion RKMK methods, for the registry."""
