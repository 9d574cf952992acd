"""A chain of `N + 2` rigid bodies of point particles in rotation-matrix form (Chaurasia 2012,
§3.2, (3.3)–(3.13), boundary conditions §3.2.4), integrated by
`jaxrigid.integrators.RATTLE`.

Body `j` has centre of mass `r_j`, linear momentum `p_j = m ṙ_j` (3.4), attitude `R_j`
(body → space, `R_jᵀR_j = 1`) and conjugate momentum `P_j = Ṙ_j J` (3.3), tangent to the
constraint, (3.7) `R_jᵀP_jJ⁻¹ + J⁻¹P_jᵀR_j = 0`. `J = Σ mᵏ rᵏ rᵏᵀ` is the body's second moment
(`ParticleBody.J`, diagonal in its principal frame), the mass matrix of `T = ½ tr(Ṙ J Ṙᵀ)`;
it is invertible only for a body whose particles are not coplanar (such a body needs the
quaternion form, §3.3). The Hamiltonian (3.8), with `W_F` of the c1-c2 boundary (3.31):

    H = Σ_j |p_j|²/2m + Σ_j ½ tr(P_j J⁻¹ P_jᵀ) + V(r, R) + W_F(r).

Held coordinates (`ChainBoundary`) have zero momenta, and the integrator masks the forces
on them, so they stay where they start.
"""

from __future__ import annotations

import functools
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ..lie import so3
from .base import Check, event_ndims, finite, per_member
from .chain_boundary import ChainBoundary
from .particle_chain import ParticleChain
from .structures import AbstractConstrainedBodies

__all__ = ["ChainMatrixState", "RigidBodyChain", "from_velocities"]


class ChainMatrixState(NamedTuple):
    """`r (..., N+2, 3)` centres of mass, `p (..., N+2, 3)` their momenta `m ṙ`,
    `R (..., N+2, 3, 3)` attitudes (body → space), `P (..., N+2, 3, 3)` their conjugate
    momenta `Ṙ J` (3.3)."""

    r: jax.Array
    p: jax.Array
    R: jax.Array
    P: jax.Array

    def momenta(self) -> dict[str, jax.Array]:
        """The momenta by field name (an ensemble scales them together, `cases.chain.perturb`)."""
        return {"p": self.p, "P": self.P}

    def attitude_matrices(self) -> jax.Array:
        """`(..., N+2, 3, 3)`: each body's rotation (body → space), `R`."""
        return self.R


_HELD = {
    "c1-c1": "bodies 0 and N+1 (p and P zero)",
    "c1-c2": "body 0 (p₀ and P₀ zero)",
    "c1-c3": "body 0 (p₀ and P₀ zero) and the centre of body N+1 (p_{N+1} zero)",
    "free": "no body",
}


def _holds(boundary: ChainBoundary) -> str:
    """What `boundary` holds, for a message: by its kind where it can be read (concrete), else
    in general (a boundary traced by a caller's `jit` or `vmap`)."""
    kind = boundary.known_kind()
    return f"{kind!r} holds {_HELD[kind]}" if kind else "holds the bodies its masks mark as held"


class RigidBodyChain(AbstractConstrainedBodies):
    """The chain of §3.2 in rotation-matrix form.

    **Fields:** `chain` a `ParticleChain` (the body, copied `N + 2` times, and the pair
    potential; `N` is read from the state); `boundary` a `ChainBoundary` (default c1-c1).
    State: `ChainMatrixState`; one chain per member, body axis first among the event axes.
    """

    state_type: ClassVar[type] = ChainMatrixState
    chain: ParticleChain
    boundary: ChainBoundary = eqx.field(default_factory=ChainBoundary)

    # --- the body's constants ----------------------------------------------------------

    @property
    def mass(self):
        """`m = Σ mᵏ` of one body (all bodies are copies)."""
        return self.chain.body.mass

    @property
    def J(self):
        """The mass matrix `J = Σ mᵏ rᵏ rᵏᵀ (3, 3)` of (3.3), diagonal (principal frame)."""
        return self.chain.body.J

    @property
    def inverse_mass_diagonal(self):
        """`d = diag(J⁻¹) (3,)` (`J` is diagonal in the body's principal frame)."""
        return 1.0 / jnp.diagonal(self.J, axis1=-2, axis2=-1)

    def _times_inverse(self, P):
        """`P J⁻¹` for `P (..., 3, 3)` (the diagonal `J⁻¹` laid along the columns)."""
        return P * jnp.broadcast_to(self.inverse_mass_diagonal, P.shape)

    def masks(self, n_bodies: int, dtype):
        """`(translation, rotation)` masks `(N+2,)`, 1 where the coordinate moves."""
        return (
            self.boundary.translation_mask(n_bodies, dtype),
            self.boundary.rotation_mask(n_bodies, dtype),
        )

    # --- energy and forces (one chain) ----------------------------------------------------

    def potential(self, r, R):
        """`V(r, R) + W_F(r)` of one chain: the pair potential (3.12) and the c1-c2 work
        (3.31)."""
        return self.chain.potential(r, R) + self.boundary.external_potential(r)

    def gradients(self, r, R):
        """`(∂(V + W_F)/∂r (N+2, 3), ∂V/∂R (N+2, 3, 3))` of one chain, by autodiff of the
        whole chain at once (the potential parts of (3.13a), (3.13c))."""
        return jax.grad(self.potential, argnums=(0, 1))(r, R)

    def potential_gradients(self, t, r, R):
        """`gradients(r, R)` (the chain's potential does not depend on `t`)."""
        del t
        return self.gradients(r, R)

    def bodies(self, state: ChainMatrixState):
        """`(r, p, R, P)` as they are: the state is along the body axis."""
        return tuple(state)

    def with_bodies(self, state, r, p, R, P) -> ChainMatrixState:
        del state
        return ChainMatrixState(r, p, R, P)

    def kinetic_energy(self, p, P):
        """`Σ_j |p_j|²/2m + ½ tr(P_j J⁻¹ P_jᵀ)` (3.5) of one chain."""
        trans = jnp.sum(p * p) / (2 * self.mass)
        rot = 0.5 * jnp.sum(P * self._times_inverse(P))
        return trans + rot

    def energy(self, state: ChainMatrixState):
        """`H` (3.8) with `W_F` (3.31), of one chain."""
        return self.kinetic_energy(state.p, state.P) + self.potential(state.r, state.R)

    def body_angular_velocity(self, state: ChainMatrixState):
        """`ω_j = vee(R_jᵀṘ_j) (..., N+2, 3)`, `Ṙ = PJ⁻¹` (3.10d)."""
        return so3.vee(jnp.swapaxes(state.R, -1, -2) @ self._times_inverse(state.P))

    def spin(self, state: ChainMatrixState):
        """Each body's angular momentum about its centre, in space, `(..., N+2, 3)`:
        `Σ_k mᵏ (R rᵏ) × (Ṙ rᵏ) = vee(Ṙ J Rᵀ − R J Ṙᵀ) = vee(P Rᵀ − R Pᵀ)`."""
        A = state.P @ jnp.swapaxes(state.R, -1, -2)
        return so3.vee(A - jnp.swapaxes(A, -1, -2))

    def constraint_errors(self, state: ChainMatrixState):
        """Per body `(‖RᵀR − 1‖_F, ‖RᵀPJ⁻¹ + J⁻¹PᵀR‖_F)`, each `(..., N+2)`."""
        A = jnp.swapaxes(state.R, -1, -2) @ self._times_inverse(state.P)
        S = A + jnp.swapaxes(A, -1, -2)
        return so3.orthogonality_error(state.R), jnp.sqrt(jnp.sum(S * S, axis=(-2, -1)))

    def invariants(self, t, state: ChainMatrixState) -> dict[str, jax.Array]:
        """Of one chain: `energy` (3.8), total linear momentum `momentum1..3`, total angular
        momentum about the origin `angular_momentum1..3` (`Σ r × p + vee(P Rᵀ − R Pᵀ)`),
        `RtR_error` and `tangency_error` (the largest over the bodies). Momenta are conserved
        for the free chain only; the energy for every boundary."""
        del t
        momentum = jnp.sum(state.p, axis=-2)
        L = jnp.sum(jnp.cross(state.r, state.p) + self.spin(state), axis=-2)
        RtR, tangency = self.constraint_errors(state)
        out = {"energy": self.energy(state)}
        out.update({f"momentum{i + 1}": momentum[..., i] for i in range(3)})
        out.update({f"angular_momentum{i + 1}": L[..., i] for i in range(3)})
        out["RtR_error"] = jnp.max(RtR, axis=-1)
        out["tangency_error"] = jnp.max(tangency, axis=-1)
        return out

    def conserved_quantities(self) -> frozenset[str]:
        """`energy` and the constraint errors; the total momenta for the free chain only
        (`ChainBoundary.conserved`)."""
        return self.boundary.conserved(("RtR_error", "tangency_error"))

    # --- the model contract --------------------------------------------------------------

    def state_event_ndims(self) -> ChainMatrixState:
        return event_ndims(ChainMatrixState, r=2, p=2, R=3, P=3)

    def check_state_shapes(self, state: ChainMatrixState) -> None:
        r, p, R, P = (jnp.shape(x) for x in state)
        if len(r) < 2 or r[-1] != 3 or r[-2] < 2 or p != r or R != r[:-1] + (3, 3) or P != R:
            raise ValueError(
                "a chain state needs r, p (..., N+2, 3) and R, P (..., N+2, 3, 3) with the "
                f"same leading axes and N + 2 ≥ 2 bodies; got r {r}, p {p}, R {R}, P {P}"
            )

    def parameter_checks(self) -> list[Check]:
        """`J` positive definite (the body's particles not coplanar, to `√eps`), the
        boundary force finite, the pair potential's values (`ParticleChain.parameter_checks`:
        Lennard-Jones `σ > 0`, `ε ≥ 0`)."""
        J = jnp.diagonal(self.J, axis1=-2, axis2=-1)
        tol = float(jnp.finfo(J.dtype).eps) ** 0.5
        ratio = jnp.min(J, axis=-1) / jnp.max(jnp.abs(J), axis=-1)
        return self.chain.parameter_checks() + [
            Check(
                ~(ratio > tol),
                "the rotation-matrix chain needs the mass matrix J = Σ m r rᵀ positive "
                f"definite: this body's particles are coplanar (smallest/largest entry of J "
                f"quoted, not above √eps = {tol:.2g}); integrate it in the quaternion form "
                "(Chaurasia §3.3), whose inertia is positive definite",
                ratio,
            ),
            Check(
                ~finite(jnp.asarray(self.boundary.force), 1),
                "boundary force contains NaN or inf",
            ),
        ]

    def state_checks(self, state: ChainMatrixState, t=None) -> list[Check]:
        """Per member: finite values; the configuration (`ParticleChain.configuration_checks`:
        rotations, no overlap); held bodies with zero momenta; `P` tangent (3.7) to
        `√eps (1 + |ω|)`."""
        del t
        tol = float(jnp.finfo(state.r.dtype).eps) ** 0.5
        messages: list[tuple[str, bool]] = []

        model_batch = jnp.shape(self.chain.body.m)[:-1]  # a sweep's model: one per member
        first = self
        if model_batch:
            first = jax.tree_util.tree_map(lambda x: x[(0,) * len(model_batch)], self)

        def capture(r, R):  # the configuration checks' messages (static), by tracing only
            with jax.ensure_compile_time_eval():  # constants (min_distance) stay concrete
                checks = first.chain.configuration_checks(r, R)
            messages[:] = [(c.message, c.value is not None) for c in checks]
            return 0

        event = jax.ShapeDtypeStruct
        n = state.r.shape[-2]
        jax.eval_shape(capture, event((n, 3), state.r.dtype), event((n, 3, 3), state.R.dtype))
        batch = state.r.shape[:-2]
        flat = [x.reshape((-1,) + x.shape[len(batch) :]) for x in state]
        if model_batch:
            model = per_member(self, len(model_batch), batch)
            flags = _member_flags_batched_model(model, *flat)
        else:
            flags = _member_flags(self, *flat)
        config, (finite_p, finite_P, held, first_held, rel) = flags
        unflat = lambda x: x.reshape(batch)  # noqa: E731
        checks = [
            Check(~unflat(finite_p), "chain momenta p contain NaN or inf"),
            Check(~unflat(finite_P), "chain momenta P contain NaN or inf"),
        ]
        checks += [
            Check(unflat(bad), msg, unflat(value) if has_value else None)
            for (bad, value), (msg, has_value) in zip(config, messages)
        ]
        checks += [
            Check(
                unflat(held),
                f"boundary {_holds(self.boundary)}: a held body's momentum must be zero (the "
                "first such body with a nonzero one quoted)",
                unflat(first_held),
            ),
            Check(
                unflat(rel > tol),
                f"P is not tangent to RᵀR = 1: ‖RᵀPJ⁻¹ + J⁻¹PᵀR‖ > {tol:.2g}(1 + |ω|) "
                "(the largest over the bodies quoted, relative to 1 + |ω|)",
                unflat(rel),
            ),
        ]
        return checks


@eqx.filter_jit
@functools.partial(jax.vmap, in_axes=(None, 0, 0, 0, 0))
def _member_flags(model: RigidBodyChain, r, p, R, P):
    """The values of `state_checks` for each chain of a flat ensemble, one compiled program
    (cached by shape: a concrete state is checked without an eager call per operation)."""
    return _one_member_flags(model, r, p, R, P)


@eqx.filter_jit
@functools.partial(jax.vmap, in_axes=(0, 0, 0, 0, 0))
def _member_flags_batched_model(model: RigidBodyChain, r, p, R, P):
    """`_member_flags` with one model per member (a sweep's `model_axes=0`)."""
    return _one_member_flags(model, r, p, R, P)


def _one_member_flags(model: RigidBodyChain, r, p, R, P):
    state = ChainMatrixState(r, p, R, P)
    tm, rm = model.masks(r.shape[-2], r.dtype)
    config = [
        (c.bad, jnp.zeros((), r.dtype) if c.value is None else c.value)
        for c in model.chain.configuration_checks(r, R)
    ]
    held = (jnp.any(p != 0, axis=-1) & (tm == 0)) | (jnp.any(P != 0, axis=(-2, -1)) & (rm == 0))
    _, tangency = model.constraint_errors(state)
    omega = jnp.linalg.norm(model.body_angular_velocity(state), axis=-1)
    rel = jnp.max(tangency / (1.0 + omega))
    flags = (jnp.all(jnp.isfinite(p)), jnp.all(jnp.isfinite(P)), jnp.any(held))
    return config, (*flags, jnp.argmax(held), rel)


def from_velocities(chain: ParticleChain, boundary: ChainBoundary, r, R, v, omega_body):
    """The state of velocities: `p = m v`, `P = Ṙ J = R ω̂ J` (3.3) with `ω` the body angular
    velocity (`Ṙ = R ω̂`), the momenta of held coordinates set to zero. `r`, `v (..., N+2, 3)`,
    `R (..., N+2, 3, 3)`, `omega_body (..., N+2, 3)`."""
    r, R, v, omega_body = (jnp.asarray(x) for x in (r, R, v, omega_body))
    n = r.shape[-2]
    tm = jnp.broadcast_to(boundary.translation_mask(n, r.dtype)[..., None], v.shape)
    rm = jnp.broadcast_to(boundary.rotation_mask(n, r.dtype)[..., None, None], R.shape)
    p = jnp.where(tm > 0, chain.body.mass * v, 0)
    Rdot = jnp.einsum("...ab,...bc->...ac", R, so3.hat(omega_body))
    P = jnp.where(rm > 0, jnp.einsum("...ab,bc->...ac", Rdot, chain.body.J), 0)
    return ChainMatrixState(r, p, R, P)
