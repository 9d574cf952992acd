"""Prince & Dormand's explicit RK8(7)13M, its 8th-order solution, as a Butcher table
(`DOPRI8`): the tableau of the rolling ball's RKMK8. Its order 8 is checked, tree by tree, when
the table is built (`butcher.rooted_tree_residual`)."""

from __future__ import annotations

import numpy as np

from .butcher import ButcherTableau, rooted_tree_residual


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
