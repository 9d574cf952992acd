"""The Rodrigues coefficients a = sin θ/θ, b = (1 − cos θ)/θ², c = (θ − sin θ)/θ³ of
`so3.exp`, `expm1`, `rotate_exp` and `dexp` as branch-free series in θ² (Horner's rule,
`poly`), with the angle reduced past π and the series cut to a promised `max_angle`
(`_series_lengths`)."""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp

from .._linalg import add, mul


def poly(x, coeffs):
    out = jnp.zeros_like(x) + coeffs[-1]
    for c in coeffs[-2::-1]:
        out = add(mul(out, x), c)
    return out


# Taylor series in y of sin φ/φ and (1 − cos φ)/φ² (φ² = y), 11 terms each: exact to round-off
# for φ ≤ π/2 (checked at 40 digits); and of c = (θ − sin θ)/θ³ in x = θ², 13 terms, within
# 2.8e-17 of it for θ ≤ π. Every term is below ~1 there: Horner's rule adds no cancellation.
SIN_SERIES = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(11))
VERSIN_SERIES = tuple((-1) ** k / math.factorial(2 * k + 2) for k in range(11))
C_SERIES = tuple((-1) ** k / math.factorial(2 * k + 3) for k in range(13))
_FULL_LENGTHS = (len(SIN_SERIES), len(VERSIN_SERIES), len(C_SERIES))


def coefficients(x, max_angle=None):
    """a = sin θ/θ, b = (1 − cos θ)/θ², c = (θ − sin θ)/θ³ for θ² = x, branch-free.

    For θ ≤ π only multiply-adds: the half-angle series `s = sin φ/φ`, `v = (1 − cos φ)/φ²` at
    φ = θ/2 give `a = s (1 − φ²v)` (sin θ = 2 sin φ cos φ) and `b = s²/2` (1 − cos θ = 2 sin²φ),
    c its own series. No sine, cosine, square root or division, and no `where` between a series
    and a closed form: under `vmap` both sides of a `where` are computed for every member.
    Past π the angle is reduced, θ' = θ − 2πn with n = round(θ/2π): a = a(θ')θ'/θ,
    b = b(θ')θ'²/θ², c = (θ − θ'a(θ'))/θ³ (no cancellation there). The reduction's square root
    only sees x > π² (double-where), so derivatives stay finite at θ = 0.

    With `max_angle` (≤ π) the caller promises θ ≤ max_angle: no reduction, and each series is
    cut to the fewest terms exact to round-off up to that angle (`_series_lengths`). The
    reduction and the full series are a large share of an IMIDM ensemble step's time
    (bench/README.md, `imidm_cost_breakdown.py`); callers check the promise (`angle_within`).
    """
    if max_angle is not None:
        return _series_coefficients(x, _series_lengths(max_angle))
    big, theta, reduced = reduce_angle(x)
    a, b, c = _series_coefficients(jnp.where(big, reduced * reduced, x), _FULL_LENGTHS)
    ratio = reduced / theta
    return (
        jnp.where(big, a * ratio, a),
        jnp.where(big, b * (ratio * ratio), b),
        jnp.where(big, (theta - reduced * a) / theta**3, c),
    )


def reduce_angle(x):
    """`(big, θ, θ')` for θ² = x: where θ > π (`big`), θ' = θ − 2πn, n = round(θ/2π), so
    |θ'| ≤ π. The square root only sees x > π² (double-where): derivatives stay finite at 0."""
    big = x > math.pi**2
    theta = jnp.sqrt(jnp.where(big, x, 4.0 * math.pi**2))
    return big, theta, theta - (2.0 * math.pi) * jnp.round(theta / (2.0 * math.pi))


def _series_coefficients(x, lengths):
    """(a, b, c) of `coefficients` from the series cut to `lengths`, for θ ≤ π."""
    n_sin, n_versin, n_c = lengths
    y = 0.25 * x
    s = poly(y, SIN_SERIES[:n_sin])
    return (
        s * (1.0 - y * poly(y, VERSIN_SERIES[:n_versin])),
        0.5 * s * s,
        poly(x, C_SERIES[:n_c]),
    )


@functools.cache
def _series_lengths(max_angle):
    """Terms of (`SIN_SERIES`, `VERSIN_SERIES`, `C_SERIES`) needed for θ ≤ `max_angle`: the
    first term left out, bounding the error of these alternating series, is below float64's
    eps/8 relative to the series' smallest value for θ ≤ π (sin φ/φ ≥ 2/π, (1 − cos φ)/φ² ≥
    0.4, c ≥ 1/π²). At π this gives 11, 10, 13 (the full series are 11, 11, 13 terms), at
    0.5 rad 6, 6, 7, at 0.1 rad 5, 4, 5."""
    x_max = float(max_angle) ** 2
    tol = float(jnp.finfo(jnp.float64).eps) / 8

    def length(first_factorial, z, floor):  # term k is ±z^k/(2k + first_factorial)!
        return next(
            k for k in range(1, 20) if z**k / math.factorial(2 * k + first_factorial) <= tol * floor
        )

    return (
        length(1, x_max / 4, 2 / math.pi),
        length(2, x_max / 4, 0.4),
        length(3, x_max, 1 / math.pi**2),
    )
