"""The rotation group SO(3): hat/vee, exponential and logarithm, their differentials, Cayley map.

Conventions (DESIGN.md): `hat(w) @ a == cross(w, a)`; rotation vectors are `(..., 3)`,
matrices `(..., 3, 3)`; leading axes are batch axes. Every map is NaN-safe at its singular
angles (0, and π for `log`) and keeps accurate derivatives there. The Rodrigues coefficients
of `exp`, `expm1`, `rotate_exp`, `dexp` are branch-free series (`_rodrigues`); the
others (`log`, `dexpinv`) switch to Taylor series below `_SERIES_X` (in θ²) with the
double-`where` trick, so that the unused branch never produces a NaN gradient. Products are
formed component by component (`_linalg.cross`, `matmul`), which keeps an ensemble `vmap`
fusible (see `jaxrigid._linalg`).
"""

from __future__ import annotations

import functools
import math
import numbers

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

from .._linalg import add, components, cross, cross3, dot, matmul, mul, stack_entries

# `_rodrigues_coefficients` is looked up here at each call (bench/imidm_cost_breakdown.py swaps it)
from ._rodrigues import coefficients as _rodrigues_coefficients
from ._rodrigues import poly, reduce_angle

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


def _rodrigues_entries(w, a, b, identity):
    """The entries of `[1 +] a ŵ + b ŵ²`, with `ŵ² = w wᵀ − |w|²·1` written out entry by
    entry: no 3×3 product of `hat` matrices, whose slices of zeros would be most of a step's
    program. `a`, `b`: arrays `(...)` or numbers."""
    w = components(w)
    sq = [mul(wk, wk) for wk in w]
    skew = [[None, -w[2], w[1]], [w[2], None, -w[0]], [-w[1], w[0], None]]  # ŵ off the diagonal
    rows = []
    for i in range(3):
        row = []
        for j in range(3):
            if i == j:
                others = [k for k in range(3) if k != i]
                entry = mul(b, -add(sq[others[0]], sq[others[1]]))
                row.append(1.0 + entry if identity else entry)
            else:
                row.append(add(mul(a, skew[i][j]), mul(b, mul(w[i], w[j]))))
        rows.append(row)
    return rows


def _hat_times(u, M):
    """`hat(u) @ M` for the components `u` and the entries `M` (rows): column j is
    `u × M[:, j]`."""
    columns = [cross3(u, [M[0][j], M[1][j], M[2][j]]) for j in range(3)]
    return [[columns[j][i] for j in range(3)] for i in range(3)]


def _coefficient(x, closed_form, series):
    """Evaluate `closed_form(θ)` for θ² = x, or `series` in x when x is small (NaN-safe)."""
    small = x < _SERIES_X
    x_safe = jnp.where(small, 1.0, x)  # the double-where shim: no NaN/inf in the unused branch
    return jnp.where(small, poly(x, series), closed_form(jnp.sqrt(x_safe)))


def reduce_rotation_vector(w):
    """The rotation vector of the same rotation `exp(w)` turning by at most π: `w θ'/θ` where
    θ = |w| > π (`reduce_angle`), else `w`. `(..., 3)`."""
    big, theta, reduced = reduce_angle(_sq_norm(w))
    return jnp.where(big[..., None], w * (reduced / theta)[..., None], w)


def check_max_angle(max_angle):
    """`max_angle` as given, if it is None or a number in (0, π]; else a `ValueError`."""
    if max_angle is None:
        return None
    real = isinstance(max_angle, numbers.Real) and not isinstance(max_angle, bool)
    if not (real and 0.0 < max_angle <= math.pi):
        raise ValueError(
            f"max_angle must be None (any angle) or a number in (0, π], got {max_angle!r}"
        )
    return float(max_angle)


def angle_within(w, max_angle):
    """True where the rotation vector `w (..., 3)` turns by at most `max_angle` (None: always).
    False for NaN, so a promise that cannot be checked counts as broken."""
    if max_angle is None:
        return jnp.ones(w.shape[:-1], dtype=bool)
    return _sq_norm(w) <= max_angle**2


def rodrigues_coefficients(theta_sq, max_angle=None):
    """`(a, b, c) = (sin θ/θ, (1 − cos θ)/θ², (θ − sin θ)/θ³)` for θ² = `theta_sq` `(...)`:
    the coefficients of `exp`, `rotate_exp` and `dexp`, branch-free and smooth at 0
    (`max_angle` as in `exp`)."""
    return _rodrigues_coefficients(theta_sq, check_max_angle(max_angle))


def _sq_norm(w):
    return dot(w, w)


def exp(w, max_angle=None):
    """Rodrigues' formula `exp(hat(w)) = 1 + a ŵ + b ŵ²`. `(..., 3) -> (..., 3, 3)`.

    Its derivative is the closed form `d exp(w)[δ] = hat(dexp(w) δ) exp(w)` (eq. 9), so
    Jacobians by `jax.jacfwd` cost a few cross products instead of differentiating the
    trigonometric coefficients. `max_angle` (here and in `expm1`, `compose_exp`, `rotate_exp`,
    `rotate_expm1`, `dexp`): a promise that |w| ≤ max_angle ≤ π, which shortens the
    coefficients' series (`_rodrigues_coefficients`); the caller checks it with
    `angle_within`.
    """
    return _exp(w, check_max_angle(max_angle))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _exp(w, max_angle):
    a, b, _ = _rodrigues_coefficients(_sq_norm(w), max_angle)
    return stack_entries(_rodrigues_entries(w, a, b, identity=True))


@_exp.defjvp
def _exp_jvp(max_angle, primals, tangents):
    (w,), (dw,) = primals, tangents
    a, b, c = _rodrigues_coefficients(_sq_norm(w), max_angle)
    E = _rodrigues_entries(w, a, b, identity=True)
    return stack_entries(E), stack_entries(
        _hat_times(_dexp_terms(components(w), components(dw), b, c), E)
    )


def expm1(w, max_angle=None):
    """`exp(w) − 1 = a ŵ + b ŵ²`, accurate when small (no rounding of `1 + …`)."""
    return _expm1(w, check_max_angle(max_angle))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _expm1(w, max_angle):
    a, b, _ = _rodrigues_coefficients(_sq_norm(w), max_angle)
    return stack_entries(_rodrigues_entries(w, a, b, identity=False))


@_expm1.defjvp
def _expm1_jvp(max_angle, primals, tangents):
    (w,), (dw,) = primals, tangents
    a, b, c = _rodrigues_coefficients(_sq_norm(w), max_angle)
    A = _rodrigues_entries(w, a, b, identity=False)
    E = [[1.0 + A[i][j] if i == j else A[i][j] for j in range(3)] for i in range(3)]
    return stack_entries(A), stack_entries(
        _hat_times(_dexp_terms(components(w), components(dw), b, c), E)
    )


def compose_exp(R, w, max_angle=None):
    """`R exp(w)` as `R + R (exp(w) − 1)`.

    Time stepping multiplies by increments close to the identity; forming `1 + A` first would
    round the small `A` the same way at every step of a steady rotation, and that error
    accumulates linearly in the orthogonality of `R`. Adding `R A` to `R` rounds differently
    at every step, so the error only random-walks.
    """
    return R + matmul(R, expm1(w, max_angle))


# The helpers below take and return lists of components (`_linalg.components`), so that a
# chain of cross products slices each vector once and stacks the result once.


def _dexp_terms(w, v, b, c):
    """`dexp(w) v = v + b w×v + c w×(w×v)`."""
    wv = cross3(w, v)
    wwv = cross3(w, wv)
    return [add(add(v[k], mul(b, wv[k])), mul(c, wwv[k])) for k in range(3)]


def _rotate_minus_v(w, v, a, b):
    """`exp(w) v − v = a w×v + b w×(w×v)`."""
    wv = cross3(w, v)
    wwv = cross3(w, wv)
    return [add(mul(a, wv[k]), mul(b, wwv[k])) for k in range(3)]


def rotate_exp(w, v, max_angle=None):
    """`exp(w) @ v` without forming the matrix: v + a w×v + b w×(w×v). `(..., 3)`."""
    return _rotate_exp(w, v, check_max_angle(max_angle), False)


def rotate_expm1(w, v, max_angle=None):
    """`exp(w) @ v − v = a w×v + b w×(w×v)`, accurate when small (no rounding of `v + …`):
    the increment of `v` that a compensated sum (`jaxrigid.compensated`) adds. `(..., 3)`."""
    return _rotate_exp(w, v, check_max_angle(max_angle), True)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _rotate_exp(w, v, max_angle, minus_v):
    a, b, _ = _rodrigues_coefficients(_sq_norm(w), max_angle)
    v_ = components(v)
    increment = _rotate_minus_v(components(w), v_, a, b)
    out = increment if minus_v else [add(v_[k], increment[k]) for k in range(3)]
    return jnp.stack(out, axis=-1)


@functools.partial(_rotate_exp.defjvp, symbolic_zeros=True)
def _rotate_exp_jvp(max_angle, minus_v, primals, tangents):
    # d[exp(w) v] = (dexp(w) dw) × (exp(w) v) + exp(w) dv (less dv for `exp(w) v − v`); a term
    # whose tangent is a symbolic zero (e.g. `v` a constant of a Newton residual) is left out,
    # not computed from zeros
    (w, v), (dw, dv) = primals, tangents
    a, b, c = _rodrigues_coefficients(_sq_norm(w), max_angle)
    w_, v_ = components(w), components(v)
    increment = _rotate_minus_v(w_, v_, a, b)
    rotated = [add(v_[k], increment[k]) for k in range(3)]
    terms = []
    if not isinstance(dw, SymbolicZero):
        terms.append(cross3(_dexp_terms(w_, components(dw), b, c), rotated))
    if not isinstance(dv, SymbolicZero):
        dv_ = components(dv)
        dv_increment = _rotate_minus_v(w_, dv_, a, b)
        terms.append(dv_increment if minus_v else [add(dv_[k], dv_increment[k]) for k in range(3)])
    out = jnp.stack(increment if minus_v else rotated, axis=-1)
    if not terms:
        return out, jnp.zeros_like(out)
    tangent = [functools.reduce(add, [term[k] for term in terms]) for k in range(3)]
    return out, jnp.stack(tangent, axis=-1)


def dexp(w, max_angle=None):
    """Krysl eq. (9): `dexp_w = 1 + (1−cos θ)/θ² ŵ + (1 − sin θ/θ)/θ² ŵ²`.

    Right-trivialised differential of `exp`: `d exp(w)[δ] = hat(dexp(w) @ δ) @ exp(w)`, and
    `exp(w)ᵀ d exp(w)[δ] = hat(dexp(-w) @ δ)`.
    """
    _, b, c = _rodrigues_coefficients(_sq_norm(w), check_max_angle(max_angle))
    return stack_entries(_rodrigues_entries(w, b, c, identity=True))


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
    return stack_entries(_rodrigues_entries(w, -0.5, d, identity=True))


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
