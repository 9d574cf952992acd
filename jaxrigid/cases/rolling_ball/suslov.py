"""`suslov`: Suslov's problem (Putkaradze & Rogers 2018, App. A.2, (A.34)–(A.38)), a rigid
body about a fixed point whose body angular velocity keeps `⟨Ω, ξ⟩ = 0` for a constant body
vector `ξ`.

No contact and no position: `final_state` is `(q, Omega)`, and instead of the contact
observables it reports `max_constraint_torque`, the largest `|λξ|` of (A.36), the torque the
constraint exerts. Ensembles perturb `Ω` within `ξ⊥` (`perturb_suslov`, which needs the model:
the case is a `ModelPerturbedCase`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..._checks import is_concrete
from ...models.suslov import Suslov, SuslovState
from ..base import (
    ModelPerturbedCase,
    Parameter,
    builds,
    ensemble_members,
    ensemble_noise,
    vector_parameters,
)
from .common import (
    REFERENCE,
    family_fields,
    floats,
    inertia_matrix,
    omega_parameters,
    vector,
)


@builds(Suslov)
def _build_suslov(p):
    """Concrete `ξ = 0`: `ValueError`; traced, `Suslov.parameter_checks` refuses it."""
    xi = vector(p, "xi")
    if is_concrete(xi) and not float(jnp.linalg.norm(xi)) > 0:
        raise ValueError("xi must be nonzero")
    Omega = vector(p, "Omega")
    Omega = Omega - (jnp.dot(Omega, xi) / jnp.dot(xi, xi)) * xi  # onto ξ⊥: admissible
    return Suslov(inertia_matrix(p), xi), SuslovState(floats([1.0, 0.0, 0.0, 0.0]), Omega)


def perturb_suslov(model: Suslov, state, rng: np.random.Generator, spread: float, n: int):
    """Suslov: `spread·N(0, 1)` rad/s added to each component of `Ω`, then projected onto
    `ξ⊥` (admissible: `⟨Ω, ξ⟩ = 0`); member 0 is the unperturbed case."""
    xi = model.constraint_vector(jnp.zeros((), state.Omega.dtype))[0]
    Omega = state.Omega[None, :] + spread * ensemble_noise(rng, n, 3)
    Omega = Omega - (Omega @ xi / jnp.dot(xi, xi))[:, None] * xi[None, :]
    return ensemble_members(state, n, Omega=Omega)


def perturb_suslov_scale(state, rng: np.random.Generator, spread: float, n: int):
    """Suslov without its model: `Ω` scaled by `1 + spread·N(0, 1)` (admissible for any `ξ`);
    `jaxrigid run` uses `perturb_suslov`, which knows `ξ`."""
    Omega = state.Omega[None, :] * (1.0 + spread * ensemble_noise(rng, n, 1))
    return ensemble_members(state, n, Omega=Omega)


def suslov_pointwise(model: Suslov, params):
    """The constraint torque's size `|λ ξ|` of (A.36) at a state."""

    def torque(t, s):
        xi = model.constraint_vector(t)[0]
        return {"constraint_torque": jnp.abs(model.multiplier(t, s.Omega)) * jnp.linalg.norm(xi)}

    return torque


def suslov_observables(model: Suslov, ts, states, params, values):
    """`max_constraint_torque`: the largest `|λ ξ|` of (A.36) over the saved path."""
    return {"max_constraint_torque": values["constraint_torque"].max(axis=-1)}


CASES = [
    ModelPerturbedCase(
        name="suslov",
        title="Suslov's problem: a rigid body with ⟨Ω, ξ⟩ = 0, constant ξ (App. A.2)",
        reference=f"{REFERENCE}, App. A.2, (A.34)–(A.38); Suslov (1902)",
        description="A body about a fixed point with I = diag(1, 2, 3) and the body vector "
        "ξ = (0, 0.6, 0.8) (not an eigenvector of I, so the motion is not a steady "
        "rotation), Ω(0) = (1, 0.8, −0.6) (admissible: ⟨Ω, ξ⟩ = 0; a given Omega is "
        "projected onto ξ⊥), Λ(0) = 1. The energy ½Ω·IΩ is conserved and ⟨Ω, ξ⟩ kept. No "
        "contact and no position: final_state is (q, Omega); invariants energy, "
        "constraint, quaternion_norm_error; instead of the contact observables, "
        "max_constraint_torque (max |λξ| of (A.36)). Ensembles perturb Ω within ξ⊥. "
        "h = 0.01, t_end = 10.",
        **family_fields(),
        parameters={
            "I11": Parameter(1.0, "body inertia, entry 11"),
            "I22": Parameter(2.0, "body inertia, entry 22"),
            "I33": Parameter(3.0, "body inertia, entry 33"),
            "I12": Parameter(0.0, "body inertia, entry 12 (= 21)"),
            "I13": Parameter(0.0, "body inertia, entry 13 (= 31)"),
            "I23": Parameter(0.0, "body inertia, entry 23 (= 32)"),
            **vector_parameters("xi", "constraint vector ξ (body)", (0.0, 0.6, 0.8)),
            **omega_parameters((1.0, 0.8, -0.6)),
        },
        build=_build_suslov,
        perturb=perturb_suslov_scale,
        perturb_with_model=perturb_suslov,
        observables=suslov_observables,
        pointwise=suslov_pointwise,
    )
]
