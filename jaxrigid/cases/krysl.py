"""The four examples of Krysl (2007) §5.

On the Coulombic wall (§5.4): the printed spatial torque
`t = (−(1.1 + R₃₃)⁻² + 0.01 (1.1 + R₃₃)⁻¹¹)(−R₂₃, R₁₃, 0)` is, with the sign convention of the
paper's own top (`t = −20 R(:,3) × e3` from `V = 20 R₃₃`), the torque of
`V = 1/u − 0.001/u¹⁰`, `u = 1.1 + R₃₃`: a *repulsive* Coulomb term and an *attractive*
(singular) u⁻¹⁰ term — the opposite of the words ("attractive Coulombic potential ... soft wall
from which the body is repelled"), whose potential is `V = −1/u + 0.001/u¹⁰`. The printed sign
is the one that reproduces the paper's Figures 4–5: over 40 000 steps of Δt = 0.5 every method
stays bounded (u stays in [0.67, 2.1], turned back by the 1/u term). With the sign of the words
the body reaches the steep wall (u ≈ 0.44) and Δt = 0.5 cannot resolve it: every method's
Newton solve fails within 3 to 74 steps, some after stepping through the wall. Smaller steps
converge (IMIDM from Δt = 0.1) but are inaccurate at the wall: IMIDM's Hamiltonian error is
48% at Δt = 0.1 and 1e-4 at Δt = 0.002. The default is the
printed torque (`coulomb = 1, wall = −0.001`); `--set coulomb=-1 --set wall=0.001` gives the
words' potential.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..lie import so3
from ..models.rigid_body import AxialPowerPotential, HeavyTopPotential, RigidBody, RigidBodyState
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

_REF = "Krysl, Commun. Numer. Meth. Engng 23 (2007)"


def perturb_momentum(state: RigidBodyState, rng: np.random.Generator, spread: float, n: int):
    """An ensemble of `n` copies whose body momenta are scaled componentwise by
    `1 + spread·N(0, 1)`; member 0 is the unperturbed case."""
    Pi = state.Pi[None, :] * (1.0 + spread * ensemble_noise(rng, n, 3))
    return ensemble_members(state, n, Pi=Pi)


@builds(RigidBody)
def _build_free(p):
    I = inertia_matrix(p)
    return RigidBody(I), RigidBodyState(jnp.eye(3), I @ vector(p, "Omega"))


@builds(RigidBody, potential=HeavyTopPotential)
def _build_top(p):
    I = inertia_matrix(p)
    potential = HeavyTopPotential(jnp.array([0.0, 0.0, p["mgl"]]), jnp.array([0.0, 0.0, 1.0]))
    return RigidBody(I, potential), RigidBodyState(
        so3.exp(vector(p, "psi")), I @ vector(p, "Omega")
    )


@builds(RigidBody, potential=AxialPowerPotential)
def _build_coulomb(p):
    I = inertia_matrix(p)
    potential = AxialPowerPotential(
        jnp.asarray(p["coulomb"]), jnp.asarray(p["wall"]), jnp.asarray(p["offset"])
    )
    R0 = jnp.eye(3)
    return RigidBody(I, potential), RigidBodyState(R0, R0.T @ vector(p, "pi"))


def _top_observables(model, ts, states, params, values):
    R33 = np.asarray(states.R[..., 2, 2])
    return {"R33_min": R33.min(axis=-1), "R33_max": R33.max(axis=-1)}


def _coulomb_observables(model, ts, states, params, values):
    u = params["offset"] + np.asarray(states.R[..., 2, 2])
    return {"u_min": u.min(axis=-1), "u_max": u.max(axis=-1)}


def _top_params(psi1, omega3):
    return {
        **inertia_parameters(5.0, 5.0, 1.0),
        **vector_parameters("psi", "initial attitude R0 = exp(psi)", (psi1, 0.0, 0.0)),
        **vector_parameters("Omega", "initial body angular velocity", (0.0, 0.0, omega3)),
        "mgl": Parameter(20.0, "weight times centre-of-mass distance along body axis 3"),
    }


def _top_case(name, title, section, description, psi1, omega3):
    """The Lagrangian top of §5.2–5.3 with initial tilt `psi1` and spin `omega3`."""
    return Case(
        name=name,
        title=title,
        reference=f"{_REF}, {section}",
        description=description,
        family="rigid_body",
        default_method="IMIDM",
        default_dt=0.001,
        default_t_end=20.0,
        parameters=_top_params(psi1, omega3),
        build=_build_top,
        perturb=perturb_momentum,
        observables=_top_observables,
    )


CASES = [
    Case(
        name="krysl-torque-free",
        title="Torque-free rigid body (Krysl §5.1, Figure 1)",
        reference=_REF + ", §5.1",
        description="Free rotation with diag I = (0.9144, 1.098, 1.66), Ω0 = (0.45549, "
        "0.82623, 0.03476), R0 = 1; the paper's convergence study compares states at t = 100.",
        family="rigid_body",
        default_method="IMIDM",
        default_dt=0.01,
        default_t_end=100.0,
        parameters={
            **inertia_parameters(0.9144, 1.098, 1.66),
            **vector_parameters(
                "Omega", "initial body angular velocity", (0.45549, 0.82623, 0.03476)
            ),
        },
        build=_build_free,
        perturb=perturb_momentum,
        torque_free=True,
    ),
    _top_case(
        "krysl-slow-top",
        "Slow Lagrangian top (Krysl §5.2, Figure 2)",
        "§5.2",
        "Symmetric top, diag I = (5, 5, 1), spatial torque t = −20 R(:,3) × e3, "
        "R0 = exp(0.05 e1), Ω0 = (0, 0, 5); convergence compared at t = 20.",
        psi1=0.05,
        omega3=5.0,
    ),
    _top_case(
        "krysl-fast-top",
        "Fast Lagrangian top (Krysl §5.3, Figure 3; Simo & Wong's data)",
        "§5.3",
        "As the slow top with R0 = exp(0.3 e1), Ω0 = (0, 0, 50); convergence compared at t = 20.",
        psi1=0.3,
        omega3=50.0,
    ),
    Case(
        name="krysl-coulomb-wall",
        title="Body in a Coulombic potential with a soft wall (Krysl §5.4, Figures 4–5)",
        reference=_REF + ", §5.4; Holder, Leimkuhler & Reich (2001)",
        description="diag I = (2, 3, 4.5), V = coulomb/u + wall/u^10 with u = offset + R33, "
        "R0 = 1, π0 = (2, 2, 2); Δt = 0.5 for 40 000 steps. The default signs are the "
        "printed torque's (coulomb = 1, wall = −0.001), which reproduce the paper's figures; "
        "the paper's words describe the opposite sign (see jaxrigid.cases.krysl).",
        family="rigid_body",
        default_method="IMIDM",
        default_dt=0.5,
        default_t_end=20000.0,
        parameters={
            **inertia_parameters(2.0, 3.0, 4.5),
            **vector_parameters("pi", "initial spatial angular momentum", (2.0, 2.0, 2.0)),
            "coulomb": Parameter(1.0, "coefficient of 1/u (printed torque: +1)"),
            "wall": Parameter(-0.001, "coefficient of 1/u^10 (printed torque: −0.001)"),
            "offset": Parameter(1.1, "u = offset + R33"),
        },
        build=_build_coulomb,
        perturb=perturb_momentum,
        observables=_coulomb_observables,
    ),
]
