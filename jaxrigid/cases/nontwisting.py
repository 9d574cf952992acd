"""The three cases of Gebhardt & Romero (2020), §6: the non-twisting rigid body with the
inertia (111), `Λ(0) = I`, `h = 0.005`, `t ∈ [0, 5]`, family `"director"`, default method
`EM-AVF` (the paper's §5.2 scheme).

- Case 1 (112–113): `ω⊥(0) = 6 d1 − 18 d2`, no load.
- Case 2 (114–116): at rest, `m⊥ = −f(t)(2472.5 d1 + 1075 d2)`.
- Case 3 (117–118): `ω⊥(0) = 1.5 d1 + 4.5 d2`, `m⊥ = −f(t)(1236.25 d1 + 537.5 d2)`.

`load_scale` multiplies the load; `omega1`, `omega2` set `ω⊥(0)`. Invariants: `K`, `Pi1..3`
(material momentum) without load (Case 1, or `load_scale = 0`); loaded, the load changes
them and they are observables (`DirectorRigidBody.conserved_quantities`). `q2_every = τ > 0`
reports `Q_II` (Appendix A, eq. 120; the run repeated at h/2 and h/4, ξ the whole state) at
t = τ, 2τ, … ≤ t_end as the observable `Q_II` (with `Q_II_t`, the times); `q2_every = 0` turns
it off.

**Table 1 (Case 1, Q_II) against the printed digits.** Full float64 gives 3.9949283,
3.9948752, 3.9947866, 3.9946626, 3.9945032 at t = 1..5; the paper prints 3.994933, 3.994869,
3.994787, 3.994663, 3.994504: t = 3, 4 agree to the 6 printed digits, t = 1, 2, 5 differ by
4.7e-6, 6.2e-6, 0.8e-6. Rounding our directors to 8 decimals before forming Q_II gives 3.994934,
3.994870, 3.994787, 3.994663, 3.994505 — the paper's pattern (same signs, same size, shrinking
as 1/t like the denominator grows): its Q_II was evidently formed from output stored with about
8 decimals, whose rounding moves Q_II by ~5e-6 at t = 1 (std over random roundings) and ~1e-6
at t = 5. Case 1 is a steady rotation about the fixed axis ω⊥(0) (Π is constant, so w is), so
Q_II depends only on the scheme's phase error and not on which part of the state ξ holds.
Table 2 agrees to all printed digits once one notes that the paper *truncates*
(144/7 = 20.5714285… is printed 20.571428, −510/7 as −72.857142).

**Cases 2 and 3 (Tables 3–6 withheld): the printed loads are not resolved at h = 0.005.**
Without load every non-twisting motion is a steady rotation (Π constant ⇒ w constant in
space), and the continuous split form gives the stationary values exactly by the
impulse–momentum balance Π̇ᵅ = m⊥·dᵅ, ∫f = ½: Case 2 Π = (−1236.25, −537.5), K = 299251.75,
|w| = 445 rad/s; Case 3 Π = (−614.267857, −250.964286), K = 72719.286, |w| = 220 rad/s. So the
body turns |w|h ≈ 2.2 (Case 2) and 1.1 (Case 3) rad per step at the paper's h. The scheme stays
stable and conservative, but it is far from its asymptotic regime: at h = 0.005 we get
Case 2 Π = (−983.5585, −419.8093), K = 188497.3213, Q_II(1..5) = 0.90, 1.44, 0.98, 0.11, 0.61;
Case 3 Π = (−566.8502, −228.3640), K = 61717.9727, Q_II = 0.67, 0.67, 1.03, 1.69, 3.58
(Π¹, Π² after t = 1 vary in the 8th–9th digit, K in the 13th). The discrete load response is
damped because the load acts on the midpoint directors, of length cos(|w|h/2). At h/16 the
values approach the balance at second order (Case 2 Π = (−1234.2918, −536.5690),
Case 3 (−614.0317, −250.8508)). The paper's "Q_II ≈ 4" for Cases 2–3 cannot hold with these
loads at this h; with `load_scale = 0.02` (|w|h ≈ 0.05–0.1) Q_II = 3.997 / 3.999, and at the
printed loads Q_II reaches 4 once h resolves the rotation: within 0.05 of 4 at t = 1..5 for
h = 0.005/64 in Case 2 (3.9986 … 3.9852) and h = 0.005/32 in Case 3 (3.9986 … 3.9954); Case 2
gives Q_II(5) = 1.35, 3.79, 3.985, 3.9988 at h = 0.005/16, /32, /64, /128. Likely the
printed load amplitudes (or their units) are not those of the paper's runs; nothing is
rescaled here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from .._checks import is_concrete
from ..models.director import (
    DirectorRigidBody,
    DirectorState,
    MaterialPulseMoment,
    angular_velocity,
    check_director_body,
    check_director_state,
    from_rotation,
)
from .base import Case, Parameter, builds, ensemble_members, member_noise

_REF = "Gebhardt & Romero, The rotating rigid body model based on a non-twisting frame (2020)"

INERTIA_111 = np.array([[3.0, -1 / 7, 0.0], [-1 / 7, 4.0, 0.0], [0.0, 0.0, 5.0]])
"""The convected inertia J of (111) (Euler's coefficients 𝒥 = [[3, 1/7, 0], [1/7, 2, 0],
[0, 0, 1]])."""


@dataclasses.dataclass(frozen=True)
class RefinedCase(Case):
    """A case with observables that need more runs of the method (e.g. Q_II at h/2, h/4):
    `refinement_observables(integrator, model, state0, dt, n_steps, params) -> dict`."""

    refinement_observables: Callable | None = None


def build_case(omega, amplitudes, load_scale=1.0):
    """`(model, state0)`: the body (111) at `Λ = I` spinning at `ω⊥ = (ω1, ω2, 0)`, loaded by
    `load_scale · m⊥` of (115)/(118) with `amplitudes = (A¹, A²)`."""
    moment = MaterialPulseMoment(load_scale * jnp.asarray(amplitudes, dtype=jnp.float64))
    model = DirectorRigidBody.from_convected(jnp.asarray(INERTIA_111), moment, nontwisting=True)
    state0 = from_rotation(jnp.eye(3), jnp.array([omega[0], omega[1], 0.0]))
    if is_concrete(model, state0):  # traced (a sweep): simulate's checks (the velocities are
        check_director_body(model)  # admissible by construction: ω⊥ has no d3 component)
        check_director_state(state0, nontwisting=True)
    return model, state0


def perturb_velocity(state: DirectorState, rng: np.random.Generator, spread: float, n: int):
    """`n` copies with `spread·N(0, 1)` rad/s added to `ω⊥(0)` along d1 and d2 (the twist stays
    zero); member 0 is the unperturbed case."""
    d = state.q.reshape(3, 3)
    omega = angular_velocity(state)[None, :] + jnp.asarray(spread * member_noise(rng, n, 2)) @ d[:2]
    return ensemble_members(state, n, v=jnp.cross(omega[:, None, :], d[None, :, :]).reshape(n, 9))


def q2_observables(integrator, model, state0, dt, n_steps, params):
    """`Q_II` at multiples of `q2_every` (none if 0)."""
    from ..diagnostics import q2_along

    every = params.get("q2_every", 0.0)
    if every <= 0:
        return {}
    k = max(1, round(every / dt))
    times = [n * k * dt for n in range(1, n_steps // k + 1)]
    if not times:
        return {}
    return {
        "Q_II_t": np.asarray(times),
        "Q_II": np.asarray(q2_along(integrator, model, state0, dt, times)),
    }


def _params(omega, default_q2=1.0):
    return {
        "omega1": Parameter(omega[0], "initial ω⊥ along d1(0) [rad/s]"),
        "omega2": Parameter(omega[1], "initial ω⊥ along d2(0) [rad/s]"),
        "load_scale": Parameter(1.0, "factor on the applied moment m⊥"),
        # structural: it sets how many Q_II reports the run makes (their shape) and is read as
        # a Python number by `q2_observables`, not by the build; a sweep has no Q_II reports
        "q2_every": Parameter(
            default_q2,
            "report Q_II (Appendix A) every this many seconds; 0: off (not sweepable)",
            sweepable=False,
        ),
    }


def _case(number, title, eqs, omega, amplitudes, description):
    @builds(DirectorRigidBody)
    def build(p):
        return build_case((p["omega1"], p["omega2"]), amplitudes, p["load_scale"])

    return RefinedCase(
        name=f"nontwisting-case{number}",
        title=f"Non-twisting rigid body, Case {number}: {title} (Gebhardt & Romero §6.{number})",
        reference=_REF + f", §6.{number}, eqs. {eqs}",
        description=description
        + " Inertia (111), Λ(0) = I, h = 0.005, t ∈ [0, 5]; EM-AVF (§5.2). K, Pi1..3 "
        "(material momentum): invariants without load, else observables; Q_II at "
        "t = q2_every, 2 q2_every, ... (observable Q_II).",
        family="director",
        default_method="EM-AVF",
        default_dt=0.005,
        default_t_end=5.0,
        parameters=_params(omega),
        build=build,
        perturb=perturb_velocity,
        refinement_observables=q2_observables,
        si_units=True,
    )


CASE1_AMPLITUDES = (0.0, 0.0)
CASE2_AMPLITUDES = (2472.5, 1075.0)
CASE3_AMPLITUDES = (1236.25, 537.5)

CASES = [
    _case(
        1,
        "nonzero initial conditions",
        "(111)–(113), Tables 1–2",
        (6.0, -18.0),
        CASE1_AMPLITUDES,
        "ω⊥(0) = 6 d1 − 18 d2, no load: a steady rotation about a fixed axis, d3 on a great "
        "circle; K = 717.428571, Π = (20.571428, −72.857142, 0).",
    ),
    _case(
        2,
        "a vanishing load",
        "(114)–(116), Tables 3–4",
        (0.0, 0.0),
        CASE2_AMPLITUDES,
        "At rest, m⊥ = −f(t)(2472.5 d1 + 1075 d2) with the ramp f of (116) (zero after t = 1).",
    ),
    _case(
        3,
        "nonzero initial conditions and a vanishing load",
        "(116)–(118), Tables 5–6",
        (1.5, 4.5),
        CASE3_AMPLITUDES,
        "ω⊥(0) = 1.5 d1 + 4.5 d2, m⊥ = −f(t)(1236.25 d1 + 537.5 d2) (zero after t = 1).",
    ),
]
