"""Symmetric composition schemes: coefficient data, with their order conditions checked.

A symmetric composition `Ψ_h = Φ_{γ_s h} ∘ … ∘ Φ_{γ_1 h}` (`γ_i = γ_{s+1−i}`) of a symmetric
method `Φ` of order 2 has order `p` when the order conditions of Hairer, Lubich & Wanner,
*Geometric Numerical Integration* (2nd ed.), §V.3.2 hold. Rather than transcribe those
conditions (one per H-tree, 8 of them up to order 8), each scheme is checked when it is made
by computing them all at once, exactly up to round-off:

a symmetric method has the formal expansion `Φ_h = exp(hY₁ + h³Y₃ + h⁵Y₅ + …)` (only odd
powers: `Φ_{−h} = Φ_h⁻¹`, GNI §II.3 and §IX.2). With `Y₁, Y₃, …` generic matrices, `Ψ_h` and the
exact flow `exp(hY₁)` are power series in `h` with matrix coefficients; the scheme has order
`p` exactly when their coefficients agree up to `h^p`. The truncated series products are
computed exactly (no small `h`, no fit). The matrices are `n × n` with `n = 6`: by the
Amitsur–Levitzki theorem `n × n` matrices satisfy no polynomial identity of degree below
`2n = 12`, so a nonzero Lie polynomial of degree ≤ 11 (all that orders up to 10 involve) does
not vanish on random ones — a failed condition cannot hide.

The coefficients are as published (Yoshida 1990; Suzuki 1990; Kahan & Li 1997; McLachlan
1995; Sofroniou & Spaletta 2005), to the digits of the tables of Julia's
OrdinaryDiffEq (`symplectic_tableaus.jl`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

_N = 6  # matrix size of the order-condition check (see the module docstring)


def _series_exp(Z, degree):
    """`exp(Z)` for a matrix power series `Z` (`(degree+1, n, n)`, `Z[0] = 0`), truncated."""
    out = np.zeros_like(Z)
    out[0] = np.eye(Z.shape[1])
    term = out.copy()
    for k in range(1, degree + 1):  # Z has no constant term: Zᵏ starts at hᵏ
        term = _series_mul(term, Z, degree) / k
        out += term
    return out


def _series_mul(X, Y, degree):
    """The product of two matrix power series, truncated after `h^degree`:
    `[hᵏ] = Σᵢ X[i] Y[k−i]`."""
    k = np.arange(degree + 1)
    lag = k[:, None] - k[None, :]  # [k, i]: the power of Y's term that meets X[i] in [hᵏ]
    Y_lag = np.where((lag >= 0)[..., None, None], Y[np.maximum(lag, 0)], 0.0)
    return (X @ Y_lag).sum(axis=1)


def order_defects(fractions, degree: int, seed: int = 0) -> np.ndarray:
    """`‖[hᵏ](Ψ_h − exp(hY₁))‖ / ‖[hᵏ]Ψ_h^{|γ|}‖` for `k = 0 … degree`: the relative defect
    of each power of `h` between the composition with step `fractions` of a generic symmetric
    method and the exact flow (normalised by the same coefficient computed with `|γ|`, the
    size of the terms that cancel). A scheme of order `p` has defects at round-off up to
    `k = p`."""
    rng = np.random.default_rng(seed)
    Y = np.zeros((degree + 1, _N, _N))
    for k in range(1, degree + 1, 2):  # odd powers only: a symmetric method
        Y[k] = rng.standard_normal((_N, _N)) / math.sqrt(_N)

    phi = _series_exp(Y, degree)  # Φ_h; the coefficient of hᵏ in Φ_{γh} is γᵏ times its own
    powers = np.arange(degree + 1)[:, None, None]

    def composed(gammas):
        psi = np.zeros_like(Y)
        psi[0] = np.eye(_N)
        for g in gammas:  # Φ_{γ_s h} ∘ … ∘ Φ_{γ_1 h}: the first applied is rightmost
            psi = _series_mul(phi * g**powers, psi, degree)
        return psi

    exact = np.zeros_like(Y)
    exact[1] = Y[1]
    exact = _series_exp(exact, degree)
    psi = composed(fractions)
    scale = composed(np.abs(fractions))
    norm = lambda a: np.linalg.norm(a, axis=(-2, -1))  # noqa: E731
    return norm(psi - exact) / norm(scale)


# A scheme is accepted when its defects up to hᵖ are below this: the tables give ≥ 14
# significant digits, and the defects of correct 25-digit data measure ≤ 1e-15.
DEFECT_TOLERANCE = 1e-12


@dataclass(frozen=True)
class CompositionScheme:
    """Step fractions `γ` of a symmetric composition of a symmetric second-order method, of
    `order`; `name`, `reference`. Checked when made (`order_defects`): `ValueError` if the
    fractions do not sum to one, do not read the same backwards, or miss an order
    condition."""

    name: str
    fractions: tuple[float, ...]
    order: int
    reference: str

    def __post_init__(self):
        g = tuple(float(x) for x in self.fractions)
        object.__setattr__(self, "fractions", g)
        if g != g[::-1]:
            raise ValueError(f"{self.name}: the fractions must read the same backwards")
        defects = order_defects(g, self.order + 1)
        bad = [k for k in range(self.order + 1) if defects[k] > DEFECT_TOLERANCE]
        if bad:
            raise ValueError(
                f"{self.name}: not of order {self.order}: the coefficients of h^{bad} differ "
                f"from the exact flow's (relative defects {defects[bad].tolist()})"
            )

    @property
    def stages(self) -> int:
        return len(self.fractions)


def _palindrome(half, middle):
    return (*half, middle, *reversed(half))


def _middle(half):
    """The central fraction that makes a palindrome with `half` sum to one."""
    return 1.0 - 2.0 * math.fsum(half)


def triple_jump_fractions(base_order: int = 2) -> tuple[float, float, float]:
    """Yoshida's triple jump raising a symmetric method of order `2k` to `2k + 2`:
    `γ₁ = γ₃ = 1/(2 − 2^{1/(2k+1)})`, `γ₂ = 1 − 2γ₁` (GNI eq. (V.3.4))."""
    g1 = 1.0 / (2.0 - 2.0 ** (1.0 / (base_order + 1)))
    return (g1, 1.0 - 2.0 * g1, g1)


def suzuki_fractions(base_order: int = 2) -> tuple[float, ...]:
    """Suzuki's 5-stage fractal, order `2k` to `2k + 2`: `γ₁ = γ₂ = γ₄ = γ₅ =
    1/(4 − 4^{1/(2k+1)})`, `γ₃ = 1 − 4γ₁` (GNI eq. (V.3.5)); smaller error constants than
    the triple jump at 5/3 of its cost."""
    g = 1.0 / (4.0 - 4.0 ** (1.0 / (base_order + 1)))
    return (g, g, 1.0 - 4.0 * g, g, g)


_YOSHIDA6 = (0.78451361047755726382, 0.23557321335935813368, -1.17767998417887100695)
_KAHAN_LI6 = (
    0.39216144400731413927925056,
    0.33259913678935943859974864,
    -0.70624617255763935980996482,
    0.08221359629355080023149045,
)
_MCLACHLAN8 = (
    0.74167036435061295344822780,
    -0.40910082580003159399730010,
    0.19075471029623837995387626,
    -0.57386247111608226665638773,
    0.29906418130365592384446354,
    0.33462491824529818378495798,
    0.31529309239676659663205666,
)
_KAHAN_LI8 = (
    0.13020248308889008087881763,
    0.56116298177510838456196441,
    -0.38947496264484728640807860,
    0.15884190655515560089621075,
    -0.39590389413323757733623154,
    0.18453964097831570709183254,
    0.25837438768632204729397911,
    0.29501172360931029887096624,
)
_SOFRONIOU_SPALETTA10 = (
    0.07879572252168641926390768,
    0.31309610341510852776481247,
    0.02791838323507806610952027,
    -0.22959284159390709415121340,
    0.13096206107716486317465686,
    -0.26973340565451071434460973,
    0.07497334315589143566613711,
    0.11199342399981020488957508,
    0.36613344954622675119314812,
    -0.39910563013603589787862981,
    0.10308739852747107731580277,
    0.41143087395589023782070412,
    -0.00486636058313526176219566,
    -0.39203335370863990644808194,
    0.05194250296244964703718290,
    0.05066509075992449633587434,
    0.04967437063972987905456880,
)

SCHEMES: dict[str, CompositionScheme] = {
    s.name: s
    for s in (
        CompositionScheme(
            "triple-jump", triple_jump_fractions(), 4, "Yoshida (1990); GNI eq. (V.3.4)"
        ),
        CompositionScheme("suzuki5", suzuki_fractions(), 4, "Suzuki (1990); GNI eq. (V.3.5)"),
        CompositionScheme(
            "yoshida6",
            _palindrome(_YOSHIDA6, _middle(_YOSHIDA6)),
            6,
            "Yoshida (1990), solution A (7 stages)",
        ),
        CompositionScheme(
            "kahan-li6",
            _palindrome(_KAHAN_LI6, _middle(_KAHAN_LI6)),
            6,
            "Kahan & Li (1997), s9odr6a (9 stages)",
        ),
        CompositionScheme(
            "mclachlan8",
            _palindrome(_MCLACHLAN8, _middle(_MCLACHLAN8)),
            8,
            "McLachlan (1995), SIAM J. Sci. Comput. 16, 15 stages (Julia's McAte8)",
        ),
        CompositionScheme(
            "kahan-li8",
            _palindrome(_KAHAN_LI8, _middle(_KAHAN_LI8)),
            8,
            "Kahan & Li (1997), s17odr8a (17 stages)",
        ),
        CompositionScheme(
            "sofroniou-spaletta10",
            _palindrome(_SOFRONIOU_SPALETTA10, _middle(_SOFRONIOU_SPALETTA10)),
            10,
            "Sofroniou & Spaletta (2005), s35odr10 (35 stages; Julia's SofSpa10)",
        ),
    )
}
"""The composition schemes by name, each checked to its order when this module loads."""
