"""The chain of tetrahedra of Chaurasia (2012) §3.5, one case per boundary condition.

§3.5's values: tetrahedra of §3.5's coordinates with a = 1 m, particle mass m = 1 kg;
Lennard-Jones between the particles of neighbouring bodies with ε = 5, σ = 1; centres
rᵢ(0) = (2i, 0, 0), i = 1 … 8 (eight bodies, the first and the last being the thesis's bodies
0 and N+1); the c1-c2 force F = (3, 0, 0) on the last body. Integrated with Gauss6 in the
thesis (Figures 3.5–3.6: the energy stays constant).

Not printed, chosen here: the thesis's "typical initial velocity". Every body starts in its
principal frame (R = 1) with the velocity and body angular velocity of a first transverse
mode, zero at both ends,

    v_j = v0 sin(π s_j) (0, 1, 0),    ω_j = omega0 sin(π s_j) (1, 0, 0),    s_j = j/(n − 1),

`v0` and `omega0` parameters (held bodies' momenta are zero whatever they are). The c1-c3
displacement: the last body's centre is held at (2n, 0, 0) + (d1, d2, d3). The step 0.0025 is
RATTLE's: the stiffest pair mode has ω ≈ 150 s⁻¹ (energy error ∝ h² from h ≈ 5·10⁻⁴ on,
tests/test_chain_rattle.py).

Two forms of one chain, each case's `build` (unit quaternions, §3.3, for `gauss6`, `gauss4`,
`gauss2`) and `other_forms` (rotation matrices, §3.2, for `rattle`): `--method` picks the form.
`--set n_bodies=...` lengthens the chain (a structural parameter: it changes the shapes).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..models.chain_boundary import ChainBoundary
from ..models.chain_matrix import RigidBodyChain
from ..models.chain_matrix import from_velocities as matrix_from_velocities
from ..models.chain_quaternion import QuaternionChain
from ..models.chain_quaternion import from_velocities as quaternion_from_velocities
from ..models.particle_body import tetrahedron
from ..models.particle_chain import LennardJones, ParticleChain
from .base import (
    Case,
    Parameter,
    builds,
    ensemble_members,
    member_noise,
    vector,
    vector_parameters,
)

_REF = "Chaurasia, M.Tech. thesis, IIT Kanpur (2012), §3.5"

PARAMETERS = {
    "n_bodies": Parameter(8, "number of bodies N + 2, the two ends included", sweepable=False),
    "a": Parameter(1.0, "tetrahedron size a (m)"),
    "m": Parameter(1.0, "particle mass (kg)"),
    "epsilon": Parameter(5.0, "Lennard-Jones depth ε (J; ≥ 0)"),
    "sigma": Parameter(1.0, "Lennard-Jones length σ (m; > 0)"),
    "spacing": Parameter(2.0, "initial distance of neighbouring centres (m)"),
    "v0": Parameter(0.5, "initial transverse speed amplitude (m/s; chosen, not printed)"),
    "omega0": Parameter(0.5, "initial spin amplitude about x (rad/s; chosen, not printed)"),
}
_FORCE = vector_parameters("F", "force on the last body (N)", (3.0, 0.0, 0.0))
_DISPLACEMENT = vector_parameters("d", "displacement of the last body's centre (m)", (0.5, 0, 0))


def _n_bodies(p) -> int:
    n = p["n_bodies"]
    if not (float(n).is_integer() and n >= 3):
        raise ValueError(f"n_bodies must be an integer ≥ 3 (one moving body at least), got {n}")
    return int(n)


def _chain(p) -> ParticleChain:
    return ParticleChain(tetrahedron(p["a"], p["m"]), LennardJones(p["epsilon"], p["sigma"]))


def _boundary(kind: str, p) -> ChainBoundary:
    if kind == "c1-c2":
        return ChainBoundary(kind, vector(p, "F"))
    return ChainBoundary(kind)


def _initial_values(kind: str, p):
    """`r, v, omega_body (n, 3)` of §3.5 with the chosen first-mode velocities."""
    n = _n_bodies(p)
    i = jnp.arange(1, n + 1, dtype=jnp.result_type(float))
    zeros = jnp.zeros_like(i)
    r = jnp.stack([p["spacing"] * i, zeros, zeros], axis=-1)
    if kind == "c1-c3":
        d = vector(p, "d", dtype=r.dtype)
        r = r.at[-1].add(d)
    shape = jnp.sin(jnp.pi * jnp.arange(n) / (n - 1)).at[-1].set(0.0)  # sin(π) is 1e-16
    v = p["v0"] * shape[:, None] * jnp.array([[0.0, 1.0, 0.0]])
    omega = p["omega0"] * shape[:, None] * jnp.array([[1.0, 0.0, 0.0]])
    return r, v, omega


def _quaternion_build(kind: str):
    @builds(QuaternionChain)
    def build(p):
        chain, boundary = _chain(p), _boundary(kind, p)
        r, v, omega = _initial_values(kind, p)
        q = jnp.zeros((r.shape[0], 4), r.dtype).at[:, 0].set(1.0)
        return QuaternionChain(chain, boundary), quaternion_from_velocities(
            chain, boundary, r, q, v, omega
        )

    return build


def _matrix_build(kind: str):
    @builds(RigidBodyChain)
    def build(p):
        chain, boundary = _chain(p), _boundary(kind, p)
        r, v, omega = _initial_values(kind, p)
        R = jnp.broadcast_to(jnp.eye(3, dtype=r.dtype), (r.shape[0], 3, 3))
        return RigidBodyChain(chain, boundary), matrix_from_velocities(
            chain, boundary, r, R, v, omega
        )

    return build


def perturb(state, rng, spread, n):
    """`n` members: every momentum of member k scaled by `1 + spread·N(0, 1)` (member 0
    unperturbed). A common factor keeps the held momenta zero, `P` tangent and `qᵀg = 0`."""
    s = jnp.asarray(1.0 + spread * member_noise(rng, n))  # member 0's factor exactly 1
    scaled = {k: jnp.reshape(s, (n,) + (1,) * jnp.ndim(x)) * x for k, x in state.momenta().items()}
    return ensemble_members(state, n, **scaled)


def observables(model, ts, states, params, values):
    """`end_final`: the last body's centre at the end; `extension_final`: its distance from
    the first body's centre, over the initial one; `tilt_max`: the largest angle (rad) by which
    a body's x axis turned away from the chain's axis x over the run."""
    r = np.asarray(states.r)
    length = np.linalg.norm(r[..., -1, :] - r[..., 0, :], axis=-1)
    axis_x = np.asarray(states.attitude_matrices())[..., :, 0]  # each body's x axis in space
    cos = np.clip(axis_x[..., 0], -1.0, 1.0)
    return {
        "end_final": r[..., -1, -1, :],
        "extension_final": length[..., -1] / length[..., 0],
        "tilt_max": np.arccos(cos).max(axis=(-2, -1)),
    }


_DESCRIPTION = {
    "c1-c1": "both ends clamped (Figure 3.6)",
    "c1-c2": "body 0 clamped, F = (3, 0, 0) on the last body, free to rotate (Figure 3.5)",
    "c1-c3": "body 0 clamped, the last body's centre held displaced by d, free to rotate",
}


def _case(kind: str, parameters: dict) -> Case:
    return Case(
        name=f"chain-tetrahedra-{kind.replace('-', '')}",
        title=f"Chain of 8 Lennard-Jones tetrahedra, {kind} (Chaurasia §3.5)",
        reference=_REF,
        description=(
            f"Chain of n_bodies tetrahedra (a = 1, m = 1; ε = 5, σ = 1; rᵢ(0) = (2i, 0, 0)), "
            f"{_DESCRIPTION[kind]}. First-mode initial velocity v0 sin(πs) ŷ and spin "
            "omega0 sin(πs) about x (chosen: the thesis gives none). Forms: unit quaternions "
            "(gauss6, gauss4, gauss2) and rotation matrices (rattle). Energy conserved."
        ),
        family="chain",
        default_method="gauss6",
        default_dt=0.0025,
        default_t_end=5.0,
        parameters={**PARAMETERS, **parameters},
        build=_quaternion_build(kind),
        other_forms=(_matrix_build(kind),),
        perturb=perturb,
        observables=observables,
        si_units=True,
    )


CASES = [
    _case("c1-c1", {}),
    _case("c1-c2", _FORCE),
    _case("c1-c3", _DISPLACEMENT),
]
