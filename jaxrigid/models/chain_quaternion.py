"""A chain of `N + 2` rigid bodies in unit quaternions (Chaurasia 2012, §3.3): centres `r_j`,
linear momenta `p_j`, quaternions `q_j = (w, v)` and their conjugate momenta `g_j`.

Body `j` has mass `m` and principal moments `J₁, J₂, J₃` (`Ĵ = diag(1, J₁, J₂, J₃)`, (3.17)).
With `Ĝ(q)` of (3.16) (`Ĝ(q) x = q̄ ⊗ x`, `Ĝ(q)ᵀ x = q ⊗ x`), the rotational mass matrix and
its inverse are

    μ(q) = 4 Ĝ(q)ᵀ Ĵ Ĝ(q)   (3.18),     μ⁻¹(q) = ¼ Ĝ(q)ᵀ Ĵ⁻¹ Ĝ(q)   (3.19),

and the Hamiltonian (3.35), with the work of the end force (3.31) for c1-c2,

    H̃ = Σ_j ½ g_jᵀ μ⁻¹(q_j) g_j + Σ_j |p_j|²/2m + V(r, q) + W_F.

Hamilton's equations on `{q_jᵀq_j = 1, q_jᵀg_j = 0}` (3.28a–d):

    ṙ_j = p_j/m,   ṗ_j = −∂(V + W_F)/∂r_j,
    q̇_j = μ⁻¹(q_j) g_j,   ġ_j = −μ⁻¹(g_j) q_j − ∂V/∂q_j − 2λ_j q_j,
    λ_j = −½ q_jᵀ ∂V/∂q_j / q_jᵀq_j   ((3.32) before its last step sets q_jᵀq_j = 1)

(`μ⁻¹(g)q = ∂T/∂q` by the symmetry (3.21) of `T` in `q ↔ g`). Held coordinates
(`ChainBoundary`, §3.3.7) have zero momentum and a masked vector field. `ω = 2G(q)q̇` (§3.3.1)
is the body angular velocity of `R(q)` mapping body to space (`Ṙ = R ω̂`), so
`q̇ = ½ q ⊗ (0, ω)` and `g = 2 q ⊗ (0, 𝕀ω)` on the unit sphere.

**The multiplier off the sphere.** The potential comes from `ParticleChain` through
`quaternion_matrix`, the quadratic extension of (3.14), so `V` is not invariant under
`q ↦ sq` and `qᵀ∂V/∂q ≠ 0`. With `δ = qᵀq − 1`, `ε = qᵀg`, the equations give
`δ' = ½ qᵀq ε` and `ε' = −qᵀ∂V/∂q − 2λ qᵀq`. With (3.32) as printed, `ε' = (qᵀ∂V/∂q) δ`:
for §3.5's compressed Lennard-Jones chain `qᵀ∂V/∂q > 0` (a body scaled up pushes into its
neighbours) and the sphere is exponentially unstable (a Gauss6 run of the c1-c1 chain leaves
it at ×10 per 0.6 time units and overflows before t = 20). Dividing by `qᵀq`, as the
derivation does before setting it to 1, gives `ε' = 0` for every `(q, g)`: `qᵀg` is a
quadratic first integral, which the Gauss methods keep to round-off, `δ' = ½ qᵀq ε` then
stays 0, and the unit-norm error is the method's `O(h^p)` error (bounded over long runs).
The two agree on the sphere; `thesis_multiplier=True` (static) takes (3.32) as printed.
`invariants` reports the unit-norm and `qᵀg` errors.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _checks
from .._checks import Check
from ..lie import quaternion as quat
from .base import event_ndims, finite, per_member
from .chain_boundary import ChainBoundary
from .particle_chain import ParticleChain, quaternion_matrix
from .structures import AbstractCanonicalChain

__all__ = [
    "ChainQuaternionState",
    "QuaternionChain",
    "from_velocities",
    "mass_matrix_apply",
    "inverse_mass_matrix_apply",
    "pack",
    "unpack",
]


class ChainQuaternionState(NamedTuple):
    """`r (..., N+2, 3)` centres of mass, `p (..., N+2, 3)` linear momenta, `q (..., N+2, 4)`
    unit quaternions `(w, x, y, z)` (body → space), `g (..., N+2, 4)` their conjugate momenta
    `μ(q) q̇` (§3.3.2)."""

    r: jax.Array
    p: jax.Array
    q: jax.Array
    g: jax.Array

    def momenta(self) -> dict[str, jax.Array]:
        """The momenta by field name (an ensemble scales them together, `cases.chain.perturb`)."""
        return {"p": self.p, "g": self.g}

    def attitude_matrices(self) -> jax.Array:
        """`(..., N+2, 3, 3)`: each body's rotation (body → space), `R(q)` (3.14)."""
        return quaternion_matrix(self.q)


def pack(state: ChainQuaternionState):
    """`(..., N+2, 14)`: each body's `(r, p, q, g)` in one row."""
    return jnp.concatenate(list(state), axis=-1)


def unpack(y) -> ChainQuaternionState:
    """The inverse of `pack`."""
    return ChainQuaternionState(y[..., 0:3], y[..., 3:6], y[..., 6:10], y[..., 10:14])


def _augmented(moments, like):
    """`diag(Ĵ) = (1, J₁, J₂, J₃)` (3.17), shaped to broadcast against `like (..., 4)`."""
    aug = jnp.concatenate([jnp.ones_like(moments[..., :1]), moments], axis=-1)
    return jnp.reshape(aug, (1,) * (jnp.ndim(like) - aug.ndim) + aug.shape)


def inverse_mass_matrix_apply(moments, q, g):
    """`μ⁻¹(q) g = ¼ Ĝ(q)ᵀ Ĵ⁻¹ Ĝ(q) g = ¼ q ⊗ (Ĵ⁻¹ (q̄ ⊗ g))` (3.19). `moments (3,)` the
    principal moments `J₁, J₂, J₃`; `q, g (..., 4)`."""
    return 0.25 * quat.multiply(q, quat.multiply(quat.conjugate(q), g) / _augmented(moments, g))


def mass_matrix_apply(moments, q, qdot):
    """`μ(q) q̇ = 4 Ĝ(q)ᵀ Ĵ Ĝ(q) q̇ = 4 q ⊗ (Ĵ (q̄ ⊗ q̇))` (3.18). `(..., 4)`."""
    return 4.0 * quat.multiply(
        q, quat.multiply(quat.conjugate(q), qdot) * _augmented(moments, qdot)
    )


def body_angular_velocity(q, qdot):
    """`ω = 2 G(q) q̇ (..., 3)` (§3.3.1, (A.12)): the vector part of `2 q̄ ⊗ q̇`."""
    return 2.0 * quat.conjugate_product_imag(q, qdot)


class QuaternionChain(AbstractCanonicalChain):
    """The chain of `N + 2` bodies of `chain` in quaternions, held as `boundary` says.

    **Fields:** `chain` a `ParticleChain` (its body, pair potential and overlap distance);
    `boundary` a `ChainBoundary` (default c1-c1); `thesis_multiplier` (static, default
    `False`): `λ` of (3.32) as printed instead of divided by `qᵀq` (module docstring: the
    printed one makes the unit sphere unstable). The number of bodies is the state's.
    Methods work on one chain (batch with `jax.vmap`; `simulate` does).
    """

    state_type: ClassVar[type] = ChainQuaternionState
    chain: ParticleChain
    boundary: ChainBoundary = eqx.field(default_factory=ChainBoundary)
    thesis_multiplier: bool = eqx.field(default=False, static=True)

    # --- parameters ---------------------------------------------------------------------

    @property
    def mass(self):
        """`m_j` (all bodies are copies of `chain.body`)."""
        return self.chain.body.mass

    @property
    def moments(self):
        """`(J₁, J₂, J₃)`, the principal moments of (3.17)."""
        return self.chain.body.principal_moments

    def masks(self, n_bodies: int, dtype):
        """`(translation (N+2,), rotation (N+2,))`: 1 moves, 0 held."""
        b = self.boundary
        return b.translation_mask(n_bodies, dtype), b.rotation_mask(n_bodies, dtype)

    # --- mechanics ----------------------------------------------------------------------

    def potential(self, r, q):
        """`V(r, q) + W_F` (3.22), (3.31)."""
        return self.chain.quaternion_potential(r, q) + self.boundary.external_potential(r)

    def multiplier(self, q, dV_dq):
        """`λ_j = −½ q_jᵀ ∂V/∂q_j / q_jᵀq_j (N+2,)`: (3.32)–(3.33) before its last step sets
        `q_jᵀq_j = 1` (`∂V/∂q_j` is `∂Ṽ_j/∂q_j`: only the pairs `(j−1, j)`, `(j, j+1)` depend
        on `q_j`); with `thesis_multiplier`, `−½ q_jᵀ ∂V/∂q_j` as printed. Equal on the unit
        sphere; see the module docstring for why the division matters off it."""
        lam = -0.5 * jnp.sum(q * dV_dq, axis=-1)
        return lam if self.thesis_multiplier else lam / jnp.sum(q * q, axis=-1)

    def state_layout(self, state: ChainQuaternionState):
        """`(pack(state) (N+2, 14), pack, unpack)`: each body's `(r, p, q, g)` in one row."""
        return pack(state), pack, unpack

    def vector_field(self, t, state: ChainQuaternionState) -> ChainQuaternionState:
        """`(ṙ, ṗ, q̇, ġ)` of (3.28a–d) with `λ` of (3.32), held coordinates masked
        (§3.3.7)."""
        del t
        r, p, q, g = state
        tmask, rmask = self.masks(r.shape[0], r.dtype)
        dV_dr, dV_dq = jax.grad(self.potential, argnums=(0, 1))(r, q)
        lam = self.multiplier(q, dV_dq)
        J = self.moments
        rdot = p / self.mass
        qdot = inverse_mass_matrix_apply(J, q, g)
        gdot = -inverse_mass_matrix_apply(J, g, q) - dV_dq - 2.0 * lam[:, None] * q
        return ChainQuaternionState(
            tmask[:, None] * rdot,
            -tmask[:, None] * dV_dr,
            rmask[:, None] * qdot,
            rmask[:, None] * gdot,
        )

    def kinetic_energy(self, state: ChainQuaternionState):
        """`Σ_j |p_j|²/2m + ½ g_jᵀ μ⁻¹(q_j) g_j` (3.15), (3.21)."""
        J = self.moments
        rot = 0.5 * jnp.sum(state.g * inverse_mass_matrix_apply(J, state.q, state.g))
        return jnp.sum(state.p * state.p) / (2 * self.mass) + rot

    def energy(self, state: ChainQuaternionState):
        """`H̃ + W_F` (3.35), (3.31): conserved by the exact flow."""
        return self.kinetic_energy(state) + self.potential(state.r, state.q)

    def angular_velocity(self, state: ChainQuaternionState):
        """Body angular velocities `ω_j = 2G(q_j)q̇_j (N+2, 3)`, `q̇_j = μ⁻¹(q_j)g_j`."""
        J = self.moments
        return body_angular_velocity(state.q, inverse_mass_matrix_apply(J, state.q, state.g))

    def angular_momentum(self, state: ChainQuaternionState):
        """Total angular momentum about the origin `Σ_j r_j × p_j + R(q_j) 𝕀 ω_j (3,)`."""
        J = self.moments
        spin = jnp.einsum(
            "jab,jb->ja", quaternion_matrix(state.q), J[None, :] * self.angular_velocity(state)
        )
        return jnp.sum(jnp.cross(state.r, state.p) + spin, axis=0)

    def invariants(self, t, state: ChainQuaternionState) -> dict[str, jax.Array]:
        """`energy` (`H̃ + W_F`), `momentum1..3` (total `Σ p_j`), `angular_momentum1..3`
        (about the origin), `unit_norm_error` (`max_j | |q_j| − 1 |`), `qg_error`
        (`max_j |q_jᵀg_j|`)."""
        del t
        P = jnp.sum(state.p, axis=0)
        L = self.angular_momentum(state)
        return {
            "energy": self.energy(state),
            "momentum1": P[0],
            "momentum2": P[1],
            "momentum3": P[2],
            "angular_momentum1": L[0],
            "angular_momentum2": L[1],
            "angular_momentum3": L[2],
            "unit_norm_error": jnp.max(jnp.abs(jnp.linalg.norm(state.q, axis=-1) - 1)),
            "qg_error": jnp.max(jnp.abs(jnp.sum(state.q * state.g, axis=-1))),
        }

    def conserved_quantities(self) -> frozenset[str]:
        """`energy` and the constraint errors; the total momenta for the free chain only
        (`ChainBoundary.conserved`)."""
        return self.boundary.conserved(("unit_norm_error", "qg_error"))

    # --- the model contract -------------------------------------------------------------

    def state_event_ndims(self) -> ChainQuaternionState:
        return event_ndims(ChainQuaternionState, r=2, p=2, q=2, g=2)

    def check_state_shapes(self, state: ChainQuaternionState) -> None:
        r, p, q, g = (jnp.shape(x) for x in state)
        if len(r) < 2 or r[-1] != 3 or r[-2] < 2 or p != r or q != (*r[:-1], 4) or g != q:
            raise ValueError(
                "a quaternion chain state needs r, p (..., N+2, 3) and q, g (..., N+2, 4) with "
                f"N + 2 ≥ 2 and the same leading axes; got r {r}, p {p}, q {q}, g {g}"
            )

    def parameter_checks(self) -> list[Check]:
        """Positive, finite principal moments and mass; a finite end force; the pair
        potential's values (`ParticleChain.parameter_checks`: Lennard-Jones `σ > 0`, `ε ≥ 0`)."""
        J, m = self.moments, self.mass
        return self.chain.parameter_checks() + [
            Check(
                ~(jnp.all(jnp.isfinite(J), axis=-1) & jnp.all(J > 0, axis=-1)),
                "QuaternionChain: the body's principal moments must be positive and finite "
                "(smallest quoted)",
                jnp.min(J, axis=-1),
            ),
            Check(~(jnp.isfinite(m) & (m > 0)), "QuaternionChain: body mass must be positive", m),
            Check(
                ~jnp.all(jnp.isfinite(self.boundary.force), axis=-1),
                "QuaternionChain: boundary force contains NaN or inf",
            ),
        ]

    def state_checks(self, state: ChainQuaternionState, t=None) -> list[Check]:
        """Finite; unit `q` (`| |q_j| − 1 | ≤ √eps`, worst quoted); `q_jᵀg_j = 0` (to `√eps`
        times `|g_j|`, worst quoted); held bodies' momenta exactly zero; the configuration
        (`ParticleChain.configuration_checks`: rotations, no overlap). Flags over the
        ensemble axes."""
        del t
        r, p, q, g = state
        n = r.shape[-2]
        eps = float(jnp.finfo(q.dtype).eps)
        tol = eps**0.5
        ok = finite(r, 2) & finite(p, 2) & finite(q, 2) & finite(g, 2)
        norm_err = jnp.max(jnp.abs(jnp.linalg.norm(q, axis=-1) - 1), axis=-1)
        qg = jnp.abs(jnp.sum(q * g, axis=-1))
        qg_rel = jnp.max(qg - tol * jnp.linalg.norm(g, axis=-1), axis=-1)
        tmask, rmask = self.masks(n, q.dtype)
        held_p = jnp.any(jnp.broadcast_to(tmask[..., None] == 0, p.shape) & (p != 0), axis=(-2, -1))
        held_g = jnp.any(jnp.broadcast_to(rmask[..., None] == 0, g.shape) & (g != 0), axis=(-2, -1))
        checks = [
            Check(~ok, "quaternion chain state contains NaN or inf"),
            Check(
                ok & (norm_err > tol),
                f"chain quaternions must be unit: | |q_j| − 1 | > √eps = {tol:.2g} (worst quoted)",
                norm_err,
            ),
            Check(
                ok & (qg_rel > 0),
                f"chain momenta g_j must satisfy q_jᵀg_j = 0 (to √eps = {tol:.2g} times |g_j|; "
                "worst excess quoted)",
                qg_rel,
            ),
            Check(
                ok & (held_p | held_g),
                f"the {self.boundary.known_kind() or 'chain'} boundary holds a body whose "
                "momentum p or g is not zero (a clamped body must not move)",
            ),
        ]
        return checks + self._configuration_checks(r, q, ok)

    def _configuration_checks(self, r, q, ok) -> list[Check]:
        """`chain.configuration_checks` over the ensemble axes (one chain each)."""
        batch = r.shape[:-2]
        safe_q = jnp.where(ok[..., None, None], q, jnp.ones((), q.dtype))
        messages: list[str] = []

        def one(chain, r1, q1):
            cs = chain.configuration_checks(r1, quaternion_matrix(quat.normalize(q1)))
            messages[:] = [c.message for c in cs]
            return [c.bad for c in cs], [c.value for c in cs]

        rf, qf = r.reshape(-1, *r.shape[-2:]), safe_q.reshape(-1, *q.shape[-2:])
        model_axes = jnp.ndim(self.chain.body.m) - 1  # a sweep's model: one chain per member
        if model_axes:
            chains = per_member(self.chain, model_axes, batch)
            bads, values = jax.vmap(one)(chains, rf, qf)
        else:
            bads, values = jax.vmap(one, in_axes=(None, 0, 0))(self.chain, rf, qf)
        # the quaternion's own checks above cover non-unit q: R of the normalised q is checked
        # here (finite, rotation, overlap) so that one bad value gets one message
        return [
            Check(
                ok & b.reshape(batch),
                "chain configuration: " + msg,
                None if v is None else v.reshape(batch),
            )
            for msg, b, v in zip(messages, bads, values)
        ]


@eqx.filter_jit  # one program, not one per operation, for concrete inputs
def from_velocities(
    chain: ParticleChain, boundary: ChainBoundary, r, q, v, omega_body
) -> ChainQuaternionState:
    """The state of velocities `v (N+2, 3)` and body angular velocities `omega_body (N+2, 3)`
    at `r (N+2, 3)`, unit `q (N+2, 4)`: `p = m v`, `g = μ(q) q̇` with `q̇ = ½ q ⊗ (0, ω)`
    (§3.3.1–3.3.2); held bodies' momenta zero (§3.3.7). Leading batch axes broadcast."""
    r, q, v, omega_body = (jnp.asarray(x) for x in (r, q, v, omega_body))
    n = r.shape[-2]
    tmask, rmask = boundary.translation_mask(n, v.dtype), boundary.rotation_mask(n, q.dtype)
    w = jnp.concatenate([jnp.zeros_like(omega_body[..., :1]), omega_body], axis=-1)
    qdot = 0.5 * quat.multiply(q, w)
    g = mass_matrix_apply(chain.body.principal_moments.astype(q.dtype), q, qdot)
    p = chain.body.mass.astype(v.dtype) * v
    p = jnp.broadcast_to(tmask[..., None], p.shape) * p
    return ChainQuaternionState(r, p, q, jnp.broadcast_to(rmask[..., None], g.shape) * g)


def check_state(model: QuaternionChain, state: ChainQuaternionState) -> None:
    """`ValueError` unless the (concrete) state passes the model's shape and value checks."""
    model.check_state_shapes(state)
    _checks.raise_at_once(_checks.model_state_checks, model, state)
