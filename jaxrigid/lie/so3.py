"""The rotation group SO(3): hat/vee, exponential and logarithm, their differentials, Cayley map.

Conventions (DESIGN.md): `hat(w) @ a == cross(w, a)`; rotation vectors are `(..., 3)`,
matrices `(..., 3, 3)`; leading axes are batch axes. Every map is NaN-safe at its singular
angles (0, and π for `log`) and keeps accurate derivatives there. The Rodrigues coefficients
of `exp`, `expm1`, `rotate_exp`, `dexp` are branch-free series (`_rodrigues_coefficients`); the
others (`log`, `dexpinv`) switch to Taylor series below `_SERIES_X` (in θ²) with the
double-`where` trick, so that the unused branch never produces a NaN gradient. Products are
formed component by component (`_linalg.cross`, `matmul`), which keeps an ensemble `vmap`
fusible (see `jaxrigid._linalg`).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from .._linalg import cross, dot, matmul

# θ² below which coefficients use their series. With five terms each series is exact to
# below 1e-17 relative there, and above it the closed forms lose at most eps/θ² ≈ 2e-14
# relative (float64) to cancellation.
_SERIES_X = 1e-2


def hat(w):
    """Skew matrix of `w`: `hat(w) @ a == cross(w, a)`. `(..., 3) -> (..., 3, 3)`."""
    w1, w2, w3 = w[..., 0], w[..., 1], w[..., 2]
    z = jnp.zeros_like(w1)
    return jnp.stack(
        [
            jnp.stack([z, -w3, w2], axis=-1),
            jnp.stack([w3, z, -w1], axis=-1),
            jnp.stack([-w2, w1, z], axis=-1),
        ],
        axis=-2,
    )


def vee(W):
    """Axial vector of the skew part of `W` (inverse of `hat` on skew matrices)."""
    return 0.5 * jnp.stack(
        [W[..., 2, 1] - W[..., 1, 2], W[..., 0, 2] - W[..., 2, 0], W[..., 1, 0] - W[..., 0, 1]],
        axis=-1,
    )


def _eye_like(W):
    """The identity broadcast to `W`'s shape (explicitly: rank promotion may be disabled)."""
    return jnp.broadcast_to(jnp.eye(3, dtype=W.dtype), W.shape)


def _poly(x, coeffs):
    out = jnp.zeros_like(x) + coeffs[-1]
    for c in coeffs[-2::-1]:
        out = out * x + c
    return out


def _coefficient(x, closed_form, series):
    """Evaluate `closed_form(θ)` for θ² = x, or `series` in x when x is small (NaN-safe)."""
    small = x < _SERIES_X
    x_safe = jnp.where(small, 1.0, x)  # the double-where shim: no NaN/inf in the unused branch
    return jnp.where(small, _poly(x, series), closed_form(jnp.sqrt(x_safe)))


# Taylor series in y of sin φ/φ and (1 − cos φ)/φ² (φ² = y), 11 terms each: exact to round-off
# for φ ≤ π/2 (checked at 40 digits); and of c = (θ − sin θ)/θ³ in x = θ², 13 terms, within
# 2.8e-17 of it for θ ≤ π. Every term is below ~1 there: Horner's rule adds no cancellation.
_SIN_SERIES = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(11))
_VERSIN_SERIES = tuple((-1) ** k / math.factorial(2 * k + 2) for k in range(11))
_C_SERIES = tuple((-1) ** k / math.factorial(2 * k + 3) for k in range(13))


def _rodrigues_coefficients(x):
    """a = sin θ/θ, b = (1 − cos θ)/θ², c = (θ − sin θ)/θ³ for θ² = x, branch-free.

    For θ ≤ π only multiply-adds: the half-angle series `s = sin φ/φ`, `v = (1 − cos φ)/φ²` at
    φ = θ/2 give `a = s (1 − φ²v)` (sin θ = 2 sin φ cos φ) and `b = s²/2` (1 − cos θ = 2 sin²φ),
    c its own series. No sine, cosine, square root or division, and no `where` between a series
    and a closed form: under `vmap` both sides of a `where` are computed for every member, and
    float64 sin/cos cost more than the whole series (`python bench/component_layout.py`).
    Past π the angle is reduced, θ' = θ − 2πn with n = round(θ/2π): a = a(θ')θ'/θ,
    b = b(θ')θ'²/θ², c = (θ − θ'a(θ'))/θ³ (no cancellation there). The reduction's square root
    only sees x > π² (double-where), so derivatives stay finite at θ = 0.
    """
    big = x > math.pi**2
    theta = jnp.sqrt(jnp.where(big, x, 4.0 * math.pi**2))
    reduced = theta - (2.0 * math.pi) * jnp.round(theta / (2.0 * math.pi))
    x = jnp.where(big, reduced * reduced, x)
    y = 0.25 * x
    s = _poly(y, _SIN_SERIES)
    a = s * (1.0 - y * _poly(y, _VERSIN_SERIES))
    b = 0.5 * s * s
    c = _poly(x, _C_SERIES)
    ratio = reduced / theta
    return (
        jnp.where(big, a * ratio, a),
        jnp.where(big, b * (ratio * ratio), b),
        jnp.where(big, (theta - reduced * a) / theta**3, c),
    )


def _sq_norm(w):
    return dot(w, w)


@jax.custom_jvp
def exp(w):
    """Rodrigues' formula `exp(hat(w)) = 1 + a ŵ + b ŵ²`. `(..., 3) -> (..., 3, 3)`.

    Its derivative is the closed form `d exp(w)[δ] = hat(dexp(w) δ) exp(w)` (eq. 9), so
    Jacobians by `jax.jacfwd` cost a few cross products instead of differentiating the
    trigonometric coefficients.
    """
    a, b, _ = _rodrigues_coefficients(_sq_norm(w))
    W = hat(w)
    return _eye_like(W) + a[..., None, None] * W + b[..., None, None] * matmul(W, W)


@exp.defjvp
def _exp_jvp(primals, tangents):
    (w,), (dw,) = primals, tangents
    a, b, c = _rodrigues_coefficients(_sq_norm(w))
    W = hat(w)
    E = _eye_like(W) + a[..., None, None] * W + b[..., None, None] * matmul(W, W)
    return E, matmul(hat(_dexp_apply(w, dw, b, c)), E)


@jax.custom_jvp
def expm1(w):
    """`exp(w) − 1 = a ŵ + b ŵ²`, accurate when small (no rounding of `1 + …`)."""
    a, b, _ = _rodrigues_coefficients(_sq_norm(w))
    W = hat(w)
    return a[..., None, None] * W + b[..., None, None] * matmul(W, W)


@expm1.defjvp
def _expm1_jvp(primals, tangents):
    (w,), (dw,) = primals, tangents
    a, b, c = _rodrigues_coefficients(_sq_norm(w))
    W = hat(w)
    A = a[..., None, None] * W + b[..., None, None] * matmul(W, W)
    return A, matmul(hat(_dexp_apply(w, dw, b, c)), _eye_like(W) + A)


def compose_exp(R, w):
    """`R exp(w)` as `R + R (exp(w) − 1)`.

    Time stepping multiplies by increments close to the identity; forming `1 + A` first would
    round the small `A` the same way at every step of a steady rotation, and that error
    accumulates linearly in the orthogonality of `R`. Adding `R A` to `R` rounds differently
    at every step, so the error only random-walks.
    """
    return R + matmul(R, expm1(w))


def _dexp_apply(w, v, b, c):
    wv = cross(w, v)
    return v + b[..., None] * wv + c[..., None] * cross(w, wv)


def _rotate(w, v, a, b):
    wv = cross(w, v)
    return v + a[..., None] * wv + b[..., None] * cross(w, wv)


@jax.custom_jvp
def rotate_exp(w, v):
    """`exp(w) @ v` without forming the matrix: v + a w×v + b w×(w×v). `(..., 3)`."""
    a, b, _ = _rodrigues_coefficients(_sq_norm(w))
    return _rotate(w, v, a, b)


@rotate_exp.defjvp
def _rotate_exp_jvp(primals, tangents):
    # d[exp(w) v] = (dexp(w) dw) × (exp(w) v) + exp(w) dv
    (w, v), (dw, dv) = primals, tangents
    a, b, c = _rodrigues_coefficients(_sq_norm(w))
    out = _rotate(w, v, a, b)
    return out, cross(_dexp_apply(w, dw, b, c), out) + _rotate(w, dv, a, b)


def dexp(w):
    """Krysl eq. (9): `dexp_w = 1 + (1−cos θ)/θ² ŵ + (1 − sin θ/θ)/θ² ŵ²`.

    Right-trivialised differential of `exp`: `d exp(w)[δ] = hat(dexp(w) @ δ) @ exp(w)`, and
    `exp(w)ᵀ d exp(w)[δ] = hat(dexp(-w) @ δ)`.
    """
    _, b, c = _rodrigues_coefficients(_sq_norm(w))
    W = hat(w)
    eye = _eye_like(W)
    return eye + b[..., None, None] * W + c[..., None, None] * matmul(W, W)


def _dexpinv_coefficient(x):
    """(1 − (θ/2) cot(θ/2)) / θ²."""
    return _coefficient(
        x,
        lambda t: (1.0 - 0.5 * t / jnp.tan(0.5 * t)) / t**2,
        (1 / 12, 1 / 720, 1 / 30240, 1 / 1209600, 1 / 47900160),
    )


def dexpinv(w):
    """Inverse of `dexp` (Krysl eq. 9): `1 − ½ŵ + (1 − (θ/2)cot(θ/2))/θ² ŵ²`, for θ < 2π."""
    d = _dexpinv_coefficient(_sq_norm(w))
    W = hat(w)
    eye = _eye_like(W)
    return eye - 0.5 * W + d[..., None, None] * matmul(W, W)


def dexpinv_apply(w, v):
    """`dexpinv(w) @ v` without forming the matrix. `(..., 3)`."""
    d = _dexpinv_coefficient(_sq_norm(w))
    wv = cross(w, v)
    return v - 0.5 * wv + d[..., None] * cross(w, wv)


def log(R):
    """Rotation vector `w` with `exp(w) = R` and |w| ≤ π; accurate near 0 and near π.

    θ comes from `atan2(|s|, c)` with `s = vee(R)` (= sin θ n) and `c = (tr R − 1)/2`, which is
    accurate at every angle. The axis is `s/|s|` for θ ≤ π/2 and, past that where `s` loses
    its digits, the dominant column of `(R + Rᵀ − 2c)/(2(1 − c)) = n nᵀ`, signed along `s`.
    """
    s = vee(R)
    c = 0.5 * (jnp.trace(R, axis1=-2, axis2=-1) - 1.0)
    s2 = _sq_norm(s)
    s_norm = jnp.sqrt(jnp.where(s2 > 0, s2, 1.0))
    theta = jnp.arctan2(jnp.where(s2 > 0, s_norm, 0.0), c)

    # Small and moderate angles: w = θ/sin θ · s.
    x = theta**2
    factor = _coefficient(
        x, lambda t: t / jnp.sin(t), (1.0, 1 / 6, 7 / 360, 31 / 15120, 127 / 604800)
    )
    near_pi = c < 0.0
    w_small = jnp.where(near_pi[..., None], 0.0, factor[..., None] * s)

    # Large angles: axis from the symmetric part.
    eye = _eye_like(R)
    one_minus_c = jnp.where(near_pi, 1.0 - c, 1.0)
    B = (R + jnp.swapaxes(R, -1, -2) - 2.0 * c[..., None, None] * eye) / (
        2.0 * one_minus_c[..., None, None]
    )
    diag = jnp.diagonal(B, axis1=-2, axis2=-1)
    k = jnp.argmax(diag, axis=-1)
    col = jnp.take_along_axis(B, k[..., None, None], axis=-1)[..., 0]
    col_norm2 = jnp.take_along_axis(diag, k[..., None], axis=-1)[..., 0]
    col_norm = jnp.sqrt(jnp.where(near_pi, jnp.maximum(col_norm2, 0.0), 1.0))
    safe_norm = jnp.where(col_norm > 0, col_norm, 1.0)
    n = col / safe_norm[..., None]
    sign = jnp.where(jnp.sum(n * s, axis=-1) < 0, -1.0, 1.0)
    w_large = jnp.where(near_pi[..., None], (sign * theta)[..., None] * n, 0.0)
    return w_small + w_large


def cayley(w):
    """Cayley map `cay(ŵ) = (1 − ŵ/2)⁻¹(1 + ŵ/2) = 1 + 4/(4 + |w|²) (ŵ + ŵ²/2)`.

    The scaling with ½ makes `cay(h ω̂) = exp(h ω̂) + O(h³)`, the form AKW uses.
    """
    k = 4.0 / (4.0 + _sq_norm(w))
    W = hat(w)
    eye = _eye_like(W)
    return eye + k[..., None, None] * (W + 0.5 * matmul(W, W))


def orthogonality_error(R):
    """`‖RᵀR − 1‖_F`, the distance of `R` from the orthogonal group."""
    E = matmul(jnp.swapaxes(R, -1, -2), R) - _eye_like(R)
    return jnp.sqrt(jnp.sum(E * E, axis=(-2, -1)))
