"""The rigid body described by constrained directors, standard and non-twisting
(Gebhardt & Romero 2020, §3.5 and §4.2). The continuous split-form equations of the
non-twisting body (§4.1, eqs. 69–71), its independent reference, are
`jaxrigid.reference.split_form`.

Configuration `q = (d1, d2, d3) ∈ R⁹` (the body frame `Λ = dᵢ ⊗ Dᵢ`, i.e. `R = [d1 d2 d3]`
column-wise, `dᵢ = R Eᵢ`), velocities `v = q̇`. With Euler's inertia coefficients
`𝒥ⁱʲ = ∫ρ θⁱθʲ` (66) the kinetic energy is `K = ½ q̇ᵀ M q̇`, `M = 𝒥 ⊗ I₃` (88), the director
momenta are `πⁱ = 𝒥ⁱʲ ḋⱼ` (65), the spatial angular momentum is `π = Σ dᵢ × πⁱ` and the
material one `Πⁱ = dᵢ · π` (74, 109). The convected inertia is `J = tr(𝒥) I − 𝒥`, and
conversely `𝒥 = ½ tr(J) I − J` (111: J = [[3, −1/7, 0], [−1/7, 4, 0], [0, 0, 5]] ⇔
𝒥 = [[3, 1/7, 0], [1/7, 2, 0], [0, 0, 1]]). An external moment `m` enters by the virtual work
(68)/(84), `Σ ½ (dᵢ × δdᵢ) · m`: the generalised force on `dᵢ` is `fⁱ = ½ m × dᵢ`.

**Where the paper is silent or slips (decisions).**
- (63) lists only the three orthogonality conditions `d2·d3, d1·d3, d1·d2`, with `λ ∈ R³`;
  but the configuration space (56) is `S² × S² × S²` and the tangent space (57) is that of
  rigid rotations: without the unit-length conditions nothing holds `|dᵢ| = 1` (the centripetal
  force along `dᵢ` is missing and a spinning director stretches). We use the six conditions
  `h = (½(d1·d1 − 1), ½(d2·d2 − 1), ½(d3·d3 − 1), d2·d3, d1·d3, d1·d2)`, `λ ∈ R⁶` (as in
  Betsch & Steinmann's director formulation, the paper's [14–16]).
- The non-twisting constraint (80) is `g = (1 − a) ḋ1·d2 − a ḋ2·d1 = G_a(q) q̇` with
  `G_a = ((1 − a) d2, −a d1, 0)`. `G_a − G_0 = −a ∂(d1·d2)/∂q`, a row of the holonomic
  Jacobian: the force `G_aᵀμ` differs from `G_0ᵀμ` by a constraint force that `λ` absorbs, so
  the motion does not depend on `a` (the paper picks `a = 1` and `a = 0` in the two halves of
  its proof of Theorem 5.2; both are the same scheme). We use `a = 0`.
- The non-twisting body takes the moment as `m⊥` (84): a moment with a `d3` component is the
  caller's error (the loads of §6 are combinations of `d1` and `d2`).
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _checks
from .base import Check, event_ndims, finite, known_zero, spd3_checks
from .structures import AbstractDirectorBody


class DirectorState(NamedTuple):
    """Directors `q = (d1, d2, d3)` stacked `(..., 9)` and their velocities `v = q̇ (..., 9)`."""

    q: jax.Array
    v: jax.Array


# --- inertia ------------------------------------------------------------------------------


def euler_coefficients(J):
    """Euler's inertia coefficients `𝒥 = ½ tr(J) I − J` from the convected inertia (66, 111)."""
    return 0.5 * jnp.trace(J) * jnp.eye(3, dtype=J.dtype) - J


def convected_inertia(euler):
    """The convected inertia `J = tr(𝒥) I − 𝒥` from Euler's coefficients (111)."""
    return jnp.trace(euler) * jnp.eye(3, dtype=euler.dtype) - euler


def mass_matrix(euler):
    """`M = 𝒥 ⊗ I₃ (9, 9)` (88)."""
    return jnp.kron(euler, jnp.eye(3, dtype=euler.dtype))


# --- configuration, constraints, momenta --------------------------------------------------


def directors(q):
    """`(d1, d2, d3)`, each `(..., 3)`, from `q (..., 9)`."""
    return q[..., 0:3], q[..., 3:6], q[..., 6:9]


def rotation(q):
    """`R = [d1 d2 d3] (..., 3, 3)` (columns), the rotation `Λ = dᵢ ⊗ Eᵢ`."""
    return jnp.stack(directors(q), axis=-1)


def from_rotation(R, omega):
    """`DirectorState` of attitude `R (3, 3)` spinning at the spatial angular velocity `omega`:
    `dᵢ = R Eᵢ`, `ḋᵢ = ω × dᵢ` (57)."""
    d = jnp.swapaxes(R, -1, -2)  # rows d1, d2, d3
    v = jnp.cross(omega[..., None, :], d)
    return DirectorState(d.reshape(d.shape[:-2] + (9,)), v.reshape(v.shape[:-2] + (9,)))


def constraints(q):
    """`h(q) (6,)`: unit length and mutual orthogonality of the directors ((63) completed by
    the unit-length conditions of (56); see the module docstring)."""
    d1, d2, d3 = directors(q)
    dot = lambda a, b: jnp.sum(a * b, axis=-1)  # noqa: E731
    return jnp.stack(
        [
            0.5 * (dot(d1, d1) - 1.0),
            0.5 * (dot(d2, d2) - 1.0),
            0.5 * (dot(d3, d3) - 1.0),
            dot(d2, d3),
            dot(d1, d3),
            dot(d1, d2),
        ],
        axis=-1,
    )


def constraint_jacobian(q):
    """`H(q) = ∂h/∂q (6, 9)`, by autodiff (linear in `q`)."""
    return jax.jacfwd(constraints)(q)


def nontwisting_matrix(q, a=0.0):
    """`G_a(q) (1, 9)` with `G_a(q) q̇ = (1 − a) ḋ1·d2 − a ḋ2·d1`, the constraint (80)."""
    d1, d2, _ = directors(q)
    return jnp.concatenate([(1.0 - a) * d2, -a * d1, jnp.zeros_like(d1)])[None, :]


def director_momenta(euler, v):
    """`πⁱ = 𝒥ⁱʲ ḋⱼ` (65), rows of a `(3, 3)` array."""
    return euler @ v.reshape(3, 3)


def spatial_momentum(euler, state: DirectorState):
    """`π = Σᵢ dᵢ × πⁱ` (the angular momentum, 54b)."""
    d = state.q.reshape(3, 3)
    return jnp.sum(jnp.cross(d, director_momenta(euler, state.v)), axis=0)


def material_momentum(euler, state: DirectorState):
    """`Πⁱ = dᵢ · π` (74b–c; `Π¹ = d3·π² − d2·π³` by (109))."""
    return state.q.reshape(3, 3) @ spatial_momentum(euler, state)


def angular_velocity(state: DirectorState):
    """`ω = ½ Σ dᵢ × ḋᵢ` (exact for `ḋᵢ = ω × dᵢ` with orthonormal `dᵢ`)."""
    d, v = state.q.reshape(3, 3), state.v.reshape(3, 3)
    return 0.5 * jnp.sum(jnp.cross(d, v), axis=0)


def kinetic_energy(euler, v):
    """`K = ½ q̇ᵀ M q̇ = ½ Σ 𝒥ⁱʲ ḋᵢ·ḋⱼ` (61)."""
    V = v.reshape(3, 3)
    return 0.5 * jnp.sum(euler * (V @ V.T))


# --- loads --------------------------------------------------------------------------------


def ramp(t):
    """The load history `f` of (116): `2t` on [0, ½), `2 − 2t` on [½, 1), 0 after."""
    return jnp.where(t < 0.5, 2.0 * t, jnp.where(t < 1.0, 2.0 - 2.0 * t, 0.0))


class AbstractMoment(eqx.Module):
    """An external moment `m(t, d1, d2, d3) (3,)` in spatial components."""

    def __call__(self, t, d1, d2, d3):
        raise NotImplementedError

    def vanishes(self) -> bool:  # known to be zero at all times (default: not known)
        return False


class MaterialPulseMoment(AbstractMoment):
    """`m⊥(t) = −f(t) (A¹ d1 + A² d2)` with `f` of (116) (§6, eqs. 115 and 118); `amplitudes
    (2,)` = `(A¹, A²)`: Case 2 is (2472.5, 1075), Case 3 (1236.25, 537.5)."""

    amplitudes: jax.Array

    def vanishes(self) -> bool:  # zero (concrete) amplitudes
        return known_zero(self.amplitudes)

    def __call__(self, t, d1, d2, d3):
        del d3
        a = self.amplitudes
        return -ramp(t) * (a[..., 0:1] * d1 + a[..., 1:2] * d2)


# --- the model ----------------------------------------------------------------------------


class DirectorRigidBody(AbstractDirectorBody):
    """The rigid body in directors (§3.5), or, with `nontwisting=True`, the body whose frame
    is non-twisting (§4.2, constraint 80: `w · d3 = 0`).

    **Fields:** `euler_inertia` 𝒥 `(3, 3)` (66); `moment` (optional `AbstractMoment`, the
    spatial moment `m`, or `m⊥` for the non-twisting body); `nontwisting` (static).
    """

    state_type: ClassVar[type] = DirectorState
    euler_inertia: jax.Array
    moment: AbstractMoment | None = None
    nontwisting: bool = eqx.field(default=False, static=True)

    @classmethod
    def from_convected(cls, J, moment=None, nontwisting=False):
        """From the convected inertia `J` (the inertia tensor in body axes)."""
        return cls(euler_coefficients(jnp.asarray(J)), moment, nontwisting)

    @property
    def has_load(self) -> bool:
        return self.moment is not None

    def generalized_forces(self, t, q):
        """`Q = (½ m × d1, ½ m × d2, ½ m × d3) (9,)` from the virtual work (68)/(84)."""
        if self.moment is None:
            return jnp.zeros_like(q)
        d1, d2, d3 = directors(q)
        m = self.moment(t, d1, d2, d3)
        return 0.5 * jnp.cross(m[None, :], q.reshape(3, 3)).reshape(9)

    def invariants(self, t, state: DirectorState) -> dict[str, jax.Array]:
        """`K`, the material momentum `Pi1..3` and, for the standard body, the spatial
        momentum `pi1..3` (conserved without load: Theorems 3.3, 4.2)."""
        del t
        Pi = material_momentum(self.euler_inertia, state)
        out = {"K": kinetic_energy(self.euler_inertia, state.v)}
        out.update({f"Pi{i + 1}": Pi[i] for i in range(3)})
        if not self.nontwisting:
            pi = spatial_momentum(self.euler_inertia, state)
            out.update({f"pi{i + 1}": pi[i] for i in range(3)})
        return out

    def conserved_quantities(self) -> frozenset[str] | None:
        """All of `invariants` without a load (or one that `vanishes`), none under one."""
        return None if self.moment is None or self.moment.vanishes() else frozenset()

    def state_event_ndims(self) -> DirectorState:
        return event_ndims(DirectorState, q=1, v=1)

    def check_state_shapes(self, state: DirectorState) -> None:
        check_director_state_shapes(state)
        if jnp.shape(self.euler_inertia)[-2:] != (3, 3):
            raise ValueError(
                f"euler_inertia must have shape (..., 3, 3), got {jnp.shape(self.euler_inertia)}"
            )

    def parameter_checks(self) -> list[Check]:
        """𝒥 finite and symmetric, `J = tr 𝒥 − 𝒥` a rigid body's inertia (SPD, triangle
        inequality, i.e. 𝒥 positive semi-definite); for the non-twisting body `D3` principal
        (`𝒥¹³ = 𝒥²³ = 0`, the split (32))."""
        E = self.euler_inertia
        trace = jnp.trace(E, axis1=-2, axis2=-1)[..., None, None]
        J = trace * jnp.broadcast_to(jnp.eye(3, dtype=E.dtype), E.shape) - E  # batched 𝒥 too
        checks = spd3_checks(J, "convected inertia J = tr𝒥 − 𝒥")
        if self.nontwisting:
            eps = float(jnp.finfo(E.dtype).eps)
            tol = 100 * eps * jnp.max(jnp.abs(E), axis=(-2, -1))
            off = jnp.maximum(jnp.abs(E[..., 0, 2]), jnp.abs(E[..., 1, 2]))
            checks.append(
                Check(off > tol, "the non-twisting body needs 𝒥¹³ = 𝒥²³ = 0 (D3 principal)", off)
            )
        return checks

    def state_checks(self, state: DirectorState, t=None) -> list[Check]:
        """Finite, orthonormal right-handed directors (to √eps). Not the velocities'
        admissibility: the non-twisting scheme keeps (94) at the step midpoints, so its own
        nodal states, from which a run is continued, satisfy it only to O(h²) (the case
        builders check it with `check_director_state`)."""
        return director_state_checks(state, self.nontwisting, velocities=False)


# --- input checks -------------------------------------------------------------------------


def director_state_checks(state: DirectorState, nontwisting=False, velocities=True):
    """`Check`s of a director state: finite, directors orthonormal and right-handed to √eps,
    velocities admissible (`H(q) q̇ = 0`; `G(q) q̇ = 0` if non-twisting) to √eps·(1 + |q̇|)."""
    q, v = state
    tol = float(jnp.finfo(q.dtype).eps) ** 0.5
    ok = finite(q, 1) & finite(v, 1)
    err = jnp.max(jnp.abs(constraints(q)), axis=0)
    d1, d2, d3 = directors(q)
    det = jnp.sum(jnp.cross(d1, d2) * d3, axis=-1)
    checks = [
        Check(~ok, "initial director state contains NaN or inf"),
        Check(err > tol, f"directors are not orthonormal: max |h(q)| > {tol:.2g}", err),
        Check(det <= 0, "directors are left-handed (d1 × d2 = −d3)"),
    ]
    if velocities:
        flat_q, flat_v = q.reshape(-1, 9), v.reshape(-1, 9)
        rates = [jax.vmap(lambda a, b: constraint_jacobian(a) @ b)(flat_q, flat_v)]
        if nontwisting:
            rates.append(jax.vmap(lambda a, b: nontwisting_matrix(a) @ b)(flat_q, flat_v))
        rate = jnp.max(jnp.abs(jnp.concatenate(rates, axis=-1)), axis=-1).reshape(q.shape[:-1])
        scale = tol * (1.0 + jnp.max(jnp.abs(v), axis=-1))
        what = "H(q) q̇ = 0" + (" and w · d3 = 0" if nontwisting else "")
        checks.append(
            Check(rate > scale, f"director velocities are not admissible ({what} violated)", rate)
        )
    return checks


def check_director_state_shapes(state: DirectorState) -> None:
    q, v = state
    if q.shape[-1:] != (9,) or v.shape != q.shape:
        raise ValueError(
            f"director state needs q and v of shape (..., 9), got {q.shape}, {v.shape}"
        )


def check_director_body(model: DirectorRigidBody):
    """`ValueError` unless the model's parameters pass `parameter_checks` (concrete)."""
    if jnp.shape(model.euler_inertia)[-2:] != (3, 3):
        raise ValueError(
            f"euler_inertia must have shape (..., 3, 3), got {jnp.shape(model.euler_inertia)}"
        )
    _checks.raise_at_once(_checks.model_parameter_checks, model)


def check_director_state(state: DirectorState, nontwisting: bool = False, velocities: bool = True):
    """`ValueError` unless `state` passes `director_state_checks` (concrete states)."""
    check_director_state_shapes(state)
    _checks.raise_at_once(
        director_state_checks, state, nontwisting=nontwisting, velocities=velocities
    )
