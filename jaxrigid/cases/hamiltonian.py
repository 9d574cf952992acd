"""The four Hamiltonian test problems of Chaurasia (2012), ch. 2 (after Hairer, Lubich &
Wanner, GNI), as named cases of the family `"hamiltonian"`.

Step sizes and horizons are the thesis's where it prints them (§2.1 h = 0.01; §2.2 h = 0.3;
§2.4 h = 0.4 for 80 000 steps, Figure 2.11). For Kepler (§2.3) the thesis gives no step size,
only "100 times" Euler's for symplectic Euler: the default is GNI's (Figure I.2.4: h = 0.05,
t ≤ 200). Horizons of §2.1–2.2 are not printed: ours are 50 oscillator periods / 300 steps.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..models import hamiltonian as ham
from ..models.hamiltonian import CanonicalState, HamiltonianSystem
from ..observers import PoincareSection
from .base import Case, Parameter, builds, ensemble_noise, vector, vector_parameters

_REF = "Chaurasia, M.Tech. thesis, IIT Kanpur (2012), ch. 2"


def perturb_canonical(state: CanonicalState, rng: np.random.Generator, spread: float, n: int):
    """An ensemble of `n` copies with `spread·N(0, 1)` added to every `q` and `p` component
    (additive: several initial values are 0); member 0 is the unperturbed case."""
    scaled = spread * ensemble_noise(rng, n, 2, state.q.shape[-1])
    return CanonicalState(state.q[None, :] + scaled[:, 0], state.p[None, :] + scaled[:, 1])


@builds(HamiltonianSystem)
def _build_oscillator(p):
    model = ham.harmonic_oscillator(p["m"], p["k"])
    return model, CanonicalState(jnp.array([p["q0"]]), jnp.array([p["p0"]]))


@builds(HamiltonianSystem)
def _build_pendulum(p):
    return ham.pendulum(), CanonicalState(jnp.array([p["q0"]]), jnp.array([p["p0"]]))


@builds(HamiltonianSystem)
def _build_kepler(p):
    e = p["e"]
    q0 = jnp.array([1.0 - e, 0.0])
    # e = 1: ZeroDivisionError for a Python float, inf when traced; e > 1: NaN. Either is
    # refused by simulate's state check ("q0 or p0 contains NaN or inf")
    p0 = jnp.array([0.0, jnp.sqrt((1.0 + e) / (1.0 - e))])
    return ham.kepler(), CanonicalState(q0, p0)


_GALACTIC = ("a", "b", "c", "A", "C", "Omega")


@builds(HamiltonianSystem)
def _build_galactic(p):
    model = ham.galactic_orbit(*(p[k] for k in _GALACTIC))
    return model, CanonicalState(vector(p, "q"), vector(p, "p"))


def _galactic_section(p):
    """GNI's (and §2.4's) Poincaré section `q2 = 0, q1 > 0, q̇2 > 0`; the initial point, on
    the section, is not counted (`PoincareSection.include_initial`)."""
    return PoincareSection()


def _galactic_section_observables(observations, p):
    """`poincare_crossings`: the section's crossings over the run (per ensemble member)."""
    return {"poincare_crossings": observations.count}


CASES = [
    Case(
        name="harmonic-oscillator",
        title="Simple harmonic motion (Chaurasia §2.1, Figure 2.1)",
        reference=_REF + ", §2.1",
        description="H = p²/2m + k q²/2 with m = 1, k = 4, q(0) = 0, p(0) = 2, h = 0.01; exact "
        "solution q = sin 2t, p = 2 cos 2t. The thesis compares H for every method.",
        family="hamiltonian",
        default_method="stormer-verlet",
        default_dt=0.01,
        default_t_end=50 * np.pi,
        parameters={
            "m": Parameter(1.0, "mass"),
            "k": Parameter(4.0, "spring constant"),
            "q0": Parameter(0.0, "initial position"),
            "p0": Parameter(2.0, "initial momentum"),
        },
        build=_build_oscillator,
        perturb=perturb_canonical,
    ),
    Case(
        name="pendulum",
        title="Non-linear pendulum, non-separable H (Chaurasia §2.2, Figures 2.2–2.5)",
        reference=_REF + ", §2.2; Hairer, Lubich & Wanner, GNI p. 314",
        description="H = p²/2 − cos q (1 − p/6), q(0) = −arccos(−0.8), p(0) = 0, h = 0.3; "
        "implicit midpoint keeps H bounded, Radau IIA damps it.",
        family="hamiltonian",
        default_method="implicit-midpoint",
        default_dt=0.3,
        default_t_end=90.0,
        parameters={
            "q0": Parameter(float(-np.arccos(-0.8)), "initial angle"),
            "p0": Parameter(0.0, "initial momentum"),
        },
        build=_build_pendulum,
        perturb=perturb_canonical,
    ),
    Case(
        name="kepler",
        title="Kepler's problem, e = 0.6 (Chaurasia §2.3, Figures 2.6–2.9)",
        reference=_REF + ", §2.3; GNI §I.2.3",
        description="H = |p|²/2 − 1/|q|, q(0) = (1 − e, 0), p(0) = (0, √((1+e)/(1−e))), e = 0.6: "
        "period 2π; angular momentum L = q1 p2 − q2 p1 is a quadratic invariant.",
        family="hamiltonian",
        default_method="symplectic-euler-a",
        default_dt=0.05,
        default_t_end=200.0,
        parameters={"e": Parameter(0.6, "eccentricity (sets the initial values)")},
        build=_build_kepler,
        perturb=perturb_canonical,
    ),
    Case(
        name="galactic-orbit",
        title="A star in a rotating triaxial galaxy (Chaurasia §2.4, Table 2.1, Figure 2.11)",
        reference=_REF + ", §2.4; GNI p. 322",
        description="H = |p|²/2 + Ω(p1 q2 − p2 q1) + A log(C + q1²/a² + q2²/b² + q3²/c²); "
        "Figure 2.11 compares H for gauss6 and rk4 at h = 0.4 over 80 000 steps; the run "
        "counts the crossings of the Poincaré section q2 = 0, q1 > 0, q̇2 > 0 (Table 2.1) "
        "as the observable poincare_crossings (the initial point, on the section, excluded).",
        family="hamiltonian",
        default_method="gauss6",
        default_dt=0.4,
        default_t_end=32000.0,
        parameters={
            "a": Parameter(1.25, "potential axis a"),
            "b": Parameter(1.0, "potential axis b"),
            "c": Parameter(0.5, "potential axis c"),
            "A": Parameter(1.0, "potential amplitude A"),
            "C": Parameter(1.0, "potential core constant C"),
            "Omega": Parameter(0.25, "rotation rate of the frame"),
            **vector_parameters("q", "initial position", (2.5, 0.0, 0.0)),
            **vector_parameters("p", "initial momentum", (0.0, 1.688, 0.2)),
        },
        build=_build_galactic,
        perturb=perturb_canonical,
        observer=_galactic_section,
        observation_observables=_galactic_section_observables,
    ),
]
