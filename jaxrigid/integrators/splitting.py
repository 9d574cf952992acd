"""Explicit Lie–Poisson splitting for a rigid body in a potential.

McLachlan (1993), "Explicit Lie–Poisson integration and the Euler equations", Phys. Rev.
Lett. 71, 3043; Touma & Wisdom (1994), "Lie–Poisson integrators for rigid body dynamics in
the solar system", Astron. J. 107, 1189; Dullweber, Leimkuhler & McLachlan (1997), J. Chem.
Phys. 107, 5840. Not in the five papers: the explicit symmetric base method that the
compositions of `tableau.compositions` lift to orders 4–10 without a Newton solve.

In principal body axes (`𝕀 = diag(I₁, I₂, I₃)`) the Hamiltonian `H = ½ Πᵀ𝕀⁻¹Π + V(t, R)`
splits into pieces whose flows are exact rotations:

    H = |Π|²/(2I_b) + Σᵢ ½kᵢΠᵢ² + V,        kᵢ = 1/Iᵢ − 1/I_b,   I_b the median moment.

- `½kᵢΠᵢ²` (Π̇ = Π × kᵢΠᵢeᵢ keeps Πᵢ): `R ← R exp(w)`, `Π ← exp(−w)Π`, `w = τkᵢΠᵢeᵢ`;
- the Casimir `|Π|²/(2I_b)` (commutes with every piece): `R ← R exp(τΠ/I_b)`, `Π` unchanged;
- `V` (R fixed): the kick `Π ← Π + τT(t, R)`, `T` the potential's body torque.

One step is Strang's splitting `V(½h) ∘ A₁(½h) A₂(½h) A₃(h) A₂(½h) A₁(½h) ∘ C(h) ∘ V(½h)`
(the kicks at `t` and `t + h`): explicit, symmetric, symplectic, second order. Every piece is
the exact flow of a left-invariant Hamiltonian or of the potential, so `|Π|` is kept exactly,
the spatial momentum `π = RΠ` (for the free body; its component along a symmetry axis of the
potential, e.g. `π₃` of the heavy top), the heavy top's `⟨Π, Γ⟩` and `|Γ|`, and `RᵀR = 1`,
all to round-off. The energy is not kept; its error stays bounded (symplectic).

**Why the median moment goes into the Casimir:** the median axis's piece vanishes
(`k_b = 0`), and for a symmetric body (two equal moments: either they include the median or
they are the median) a second piece vanishes too; the remaining one commutes with the
Casimir, so the free flow is *exact* for every axisymmetric body, whatever its spin. For the
fast top (Krysl §5.3, Ω₃ = 50) only the gravity kicks make an error, not the fast spin: this
is why the method wins on that problem. For an asymmetric body the error constant is
`∝ k_a k_c`, the smallest of the three choices of axis.

**Principal axes are required** (a diagonal inertia): finding them for a general inertia is
an eigendecomposition, whose derivative is undefined at a symmetric body (the case the median
trick makes exact). `value_checks` refuses a non-diagonal inertia before a run, and a step
taken directly on one reports `RESULTS.model_unsupported`; rotate the body frame to the
principal axes (R ← R Q, Π ← QᵀΠ, 𝕀 ← Qᵀ𝕀Q) to use the method.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import results
from .._carry import tied
from .._checks import Check
from .._linalg import matmul
from ..compensated import two_sum, zero_error
from ..lie import quaternion, so3
from ..models.rigid_body import RigidBodyState
from ..models.structures import AbstractLiePoissonBody
from ..results import RESULTS
from .base import AbstractIntegrator, explicit_info
from .composition import AbstractComposition

_REF = (
    "McLachlan (1993) PRL 71:3043; Touma & Wisdom (1994) AJ 107:1189; "
    "Dullweber, Leimkuhler & McLachlan (1997) JCP 107:5840"
)
# The axis flows of one step, (axis, fraction of Δt): symmetric about the middle one.
_AXIS_SEQUENCE = ((0, 0.5), (1, 0.5), (2, 1.0), (1, 0.5), (0, 0.5))


def off_diagonal_inertia(inertia):
    """Largest |off-diagonal entry| of `inertia (..., 3, 3)`: zero in principal axes."""
    off = inertia - inertia * jnp.eye(3, dtype=inertia.dtype)
    return jnp.max(jnp.abs(off), axis=(-2, -1))


def free_flow(moments, Pi, h, error=None):
    """The free body's split flow over `h` from `Π` (principal `moments (3,)`): returns
    `(Q − 1, Π₁, error₁)` with `R₁ = R Q`, `Π₁ = QᵀΠ` (Π₁ formed turn by turn).

    The turns are composed as quaternion increments `q − 1` (`quaternion.expm1`, angles first
    reduced to ≤ π), and `Q − 1` is formed once from their product: it is off the rotation
    group by one rounding of its entries, as one Rodrigues turn (IMIDM's). Composing the six
    turns as 3×3 matrices instead (each product and sum rounding off the group again) made
    `RᵀR` drift faster than IMIDM's in float32 on steady spins
    (`test_float32_orthogonality_drifts_no_faster_than_imidm`), and was no faster under
    `vmap` on the CPU; quaternions from `sin`/`cos` instead of the series ran slower there
    (bench/README.md, "Measurements behind the source's design choices").

    `error`: None, or the rounding error of `Π` (compensated summation, `jaxrigid.compensated`):
    the exact momentum `Π + error` then sets the angles, each turn's increment of it joins `Π`
    by TwoSum, and `error₁` is what that rounding left."""
    I_b = jnp.sort(moments)[1]
    k = 1.0 / moments - 1.0 / I_b  # exactly zero on the median axis

    def of_exact(linear):  # linear(Π + e), e apart: the sum would round to Π itself
        return linear(Pi) if error is None else linear(Pi) + linear(error)

    q1 = quaternion.expm1(so3.reduce_rotation_vector(of_exact(lambda v: h * v / I_b)))  # Casimir
    for axis, fraction in _AXIS_SEQUENCE:
        angle = of_exact(lambda v: fraction * h * k[axis] * v[..., axis])
        angle = angle - (2.0 * np.pi) * jnp.round(angle / (2.0 * np.pi))  # |angle| ≤ π
        w = angle[..., None] * np.eye(3)[axis].astype(Pi.dtype)
        q1 = quaternion.compose_increments(q1, quaternion.expm1(w))
        a, b, _ = so3.rodrigues_coefficients(angle * angle)  # sin θ/θ, (1 − cos θ)/θ²
        sin_angle, versin_angle = a * angle, b * (angle * angle)
        turn = lambda v: _axis_rotation_increment(v, axis, sin_angle, versin_angle)  # noqa: E731
        if error is None:
            Pi = Pi + turn(Pi)
        else:  # exp(−w)(Π + e) = Π + [(exp(−w) − 1)Π + e + (exp(−w) − 1)e]
            Pi, error = two_sum(Pi, turn(Pi) + (error + turn(error)))
    return quaternion.increment_to_matrix(q1), Pi, error


# A turn about a principal axis rotates Π in one coordinate plane: written for that plane,
# not as the general Rodrigues form on `angle·eᵢ`, whose two zero entries it multiplied
# through. The coefficients still come from `so3.rodrigues_coefficients`: written as bare
# half-angle series (no `where`, square root or division), XLA:CPU fused copies of them into
# every consumer, and a composition compiled and ran far slower (bench/README.md,
# `compile_cost.py`).


def _axis_rotation_increment(v, axis, sin_angle, versin_angle):
    """`exp(−θ eᵢ) v − v` (`so3.rotate_expm1(−θ eᵢ, v)`): entry `i` unchanged, the other two
    turned in their plane, `(v_j, v_k) ↦ (sin θ v_k − (1 − cos θ) v_j, −sin θ v_j − (1 − cos θ)
    v_k)` for (i, j, k) cyclic."""
    i, j, k = axis, (axis + 1) % 3, (axis + 2) % 3
    vj, vk = v[..., j], v[..., k]
    out = [None] * 3
    out[i] = jnp.zeros_like(vj)
    out[j] = sin_angle * vk - versin_angle * vj
    out[k] = -sin_angle * vj - versin_angle * vk
    return jnp.stack(out, axis=-1)


def _turn(R, Q1, error):
    """`R Q` from `Q − 1`: `R + R(Q − 1)`, by TwoSum with the rounding `error` of `R` when
    compensating (`(R + e)Q = R + [R(Q − 1) + e + e(Q − 1)]`). Returns `(R Q, error)`."""
    if error is None:
        return R + matmul(R, Q1), None
    return two_sum(R, matmul(R, Q1) + (error + matmul(error, Q1)))


def _kick(Pi, impulse, error):
    """`Π + impulse`, by TwoSum with the rounding `error` of `Π` when compensating."""
    if error is None:
        return Pi + impulse, None
    return two_sum(Pi, impulse + error)


def _info(model, dtype):
    """A step's info: explicit, `model_unsupported` off principal axes (`value_checks`)."""
    bad = off_diagonal_inertia(model.inertia) != 0
    info = explicit_info(dtype)
    return info._replace(result=results.where(bad, RESULTS.model_unsupported, info.result))


def _kick_fractions(fractions):
    """The kicks of a composition of steps with fractions γᵢ once the two kicks at each stage
    boundary are merged: ½γ₁ before the first flow, ½(γᵢ + γᵢ₊₁) after flow i, ½γ_m last."""
    gammas = np.asarray(fractions, dtype=np.float64)
    # a Python float: a numpy float64 would promote a float32 state to float64
    return 0.5 * float(gammas[0]), 0.5 * (gammas + np.append(gammas[1:], 0.0))


def _composed_steps(fractions, model, state, t, dt, error=None):
    """The stages of a composition of LP-split steps with the boundary kicks merged:
    `V(½γ₁h) F(γ₁h) V(½(γ₁+γ₂)h) F(γ₂h) … F(γ_m h) V(½γ_m h)`, `F` the free flow (one step:
    `fractions = (1,)`). `error`: None, or the state's rounding error (a `RigidBodyState`) to
    compensate with. Returns `(state, error)`."""
    R, Pi = state
    eR, ePi = (None, None) if error is None else error
    moments = jnp.diagonal(model.inertia, axis1=-2, axis2=-1)
    dtype = jnp.result_type(dt)
    first, after = _kick_fractions(fractions)
    kicks = model.potential is not None
    if kicks:
        Pi, ePi = _kick(Pi, first * dt * model.body_torque(t, R, Pi), ePi)

    def stage(carry, x):
        R, Pi, t, eR, ePi = carry
        gamma, kick = x
        Q1, Pi, ePi = free_flow(moments, Pi, gamma * dt, ePi)
        R, eR = _turn(R, Q1, eR)
        t = t + gamma * dt
        if kicks:
            Pi, ePi = _kick(Pi, kick * dt * model.body_torque(t, R, Pi), ePi)
        return (R, Pi, t, eR, ePi), None

    # The stages are a scan, one stage compiled whatever their number: on the CPU as fast to
    # run as straight-line stages and up to 16x quicker to compile (design note 24)
    xs = (jnp.asarray(fractions, dtype), jnp.asarray(after, dtype))
    init = tied((R, Pi, t, eR, ePi), (model, dt))
    carry, _ = lax.scan(stage, init, xs, unroll=len(fractions) == 1)
    R, Pi, _, eR, ePi = carry
    return RigidBodyState(R, Pi), None if error is None else RigidBodyState(eR, ePi)


class LiePoissonComposition(AbstractComposition):
    """A composition of `LP-split` steps (`compose(LiePoissonSplitting(), scheme)`) with each
    stage's last kick and the next stage's first merged into one (the kicks meet at one
    `(t, R)`, and the torque of a potential does not depend on `Π`): `m + 1` torques a step
    instead of `2m`, the same method to round-off (GNI §V.3.1, "first same as last")."""

    def step(self, model, state, solver_state, t, dt):
        error = solver_state if self.compensated else None
        state1, error = _composed_steps(self.fractions, model, state, t, dt, error)
        return state1, error, _info(model, state1.Pi.dtype)


class LiePoissonSplitting(AbstractIntegrator):
    """Explicit symmetric Lie–Poisson splitting (module docstring): kick, exact axis and
    Casimir rotations, kick. Second order, symplectic; keeps `|Π|`, `π = RΠ` (free body) and
    `RᵀR = 1` to round-off. A `RigidBody` in principal axes whose torque is a potential's.
    `compensated=True`: compensated summation of every turn and kick, the rounding error in
    the solver state (`jaxrigid.compensated`; its compositions carry one error through their
    stages)."""

    name: ClassVar[str] = "LP-split"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({"pi", "RtR_error"})
    reference: ClassVar[str] = _REF
    fused_composition: ClassVar[type] = LiePoissonComposition
    compensated_summation: ClassVar[bool] = True
    compensated: bool = eqx.field(default=False, static=True)

    def requires(self, model) -> str | None:
        if model.torque is None:
            return None
        return (
            "it integrates a RigidBody in principal axes (diagonal inertia) whose torque, if "
            "any, is a potential's (no torque function)"
        )

    def value_checks(self, model) -> list[Check]:
        off = off_diagonal_inertia(model.inertia)
        return [
            Check(
                off != 0,
                f"{self.name} needs the inertia in principal axes (diagonal); largest "
                "off-diagonal entry",
                off,
            )
        ]

    def init(self, model, state0, t0, dt):
        return zero_error(state0) if self.compensated else None

    def step(self, model, state, solver_state, t, dt):
        error = solver_state if self.compensated else None
        state1, error = _composed_steps((1.0,), model, state, t, dt, error)
        return state1, error, _info(model, state1.Pi.dtype)
