"""The examples of Dixon's discrete Moser–Veselov paper (§9, Figures 5–12).

Free rigid body (Figures 5–8): Δt = 0.1 for 1000 steps (10⁴ steps in Figures 7–8), `R0 = 1`,
the body angular momentum `M(0)` given. The principal moments are read as the inertia tensor
`𝕀` (the DMV integrator forms the Moser–Veselov mass matrix `J = ½ tr(𝕀) − 𝕀` from it; see
`jaxrigid.integrators.dmv`). Any rigid-body method applies; the default is `DMV-body`.

Heavy top (Figure 9): `diag 𝕀 = (2, 2, 1)`, `M(0) = (0.1, 0, 1)`, `Γ(0) = (0, 0, 1)`. The paper
does not print the weight `mg|χ|` nor the direction of `χ₀`; we take the Lagrange top its §7
describes (centre of mass on the symmetry axis, `χ₀ ∥ e₃`) with `mg|χ| = 1` (unit weight at
unit distance). Γ(0) = e₃ then makes the top start upright, where with `M₃ = 1` it is
gyroscopically unstable (`M₃² < 4 I₁ mg|χ|`): it falls and swings, Γ₃ ranging over
[−0.75, 1] in t ≤ 100, so that gravity shapes the whole motion (a sleeping, stable choice such
as `mg|χ| = 0.1` keeps Γ₃ > 0.92 and the motion close to the free body's). `R0` is the
rotation of least angle with `R0ᵀ e₃ = Γ(0)`. The model is `RigidBody` with a
`HeavyTopPotential`, so Krysl's methods apply as well.

Coupled bodies (Figures 10–12; family `coupled_bodies`, model `CoupledBodies`): two identical
bodies, principal moments `(2, 2, 1)` read as each body's inertia tensor about its own centre
of mass, `M¹(0) = M²(0) = (0.5, 0, 1)`, Δt = 0.1 for 1000 steps. The paper prints no masses
and no joint vectors; we take `m₁ = m₂ = 1` and the joint on each body's symmetry axis at unit
distance, at the top of body 1 and the bottom of body 2 (`d₁ = e₃`, `d₂ = −e₃`), `R₁(0) = 1`,
and the angle θ between the bodies as the relative orientation `Λ(0) = exp(θ e₁)`:
θ = π/2 (`dmv-coupled-right-angle`) and θ = 0 (`dmv-coupled-aligned`, the two bodies in one
line). Rotating about e₁ keeps both bodies' E₁ axes horizontal (the paper's φ(0) = ψ(0)). With
the joint on the symmetry axis each body's `M₃` is conserved; the paper's remark that `M₃`
varies in Figure 11 means its joint was off that axis (it is a parameter here). We measure
body 1's `M₂` in [−0.67, 0.67] over 1000 steps at θ = π/2 (the paper: "from −1 to 0.8" with
its unprinted data).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._checks import is_concrete
from ..lie import so3
from ..models.coupled_bodies import CoupledBodies, CoupledBodiesState, check_coupled_state
from ..models.rigid_body import HeavyTopPotential, RigidBody, RigidBodyState
from .base import (
    Case,
    Parameter,
    builds,
    ensemble_members,
    ensemble_noise,
    inertia_matrix,
    inertia_parameters,
    vector,
    vector_parameters,
)
from .krysl import perturb_momentum

_REF = "Dixon, discrete Moser–Veselov integrators for rigid body motions"


def _momentum_params(m1, m2, m3):
    return vector_parameters("M", "initial body angular momentum M(0) = Π(0)", (m1, m2, m3))


@builds(RigidBody)
def _build(p):
    return RigidBody(inertia_matrix(p)), RigidBodyState(jnp.eye(3), vector(p, "M"))


def _free_body_case(name, title, figures, moments, momentum, shape):
    return Case(
        name=name,
        title=title,
        reference=_REF + ", §9, " + figures,
        description=f"Free rigid body, {shape}, diag I = {moments}, M(0) = {momentum}, R0 = 1; "
        "Δt = 0.1 for 1000 steps (10⁴ for the conservation figures). DMV keeps |M|, the "
        "spatial momentum and the energy to round-off; its momentum error is a phase error "
        "of order Δt².",
        family="rigid_body",
        default_method="DMV-body",
        default_dt=0.1,
        default_t_end=100.0,
        parameters={**inertia_parameters(*moments), **_momentum_params(*momentum)},
        build=_build,
        perturb=perturb_momentum,
        torque_free=True,
    )


CASES = [
    _free_body_case(
        "dmv-free-body-symmetric",
        "Symmetric free rigid body (Dixon §9, Figures 5 and 7)",
        "Figures 5, 7",
        (2.0, 2.0, 1.0),
        (0.1, 0.0, 1.0),
        "I1 = I2 > I3 (regular precession: M rolls on a cone about e3)",
    ),
    _free_body_case(
        "dmv-free-body-asymmetric",
        "Asymmetric free rigid body (Dixon §9, Figures 6 and 8)",
        "Figures 6, 8",
        (3.5, 2.5, 2.0),
        (-0.5, 0.0, 1.0),
        "I1 > I2 > I3 (M circulates about the axis of the smallest moment)",
    ),
]


def _rotation_to_e3(Gamma):
    """`R` of least angle with `Rᵀ e₃ = Γ` (unit `Γ`): `R = exp(θ n)` with `n ∥ Γ × e₃`; on
    the axis (`Γ × e₃ = 0`) `1` or the half turn about e1. Traceable (`jnp.where`, no branch)."""
    e3 = jnp.array([0.0, 0.0, 1.0])
    axis = jnp.cross(Gamma, e3)
    s, c = jnp.linalg.norm(axis), jnp.dot(Gamma, e3)
    on_axis = s == 0.0
    turn = so3.exp(jnp.arctan2(s, c) / jnp.where(on_axis, 1.0, s) * axis)
    flip = jnp.where(c > 0, jnp.eye(3), jnp.diag(jnp.array([1.0, -1.0, -1.0])))
    return jnp.where(on_axis, flip, turn)


_UNIT_TOL = 1e-12  # |Γ| = 1 to this


@builds(RigidBody, potential=HeavyTopPotential)
def _build_heavy_top(p):
    """Concrete `Γ`: `ValueError` unless unit. Traced (a sweep): `R0` is NaN for a member
    whose `Γ` is not unit (no rotation has `R0ᵀe₃ = Γ`), which `simulate`'s state checks
    refuse ("R0 contains NaN or inf")."""
    Gamma = vector(p, "Gamma")
    norm = jnp.linalg.norm(Gamma)
    if is_concrete(norm) and abs(float(norm) - 1.0) > _UNIT_TOL:
        raise ValueError(
            f"Gamma (the vertical in the body frame) must be a unit vector, "
            f"|Gamma| = {float(norm):.17g}"
        )
    R0 = jnp.where(jnp.abs(norm - 1.0) <= _UNIT_TOL, _rotation_to_e3(Gamma), jnp.nan)
    potential = HeavyTopPotential(vector(p, "mgchi"), jnp.array([0.0, 0.0, 1.0]))
    return RigidBody(inertia_matrix(p), potential), RigidBodyState(R0, vector(p, "M"))


def _heavy_top_observables(model, ts, states, params, values):
    Gamma3 = np.asarray(states.R[..., 2, 2])
    return {"Gamma3_min": Gamma3.min(axis=-1), "Gamma3_max": Gamma3.max(axis=-1)}


HEAVY_TOP = Case(
    name="dmv-heavy-top",
    title="Heavy (Lagrange) top (Dixon §7, §9, Figure 9)",
    reference=_REF + ", §7, §9, Figure 9",
    description="Heavy top V = up·(R mgχ₀), up = e3, diag I = (2, 2, 1), M(0) = (0.1, 0, 1), "
    "Γ(0) = Rᵀe3 = (0, 0, 1), mgχ₀ = (0, 0, 1) (the paper prints no weight: a Lagrange top of "
    "unit weight at unit distance, which starts upright and falls); Δt = 0.1 for 1000 steps. "
    "DMV (half gravity kicks around the free Moser–Veselov step) keeps the Casimirs "
    "⟨Π, Γ⟩ (Pi_dot_Gamma) and |Γ| (Gamma_norm) to round-off.",
    family="rigid_body",
    default_method="DMV-body",
    default_dt=0.1,
    default_t_end=100.0,
    parameters={
        **inertia_parameters(2.0, 2.0, 1.0),
        **_momentum_params(0.1, 0.0, 1.0),
        **vector_parameters("Gamma", "initial vertical in the body frame Γ(0) = R0ᵀe3", (0, 0, 1)),
        # the paper prints no weight: mgχ₀ = e3 is a unit weight at unit distance
        **vector_parameters("mgchi", "weight × body centre of mass mgχ₀", (0, 0, 1)),
    },
    build=_build_heavy_top,
    perturb=perturb_momentum,
    observables=_heavy_top_observables,
)

CASES.append(HEAVY_TOP)


@builds(CoupledBodies)
def _build_coupled(p):
    I = inertia_matrix(p)
    model = CoupledBodies(
        jnp.stack([I, I]),
        jnp.array([p["mass1"], p["mass2"]]),
        jnp.stack([vector(p, "d1"), vector(p, "d2")]),
    )
    M = vector(p, "M")
    state = CoupledBodiesState(
        jnp.eye(3), so3.exp(jnp.array([p["theta"], 0.0, 0.0])), jnp.stack([M, M])
    )
    if is_concrete(state):  # traced (a sweep): simulate's state checks, the same ones
        check_coupled_state(state)
    return model, state


def perturb_coupled(state: CoupledBodiesState, rng: np.random.Generator, spread: float, n: int):
    """`n` copies whose body momenta (both bodies) are scaled componentwise by
    `1 + spread·N(0, 1)`; member 0 is the unperturbed case."""
    Pi = state.Pi[None] * (1.0 + spread * ensemble_noise(rng, n, 2, 3))
    return ensemble_members(state, n, Pi=Pi)


def _coupled_observables(model, ts, states, params, values):
    """Extremes over the run of each body's momentum components, `(2, 3)` per member."""
    Pi = np.asarray(states.Pi)
    return {"Pi_min": Pi.min(axis=-3), "Pi_max": Pi.max(axis=-3)}


def _coupled_params(theta):
    return {
        **inertia_parameters(2.0, 2.0, 1.0),
        **vector_parameters(
            "M", "initial body angular momentum of both bodies M¹(0) = M²(0)", (0.5, 0.0, 1.0)
        ),
        "mass1": Parameter(1.0, "mass of body 1 (not printed)"),
        "mass2": Parameter(1.0, "mass of body 2 (not printed)"),
        **vector_parameters(
            "d1", "joint seen from body 1's centre of mass, body-1 frame (not printed)", (0, 0, 1)
        ),
        **vector_parameters(
            "d2", "joint seen from body 2's centre of mass, body-2 frame (not printed)", (0, 0, -1)
        ),
        "theta": Parameter(theta, "initial angle between the bodies: Λ(0) = R₁ᵀR₂ = exp(θ e1)"),
    }


def _coupled_case(name, title, figures, theta, words):
    return Case(
        name=name,
        title=title,
        reference=_REF + ", §8, §9, " + figures,
        description=f"Two identical bodies (diag I = (2, 2, 1), m = 1) joined by a ball-and-"
        f"socket joint on their symmetry axes (d1 = e3, d2 = −e3; not printed in the paper), "
        f"{words}: Λ(0) = exp({theta:.6g} e1), R1(0) = 1, M¹(0) = M²(0) = (0.5, 0, 1); Δt = 0.1 "
        "for 1000 steps. DMV keeps the total spatial momentum (pi1..3; pi_norm is the Casimir "
        "‖M1 + ΛM2Λᵀ‖) to round-off; the energy K stays bounded.",
        family="coupled_bodies",
        default_method="DMV-body",
        default_dt=0.1,
        default_t_end=100.0,
        parameters=_coupled_params(theta),
        build=_build_coupled,
        perturb=perturb_coupled,
        observables=_coupled_observables,
    )


CASES += [
    _coupled_case(
        "dmv-coupled-right-angle",
        "Two coupled rigid bodies at right angles (Dixon §8–9, Figures 10, 12)",
        "Figures 10, 12",
        float(np.pi / 2),
        "initially at right angles",
    ),
    _coupled_case(
        "dmv-coupled-aligned",
        "Two coupled rigid bodies aligned (Dixon §8–9, Figure 11)",
        "Figure 11",
        0.0,
        "initially aligned (in one line)",
    ),
]
