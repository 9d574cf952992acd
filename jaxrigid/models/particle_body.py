"""Rigid bodies made of point particles (Chaurasia 2012, §3.1 and §3.5).

From particle masses `mᵏ (n_p,)` and positions `xᵏ (n_p, 3)` in any frame: the mass, the centre
of mass `r`, the inertia tensor about it (§3.1, `I₁₁ … I₂₃`), its principal moments and axes,
and the particles' body-frame coordinates `rᵏ` (origin at the centre of mass, axes along the
principal axes), so that `xᵏ = r + A rᵏ` with `A` the principal axes as columns (a rotation).

The thesis writes `[J]` for two matrices: in the rotation-matrix form (3.3)–(3.10) it is the
"mass matrix" of `T = ½ tr(Ṙ [J] Ṙᵀ)`, which is the second moment `J = Σ mᵏ rᵏ rᵏᵀ`
(`ParticleBody.J`); in the quaternion form (3.17) its entries `J₁, J₂, J₃` are the principal
moments of inertia `𝕀 = tr(J) 1 − J` (`ParticleBody.principal_moments`). Both are diagonal in
the principal frame. `J` is invertible only for a body whose particles are not coplanar.

Built-in shapes: `tetrahedron` (§3.5's coordinates), `regular_tetrahedron`, `disc` (the timing
study's disc, §3.5 "Computation time").
"""

from __future__ import annotations

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from .._checks import Check

__all__ = [
    "ParticleBody",
    "centre_of_mass",
    "disc",
    "inertia_tensor",
    "principal_axes",
    "regular_tetrahedron",
    "second_moment",
    "tetrahedron",
]

_PERMUTATIONS = np.array(list(itertools.permutations(range(3))))  # (6, 3)


def centre_of_mass(m, x):
    """`r = Σ mᵏ xᵏ / Σ mᵏ` (§3.1). `m (..., n_p)`, `x (..., n_p, 3) -> (..., 3)`."""
    return jnp.einsum("...k,...ka->...a", m, x) / jnp.sum(m, axis=-1)[..., None]


def second_moment(m, r):
    """`J = Σ mᵏ rᵏ rᵏᵀ (..., 3, 3)` of positions `r (..., n_p, 3)` about their origin: the
    mass matrix `[J]` of (3.3)–(3.10)."""
    return jnp.einsum("...k,...ka,...kb->...ab", m, r, r)


def inertia_tensor(m, x):
    """Inertia tensor about the centre of mass in the frame of `x` (§3.1, `I₁₁ … I₂₃`):
    `𝕀 = tr(J) 1 − J` with `J` the second moment about the centre of mass. `(..., 3, 3)`."""
    J = second_moment(m, x - centre_of_mass(m, x)[..., None, :])
    trace = jnp.trace(J, axis1=-2, axis2=-1)[..., None, None]
    return trace * jnp.broadcast_to(jnp.eye(3, dtype=J.dtype), J.shape) - J


def principal_axes(inertia):
    """Principal moments `(3,)` and axes `A (3, 3)` (columns, `det A = +1`) of a symmetric
    `inertia (3, 3)`: `Aᵀ 𝕀 A = diag(moments)`.

    The eigenvectors are ordered and signed to lie closest to the frame of `inertia` (the
    permutation maximising `Σ A_ii²`, then `A_ii ≥ 0`, then the column with the smallest
    `|A_ii|` flipped if `det A < 0`): a body given in its principal frame keeps its axes and
    the order of its moments (§3.5's tetrahedron stays as printed).
    """
    moments, V = jnp.linalg.eigh(inertia)
    scores = jnp.sum(V[jnp.arange(3)[None, :], _PERMUTATIONS] ** 2, axis=-1)  # (6,)
    perm = jnp.asarray(_PERMUTATIONS)[jnp.argmax(scores)]  # column of V for axis i
    A = V[:, perm]
    moments = moments[perm]
    diag = jnp.diagonal(A)
    A = A * jnp.where(diag < 0, -1.0, 1.0).astype(A.dtype)[None, :]
    flip = jnp.where(
        (jnp.linalg.det(A) < 0) & (jnp.arange(3) == jnp.argmin(jnp.abs(diag))), -1.0, 1.0
    )
    return moments, A * flip.astype(A.dtype)[None, :]


@jax.jit  # one program, not one per operation, for a body built from concrete particles
def _principal_frame(m, x):
    """`(com (3,), axes (3, 3), r (n_p, 3))`: the centre of mass, the principal axes
    (`principal_axes`) and the particles' positions in that frame."""
    com = centre_of_mass(m, x)
    _, axes = principal_axes(inertia_tensor(m, x))
    return com, axes, (x - com[None, :]) @ axes


class ParticleBody(eqx.Module):
    """A rigid body of `n_p` point particles in its principal frame (§3.1).

    **Fields:** `m (n_p,)` particle masses `mᵏ`; `r (n_p, 3)` body-frame positions `rᵏ`
    (centre of mass at the origin, principal axes); `com (3,)` and `axes (3, 3)` place the body
    as it was given: `xᵏ = com + axes @ rᵏ`. Build it with `from_particles`.
    """

    m: jax.Array
    r: jax.Array
    com: jax.Array
    axes: jax.Array

    @classmethod
    def from_particles(cls, m, x) -> ParticleBody:
        """The body of particles `m (n_p,)` at `x (n_p, 3)` (any frame). Raises `ValueError`
        for bad shapes, and for bad values (`NaN`, a mass `≤ 0`, coincident particles, all
        particles on one line) through `body_checks` (in the graph when traced)."""
        m, x = jnp.asarray(m), jnp.asarray(x)
        if m.ndim != 1 or x.shape != (m.shape[0], 3):
            raise ValueError(
                f"a particle body needs masses m (n_p,) and positions x (n_p, 3), "
                f"got {m.shape}, {x.shape}"
            )
        if m.shape[0] < 3:
            raise ValueError(
                f"a rigid body needs at least 3 particles not on one line, got n_p = {m.shape[0]}"
            )
        if _checks.is_concrete(m, x):
            _checks.raise_at_once(body_checks, m, x)
        else:
            _checks.apply(body_checks(m, x))
        com, axes, r = _principal_frame(m, x)
        return cls(m=m, r=r, com=com, axes=axes)

    @property
    def n_p(self) -> int:
        return self.m.shape[-1]

    @property
    def mass(self):
        """`m_j = Σ mᵏ`."""
        return jnp.sum(self.m, axis=-1)

    @property
    def J(self):
        """`[J] = Σ mᵏ rᵏ rᵏᵀ (3, 3)`, the mass matrix of (3.3)–(3.10); diagonal."""
        return second_moment(self.m, self.r)

    @property
    def inertia(self):
        """Body-frame inertia about the centre of mass, `tr(J) 1 − J (3, 3)`; diagonal."""
        return inertia_tensor(self.m, self.r)

    @property
    def principal_moments(self):
        """`(J₁, J₂, J₃)` of (3.17): the diagonal of `inertia`."""
        return jnp.diagonal(self.inertia, axis1=-2, axis2=-1)

    def positions(self, r, R):
        """Space positions `r + R rᵏ (..., n_p, 3)` of the particles for a centre of mass
        `r (..., 3)` and attitude `R (..., 3, 3)` (body → space)."""
        return r[..., None, :] + jnp.einsum("...ab,kb->...ka", R, self.r)


def body_checks(m, x) -> list[Check]:
    """Value checks of one body's particles `m (n_p,)`, `x (n_p, 3)` (scalar flags).

    Coincident particles: two closer than `√eps` times the body's size (largest distance from
    the centre of mass). Collinear particles: smallest principal moment below `√eps` times the
    largest; the moments are computed to about `eps` times the largest, so below `√eps` the
    third rotational degree of freedom is not determined by the data.
    """
    eps = float(jnp.finfo(jnp.result_type(m, x)).eps)
    finite = jnp.all(jnp.isfinite(m)) & jnp.all(jnp.isfinite(x))
    m_ok = jnp.where(finite, m, 1.0)
    x_ok = jnp.where(finite, x, 0.0)
    d = x_ok[:, None, :] - x_ok[None, :, :]
    n_p = m.shape[0]
    off = ~np.eye(n_p, dtype=bool)
    dist = jnp.sqrt(
        jnp.sum(d * d, axis=-1) + jnp.eye(n_p, dtype=d.dtype)
    )  # 1 on the diagonal: no 0 to sqrt
    size = jnp.max(jnp.linalg.norm(x_ok - centre_of_mass(m_ok, x_ok)[None, :], axis=-1))
    min_dist = jnp.min(jnp.where(off, dist, jnp.inf))
    positive = jnp.all(m_ok > 0)
    moments = jnp.linalg.eigvalsh(inertia_tensor(jnp.where(positive, m_ok, 1.0), x_ok))
    ratio = moments[0] / jnp.maximum(moments[2], jnp.finfo(moments.dtype).tiny)
    spread = finite & (min_dist > eps**0.5 * size)
    return [
        Check(~finite, "particle masses and positions must be finite (got NaN or inf)"),
        Check(
            finite & ~positive,
            "every particle mass must be positive (smallest quoted)",
            jnp.min(m_ok),
        ),
        Check(
            finite & ~(min_dist > eps**0.5 * size),
            "two particles coincide: rigid links need distinct particles (closest distance "
            "quoted, relative to √eps times the body's size)",
            min_dist,
        ),
        Check(
            spread & positive & ~(ratio > eps**0.5),
            "the particles lie on one line: the inertia is degenerate (smallest/largest "
            "principal moment quoted, below √eps), no rigid body with three rotational "
            "degrees of freedom",
            ratio,
        ),
    ]


def tetrahedron(a=1.0, m=1.0) -> ParticleBody:
    """§3.5's tetrahedron: four particles of mass `m` at, in the body frame,
    `(−a/2, −a/3, −a/4)`, `(a/2, −a/3, −a/4)`, `(0, 2a/3, −a/4)`, `(0, 0, 3a/4)`.

    As printed it is not regular (edges `a`, `√5 a/2` twice, `7a/6` twice, `√13 a/3`); its
    centre of mass is the origin and its inertia diagonal, `m a² (17/12, 5/4, 7/6)`. The thesis
    prints `I₃₃ = 5a²/6`, but `Σ (x² + y²) = a²/2 + 2a²/3 = 7a²/6`.
    """
    a, m = jnp.asarray(a), jnp.asarray(m)
    unit = np.array(
        [[-1 / 2, -1 / 3, -1 / 4], [1 / 2, -1 / 3, -1 / 4], [0, 2 / 3, -1 / 4], [0, 0, 3 / 4]]
    )
    return ParticleBody.from_particles(jnp.full((4,), m), a * unit)


def regular_tetrahedron(a=1.0, m=1.0) -> ParticleBody:
    """A regular tetrahedron of edge `a` with a particle of mass `m` at each vertex
    (alternate corners of a cube of side `a/√2`); its inertia is `m a² 1`."""
    a, m = jnp.asarray(a), jnp.asarray(m)
    corners = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) / (2 * np.sqrt(2))
    return ParticleBody.from_particles(jnp.full((4,), m), a * corners)


def disc(n_p=8, a=0.05, t=None, m=1.0) -> ParticleBody:
    """The disc of the thesis's timing study (§3.5, "Computation time"): `n_p` particles of
    mass `m` "uniformly distributed on the circumference of two circles forming faces of the
    disc", radius `a = 0.05`, thickness `t = a/10` (the default).

    The thesis states neither the particle mass nor how the two circles' particles sit
    relative to each other: here `n_p/2` particles per face at the same angles `2πk/(n_p/2)`,
    faces at `z = ±t/2`, `m = 1` per particle (as in §3.5's tetrahedra). It used `n_p = 12`
    (Figure 3.8) and `n_p = 8` (Figure 3.9). `n_p` must be even and `≥ 6` (with 2 per face
    the particles are coplanar and `J` singular).
    """
    if not isinstance(n_p, (int, np.integer)) or n_p < 6 or n_p % 2:
        raise ValueError(f"disc needs an even number of particles n_p ≥ 6, got {n_p!r}")
    a, m = jnp.asarray(a), jnp.asarray(m)
    t = a / 10 if t is None else jnp.asarray(t)
    angles = 2 * np.pi * np.arange(n_p // 2) / (n_p // 2)
    ring = np.stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)], axis=-1)
    face = np.array([0.0, 0.0, 1.0])
    x = jnp.concatenate([a * ring + (t / 2) * face[None], a * ring - (t / 2) * face[None]])
    return ParticleBody.from_particles(jnp.full((n_p,), m), x)
