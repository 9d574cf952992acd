"""Unit quaternions `(w, x, y, z)` with the Hamilton product; `q` and `−q` are one rotation."""

from __future__ import annotations

import jax.numpy as jnp

from .._linalg import matmul
from . import so3
from ._rodrigues import SIN_SERIES, VERSIN_SERIES, poly


def multiply(p, q):
    """Hamilton product `p q`. `(..., 4), (..., 4) -> (..., 4)`. Written component by
    component: under an ensemble `vmap` the whole product is one fused kernel."""
    pw, px, py, pz = (p[..., k] for k in range(4))
    qw, qx, qy, qz = (q[..., k] for k in range(4))
    return jnp.stack(
        [
            pw * qw - px * qx - py * qy - pz * qz,
            pw * qx + px * qw + py * qz - pz * qy,
            pw * qy - px * qz + py * qw + pz * qx,
            pw * qz + px * qy - py * qx + pz * qw,
        ],
        axis=-1,
    )


def conjugate_product_imag(p, q):
    """`Im(p* q)`, `(..., 4), (..., 4) -> (..., 3)`: the imaginary rows of
    `multiply(conjugate(p), q)`, to the bit (a negation is exact), without the conjugate or
    the real row, which a body angular velocity `2 Im(q* q̇)` drops (design note 59)."""
    pw, px, py, pz = (p[..., k] for k in range(4))
    qw, qx, qy, qz = (q[..., k] for k in range(4))
    return jnp.stack(
        [
            pw * qx - px * qw - py * qz + pz * qy,
            pw * qy + px * qz - py * qw - pz * qx,
            pw * qz - px * qy + py * qx - pz * qw,
        ],
        axis=-1,
    )


def conjugate(q):
    """`(w, −x, −y, −z)`: the inverse of a unit quaternion."""
    return jnp.concatenate([q[..., :1], -q[..., 1:]], axis=-1)


def normalize(q):
    return q / jnp.linalg.norm(q, axis=-1, keepdims=True)


def to_matrix(q):
    """Rotation matrix of a unit quaternion, `R v = q v q*`. `(..., 4) -> (..., 3, 3)`."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    # each of the nine products once (they were formed twice each): the same values to the
    # bit, and a second derivative of the matrix (the unreduced ball's Lagrangian) carries
    # a fraction of the operations
    xx, yy, zz, xy, xz, yz, wx, wy, wz = (
        x * x,
        y * y,
        z * z,
        x * y,
        x * z,
        y * z,
        w * x,
        w * y,
        w * z,
    )
    return jnp.stack(
        [
            jnp.stack([1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy)], -1),
            jnp.stack([2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx)], -1),
            jnp.stack([2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy)], -1),
        ],
        axis=-2,
    )


def from_matrix(R):
    """Unit quaternion with `w ≥ 0` from a rotation matrix (Shepperd's method).

    The four candidate formulas are each accurate where their pivot (4w², 4x², 4y², 4z²) is
    the largest; the largest pivot is chosen, so no division by a small number occurs.
    """
    r00, r11, r22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    pivots = jnp.stack(
        [1 + r00 + r11 + r22, 1 + r00 - r11 - r22, 1 - r00 + r11 - r22, 1 - r00 - r11 + r22],
        axis=-1,
    )
    k = jnp.argmax(pivots, axis=-1)
    d21, d02, d10 = (
        R[..., 2, 1] - R[..., 1, 2],
        R[..., 0, 2] - R[..., 2, 0],
        R[..., 1, 0] - R[..., 0, 1],
    )
    s21, s02, s10 = (
        R[..., 2, 1] + R[..., 1, 2],
        R[..., 0, 2] + R[..., 2, 0],
        R[..., 1, 0] + R[..., 0, 1],
    )
    candidates = jnp.stack(
        [
            jnp.stack([pivots[..., 0], d21, d02, d10], -1),
            jnp.stack([d21, pivots[..., 1], s10, s02], -1),
            jnp.stack([d02, s10, pivots[..., 2], s21], -1),
            jnp.stack([d10, s02, s21, pivots[..., 3]], -1),
        ],
        axis=-2,
    )
    q = jnp.take_along_axis(candidates, k[..., None, None], axis=-2)[..., 0, :]
    pivot = jnp.take_along_axis(pivots, k[..., None], axis=-1)
    q = q / (2.0 * jnp.sqrt(pivot))
    return jnp.where(q[..., :1] < 0, -q, q)


def from_rotation_vector(w):
    """`exp` of a rotation vector as a unit quaternion: `(cos(θ/2), sin(θ/2) n)`."""
    x = jnp.sum(w * w, axis=-1, keepdims=True)
    small = x < 1e-2
    t = jnp.sqrt(jnp.where(small, 1.0, x))
    half_sinc = jnp.where(small, 0.5 - x / 48 + x * x / 3840 - x**3 / 645120, jnp.sin(0.5 * t) / t)
    cos_half = jnp.where(small, 1 - x / 8 + x * x / 384 - x**3 / 46080, jnp.cos(0.5 * t))
    return jnp.concatenate([cos_half, half_sinc * w], axis=-1)


def expm1(theta):
    """`exp Θ − 1` of a rotation vector as a quaternion, `(cos φ − 1, (sin φ/φ) Θ/2)`,
    `φ = |Θ|/2`, by the branch-free half-angle series of `so3` (exact to round-off for
    `|Θ| ≤ π`; smooth, so derivatives are finite at 0). `(..., 3) -> (..., 4)`."""
    t0, t1, t2 = theta[..., 0], theta[..., 1], theta[..., 2]
    y = 0.25 * (t0 * t0 + t1 * t1 + t2 * t2)
    half_sinc = 0.5 * poly(y, SIN_SERIES)
    return jnp.stack(
        [-y * poly(y, VERSIN_SERIES), half_sinc * t0, half_sinc * t1, half_sinc * t2],
        axis=-1,
    )


def compose_increments(d, e):
    """`(1 + d)(1 + e) − 1` for quaternion increments `d`, `e` (`expm1` values): products of
    turns close to the identity accumulated without rounding `1 + …`. `(..., 4)`."""
    return d + e + multiply(d, e)


def increment_to_matrix(d):
    """`R(1 + d) − 1` for a unit quaternion `1 + d` (`d = (s − 1, v)`): `2s v̂ + 2v̂²`, formed
    without rounding `1 + …` (accurate relative to its size for small turns), and orthogonal
    plus one rounding of its entries, `O(eps θ)` for a turn by θ, as `so3.expm1`.
    `(..., 4) -> (..., 3, 3)`."""
    V = so3.hat(d[..., 1:])
    s_minus_1 = d[..., :1, None]
    return 2.0 * (V + s_minus_1 * V) + 2.0 * matmul(V, V)


def compose_exp(q0, theta):
    """`q₀ ⊗ exp Θ`, as `q₀ + q₀ ⊗ (exp Θ − 1)` (as `so3.compose_exp`: rounding the small
    increment, not `1 + …`, keeps the norm's error a random walk)."""
    return q0 + multiply(q0, expm1(theta))
