"""The unit sphere S²: tangent projection, exponential and logarithm, geodesics and parallel
transport (Gebhardt & Romero 2020, §2.1, eqs. 1–11).

Points are unit vectors `(..., 3)`, tangent vectors at `d` are `v` with `d · v = 0`; leading
axes are batch axes. The maps are NaN-safe where their printed closed forms divide by zero
(`|v| = 0` in (6), `d = d0` in (7)): the coefficients `sin θ/θ` and `θ/sin θ` switch to Taylor
series there (double-`where`, so gradients stay finite).

Parallel transport along the geodesic from `d0` to `d` is computed as
`w = w0 − (d · w0)/(1 + d0 · d) (d0 + d)`, which equals the paper's (10) (tested) but needs no
logarithms and is regular at `d = d0`; both are singular at the antipode `d = −d0`, where the
geodesic is not unique.
"""

from __future__ import annotations

import jax.numpy as jnp

from ._rodrigues import poly

# θ² below which sin θ/θ and θ/sin θ use their series (5 terms: exact to 1e-17 there).
_SERIES_X = 1e-2


def _sinc(x):
    """`sin θ/θ` for θ² = x (series below `_SERIES_X`)."""
    small = x < _SERIES_X
    t = jnp.sqrt(jnp.where(small, 1.0, x))
    series = poly(x, (1.0, -1 / 6, 1 / 120, -1 / 5040, 1 / 362880))
    return jnp.where(small, series, jnp.sin(t) / t)


def _dot(a, b):
    return jnp.sum(a * b, axis=-1)


def project(d, v):
    """Tangent part `(I − d ⊗ d) v` of `v` at `d` (the projection of eq. 4)."""
    return v - _dot(d, v)[..., None] * d


def _cos_sqrt(x):
    """`cos θ` for θ² = x, smooth at x = 0 (series below `_SERIES_X`)."""
    small = x < _SERIES_X
    t = jnp.sqrt(jnp.where(small, 1.0, x))
    series = poly(x, (1.0, -1 / 2, 1 / 24, -1 / 720, 1 / 40320, -1 / 3628800))
    return jnp.where(small, series, jnp.cos(t))


def exp(d0, v0):
    """Eq. (6): `exp_{d0}(v0) = cos|v0| d0 + sin|v0| v0/|v0|`, for `v0` tangent at `d0`."""
    x = _dot(v0, v0)
    return _cos_sqrt(x)[..., None] * d0 + _sinc(x)[..., None] * v0


def angle(d0, d):
    """Geodesic distance `arccos(d0 · d)`, as `atan2(|d0 × d|, d0 · d)` (accurate at 0 and π)."""
    s2 = _dot(jnp.cross(d0, d), jnp.cross(d0, d))
    s = jnp.sqrt(jnp.where(s2 > 0, s2, 1.0))
    return jnp.arctan2(jnp.where(s2 > 0, s, 0.0), _dot(d0, d))


def log(d0, d):
    """Eq. (7): `log_{d0}(d) = θ (I − d0⊗d0) d / |(I − d0⊗d0) d|`, θ = arccos(d0 · d); d ≠ −d0.

    `|(I − d0⊗d0) d| = sin θ`, so this is `(θ/sin θ) (I − d0⊗d0) d`; near θ = 0 the ratio is
    the series of `arcsin(s)/s` in `s² = |d0 × d|²` (smooth, so gradients stay finite).
    """
    c = jnp.cross(d0, d)
    s2 = _dot(c, c)
    small = (s2 < _SERIES_X) & (_dot(d0, d) > 0)
    s = jnp.sqrt(jnp.where(small, 1.0, s2))
    theta = jnp.arctan2(s, _dot(d0, d))
    series = poly(s2, (1.0, 1 / 6, 3 / 40, 5 / 112, 35 / 1152, 63 / 2816, 231 / 13312))
    ratio = jnp.where(small, series, theta / s)
    return ratio[..., None] * project(d0, d)


def geodesic(d0, v0, s):
    """Eq. (9): the great arc `d_G(s) = cos(|v0|s) d0 + sin(|v0|s) v0/|v0|` (= exp_{d0}(s v0))."""
    return exp(d0, jnp.asarray(s)[..., None] * v0)


def parallel_transport(d0, d, w0):
    """Transport `w0 ∈ T_{d0}S²` to `T_d S²` along the geodesic from `d0` to `d` (eq. 10).

    Closed form `w0 − (d · w0)/(1 + d0 · d) (d0 + d)`: the rotation about `d0 × d` that takes
    `d0` to `d`, applied to `w0` (it satisfies eq. 11 along the arc); undefined at `d = −d0`.
    """
    return w0 - (_dot(d, w0) / (1.0 + _dot(d0, d)))[..., None] * (d0 + d)


def parallel_transport_eq10(d0, d, w0):
    """Eq. (10) as printed: `(I − (log_{d0}d + log_d d0) ⊗ log_{d0}d / θ²) w0`, θ = arccos(d0·d).

    Singular at `d = d0` (0/0) and `d = −d0`; kept to test `parallel_transport` against."""
    a = log(d0, d)
    theta2 = angle(d0, d) ** 2
    return w0 - (_dot(a, w0) / theta2)[..., None] * (a + log(d, d0))
