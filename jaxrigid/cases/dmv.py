"""The free-rigid-body examples of Dixon's discrete Moser–Veselov paper (§9, Figures 5–8).

Δt = 0.1 for 1000 steps (Figures 5–6; 10⁴ steps in Figures 7–8), `R0 = 1`, the body angular
momentum `M(0)` given. The principal moments are read as the inertia tensor `𝕀` (the DMV
integrator forms the Moser–Veselov mass matrix `J = ½ tr(𝕀) − 𝕀` from it; see
`jaxrigid.integrators.dmv`). Any rigid-body method applies; the default is `DMV-body`.
"""

from __future__ import annotations

import jax.numpy as jnp

from ..models.rigid_body import RigidBody, RigidBodyState
from .base import Case, Parameter
from .krysl import _inertia, _inertia_params, _vec, perturb_momentum

_REF = "Dixon, discrete Moser–Veselov integrators for rigid body motions"


def _momentum_params(m1, m2, m3):
    return {
        "M1": Parameter(m1, "initial body angular momentum M(0) = Π(0), component 1"),
        "M2": Parameter(m2, "initial body angular momentum M(0) = Π(0), component 2"),
        "M3": Parameter(m3, "initial body angular momentum M(0) = Π(0), component 3"),
    }


def _build(p):
    return RigidBody(_inertia(p)), RigidBodyState(jnp.eye(3), _vec(p, "M"))


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
        parameters={**_inertia_params(*moments), **_momentum_params(*momentum)},
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
