"""Runge–Kutta–Munthe-Kaas (RKMK) methods: a Butcher tableau applied to the model's incremental
form, a vector-space ODE, on SO(3) × Rᵏ (Munthe-Kaas, BIT 38 (1998) 92–111; Krysl (2007) §3.7,
algorithm MKRK; Hairer, Lubich & Wanner, GNI §IV.8.2).

**The method.** On a step of size `h` from `(g₀, y₀)` at `t`, write the attitude
`g(t + τ) = g₀ exp Θ(τ)`, `Θ(0) = 0`, and `y` for the state's Euclidean components:

    Θ′ = dexp⁻¹_{−Θ} Ω(g₀ exp Θ, y),   y′ = f(t + τ, g₀ exp Θ, y),            (1)

an equation in the vector space R³ × Rᵏ (`so3.dexpinv` is the inverse of the right-trivialised
differential, `exp(Θ)ᵀ d exp(Θ)[Θ′] = hat(dexp_{−Θ} Θ′)`, so `Ω = dexp_{−Θ} Θ′`; GNI writes the
same map `dexp⁻¹_Θ` of its left-trivialised `dexp`). The tableau `(c, A, b)` applied to (1):

    Θᵢ = h Σⱼ aᵢⱼ kⱼ,   Yᵢ = y₀ + h Σⱼ aᵢⱼ lⱼ,   Gᵢ = g₀ exp Θᵢ,
    kᵢ = dexp⁻¹_{−Θᵢ} Ω(Gᵢ, Yᵢ),   lᵢ = f(t + cᵢh, Gᵢ, Yᵢ),
    g₁ = g₀ exp(h Σᵢ bᵢkᵢ),   y₁ = y₀ + h Σᵢ bᵢlᵢ.

With `dexp⁻¹` exact this is the tableau's RK method on (1): the order is the tableau's.
`dexp⁻¹` may be replaced by its Bernoulli series truncated after the terms of degree `q − 2` in
`Θ` for a tableau of order `q` (Munthe-Kaas 1999, "High order Runge–Kutta methods on
manifolds"; Krysl §3.7 uses the exact map): the method keeps order `q` (`dexpinv_series`,
`AbstractMKRK.dexpinv_degree`, `MKRKRK4Truncated`). Explicit tableaux run stage by stage,
implicit ones solve for all stages with Newton (`runge_kutta`).

**The rigid body** (`MKRK`; the structure `AbstractLiePoissonBody`, state `(R, Π)`): Krysl's
incremental form (17), `Θ = Ψ` and `y = μ = exp(Ψ)Π`, the spatial momentum in `R₀`'s frame:

    Ψ' = dexp⁻¹_{−Ψ} 𝕀⁻¹Π,   μ' = exp(Ψ) T(t + τ, R₀ exp Ψ, Π),   Π = exp(−Ψ) μ,

from `Ψ(0) = 0`, `μ(0) = Π₀`; then `R₁ = R₀ exp Ψ₁`, `Π₁ = exp(−Ψ₁) μ₁`. Written out stage by
stage this is the printed algorithm, with two typographical slips corrected:

1. the stage momentum reads `Π_(k) = exp[−Ψ_(k)](Π_{n−1} + Δt Σ_j a_kj exp[Ψ_(j)] T_(j))`, not
   `T_(k)` inside the sum over `j` as printed (with `T_(k)` the trapezoidal tableau would weight
   `T_n` twice and `T_{n−1}` not at all: not BBTRAPWD);
2. the stray superscript `s` after the two momentum lines is the sums' upper limit, displaced.

With the tableau ½|1 the method is IMIDM; with the trapezoidal tableau it is BBTRAPWD. It
conserves spatial momentum in torque-free motion (`μ` stays `Π₀`).

**Unit quaternions** (`RKMK2`, `RKMK4`, `RKMK8`; the structure `AbstractAttitudeQuaternion`:
the rolling ball, reduced and unreduced, Suslov's problem): a `NamedTuple` state with a field
`q`, the attitude as a unit quaternion (w, x, y, z), body → space, with `q̇ = ½ q Ω♯`
(`Λ̇ = ΛΩ̂`); `angular_velocity(state) -> Ω (3,)`, the body angular velocity; and
`vector_field(t, state)`, of which every field but `q` is used. Those other fields (Ω, the
centre `x`, rail coordinates, …) are `y`, and `g₀ exp Θ` is `q₀ ⊗ exp Θ`.

What it keeps: `|q| = 1` by construction: `exp Θ = (cos φ, (sin φ/φ) Θ/2)`, `φ = |Θ|/2`, from
half-angle series exact to round-off for `|Θ| ≤ π`, and `|q₀ ⊗ p| = |q₀||p|`. Each step's
rounding moves `|q|` by a few units of round-off `u` of either sign, so `|q| − 1` random-walks,
`~u√n` after `n` steps. The rolling ball's `ẋ₃` is exactly zero, so `x₃ = r` to the bit.
Energy is not kept: its error is of the method's order and grows with time in passive motion
(not a structure-preserving method). A stage turning by more than π (`|Θᵢ| > π`, outside the
series' range; a step far too large for the method anyway) is reported as `step_bound_broken`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _linalg, results
from .._carry import tied
from ..lie import quaternion, so3
from ..models.rigid_body import RigidBodyState
from ..models.structures import AbstractAttitudeQuaternion, AbstractLiePoissonBody
from ..newton import Newton
from ..results import RESULTS
from .base import (
    AbstractImplicitIntegrator,
    AbstractIntegrator,
    AbstractTableauIntegrator,
    construct,
    explicit_info,
    tableau_method,
)
from .lie_group import torque_at
from .runge_kutta import implicit_rk_step, initial_slopes
from .tableau import DOPRI8, GAUSS4, GAUSS6, HEUN, IMPLICIT_MIDPOINT, RK4, ButcherTableau

__all__ = [
    "MKRK",
    "MKRK_CLASSES",
    "RKMK2",
    "RKMK4",
    "RKMK8",
    "RKMK_CLASSES",
    "AbstractMKRK",
    "AbstractQuaternionRKMK",
    "IncrementalForm",
    "MKRKGauss4",
    "MKRKGauss6",
    "MKRKMidpoint",
    "MKRKRK4",
    "MKRKRK4Truncated",
    "dexpinv_series",
    "mkrk_class",
]

# B_k / k! for k = 0..8 (Bernoulli numbers with B₁ = −½; the odd ones past B₁ vanish)
_BERNOULLI_OVER_FACTORIAL = (1.0, -1 / 2, 1 / 12, 0.0, -1 / 720, 0.0, 1 / 30240, 0.0, -1 / 1209600)


def dexpinv_series(w, v, degree: int):
    """`dexp⁻¹_w(v)` by its Bernoulli series `Σ_{k ≤ degree} B_k/k! ad_w^k v`, `ad_w = w×`
    (Munthe-Kaas 1999): `v − ½ w×v + (1/12) w×(w×v) − (1/720) (w×)⁴v + …`, the Taylor
    expansion of `so3.dexpinv_apply` in `w`. `w`, `v`: `(..., 3)`; `degree` from 0 to 8."""
    if not 0 <= degree < len(_BERNOULLI_OVER_FACTORIAL):
        raise ValueError(f"dexpinv_series: degree must be 0..{len(_BERNOULLI_OVER_FACTORIAL) - 1}")
    out, term = v, v
    for k in range(1, degree + 1):
        term = _linalg.cross(w, term)
        if _BERNOULLI_OVER_FACTORIAL[k] != 0.0:
            out = out + _BERNOULLI_OVER_FACTORIAL[k] * term
    return out


def _dexpinv(w, v, degree: int | None):
    """`dexp⁻¹_w(v)`: exact (`so3.dexpinv_apply`) for `degree=None`, else its series to
    `degree` (`dexpinv_series`)."""
    return so3.dexpinv_apply(w, v) if degree is None else dexpinv_series(w, v, degree)


class IncrementalForm(NamedTuple):
    """A model's equations (1) on one step, as its structure gives them: `rates(τ, Θ, y,
    dexpinv)`, `(Θ′, y′)` at `g₀ exp Θ` with `Θ′ = dexpinv(Ω)` (the method's `dexp⁻¹_{−Θ}`,
    applied by the form before `y′` is evaluated: the order of the operations the separate
    modules had, which XLA's fusion, and so the rounding, follows); the start `Θ = zero`,
    `y = y0`; `end(Θ, y)`, the model's state."""

    rates: Callable
    zero: jax.Array
    y0: Any
    end: Callable


def _increment_field(form: IncrementalForm, degree: int | None):
    """The right-hand side of (1), `(Θ′, y′) = F(τ, Θ, y)`, `dexp⁻¹` to `degree` (`_dexpinv`)."""

    def F(tau, theta, y):
        return form.rates(tau, theta, y, lambda omega: _dexpinv(-theta, omega, degree))

    return F


def _weighted_sum(h, weights, buffer):
    """`h Σⱼ wⱼ Bⱼ` over the leading (stage) axis of `buffer`."""
    w = jnp.reshape(weights, weights.shape + (1,) * (buffer.ndim - 1))
    return h * jnp.sum(w * buffer, axis=0)


def _explicit_step(form: IncrementalForm, degree: int | None, h, tableau: ButcherTableau):
    """One step of the explicit `tableau` on (1) (`dexp⁻¹` to `degree`), `y` a pytree:
    `(state₁, max |Θ|²)` over the stages and `Θ₁`."""
    F, dtype = _increment_field(form, degree), form.zero.dtype
    a, b, c = (jnp.asarray(x, dtype) for x in (tableau.a, tableau.b, tableau.c))
    zeros = lambda x: jnp.zeros((tableau.stages,) + jnp.shape(x), jnp.result_type(x))

    # The stages run in a loop, their increments kept in buffers. Unrolled, XLA:CPU fuses each
    # stage's increment into the later stages that read it, recomputing it there
    # (`optimization_barrier` does not survive to the fusion passes): slower to run and to
    # compile (bench/README.md, "Measurements behind the source's design choices").
    def stage(i, carry):
        k, l, theta_sq = carry
        theta = _weighted_sum(h, a[i], k)
        Y = jax.tree_util.tree_map(lambda y, B: y + _weighted_sum(h, a[i], B), form.y0, l)
        k_i, l_i = F(c[i] * h, theta, Y)
        k = k.at[i].set(k_i)
        l = jax.tree_util.tree_map(lambda B, x: B.at[i].set(x), l, l_i)
        return k, l, jnp.maximum(theta_sq, _linalg.dot(theta, theta))

    init = (zeros(form.zero), jax.tree_util.tree_map(zeros, form.y0), jnp.zeros((), dtype))
    init = tied(init, (form.y0, h))  # batched and differentiated as `y` from the start
    k, l, theta_sq = jax.lax.fori_loop(0, tableau.stages, stage, init)
    theta = _weighted_sum(h, b, k)
    y1 = jax.tree_util.tree_map(lambda y, B: y + _weighted_sum(h, b, B), form.y0, l)
    return form.end(theta, y1), jnp.maximum(theta_sq, _linalg.dot(theta, theta))


def _vector_form(form: IncrementalForm, degree: int | None):
    """(1) on one vector `Y = (Θ, y)` (`y` an array), for `runge_kutta`'s implicit engine:
    `(F(τ, Y), Y₀, end(Y₁))`."""
    n = form.zero.shape[-1]
    F = _increment_field(form, degree)
    G = lambda tau, Y: jnp.concatenate(F(tau, Y[:n], Y[n:]))
    return G, jnp.concatenate([form.zero, form.y0]), lambda Y: form.end(Y[:n], Y[n:])


# --- the rigid body: Krysl's MKRK ------------------------------------------------------------


class AbstractMKRK(AbstractTableauIntegrator):
    """Munthe-Kaas Runge–Kutta method with the class's Butcher `tableau` on the rigid body's
    incremental form (17) (the module's docstring).

    Order: the tableau's. Name: `MKRK` for the tableau ½|1 (IMIDM), else `MKRK-<tableau>`,
    with `-truncated` where `dexp⁻¹` is a truncated series. Not claimed symmetric (an RKMK
    method centred at the step's start point is not self-adjoint in general, whatever its
    tableau).

    `dexpinv_degree`: `None` for the exact `dexp⁻¹` (`so3.dexpinv_apply`), else the highest
    power of `Ψ` kept of its series (`dexpinv_series`); at least `order − 2`, which keeps the
    tableau's order (Munthe-Kaas 1999; `MKRKRK4Truncated`).
    """

    preserves: ClassVar[frozenset[str]] = frozenset({"pi", "RtR_error"})
    structures = (AbstractLiePoissonBody,)
    reference: ClassVar[str] = "Krysl (2007) §3.7, algorithm MKRK; Munthe-Kaas (1998)"
    dexpinv_degree: ClassVar[int | None] = None

    @classmethod
    def tableau_facts(cls, tableau):
        name = "MKRK" if tableau.name == IMPLICIT_MIDPOINT.name else f"MKRK-{tableau.name}"
        if cls.dexpinv_degree is not None:
            if cls.dexpinv_degree < tableau.order - 2:
                raise ValueError(
                    f"{cls.__name__}: dexpinv_degree {cls.dexpinv_degree} lowers the order of "
                    f"tableau {tableau.name}; an order-{tableau.order} method keeps the terms "
                    f"up to degree {tableau.order - 2} (Munthe-Kaas 1999)"
                )
            name += "-truncated"
        return {**super().tableau_facts(tableau), "name": name}

    @staticmethod
    def _form(model, state, t) -> IncrementalForm:
        """The incremental form (17): `Θ = Ψ`, `y = μ`, from `(0, Π₀)`."""
        R, Pi = state
        omega = model.angular_velocity_map()  # 𝕀⁻¹ once per step, not once per stage

        def rates(tau, psi, mu, dexpinv):
            Pi_tau = so3.rotate_exp(-psi, mu)
            dpsi = dexpinv(omega(Pi_tau))
            if model.has_torque:
                T = torque_at(model, t + tau, so3.compose_exp(R, psi), Pi_tau)
                dmu = so3.rotate_exp(psi, T)
            else:
                dmu = jnp.zeros_like(mu)
            return dpsi, dmu

        def end(psi, mu):
            return RigidBodyState(so3.compose_exp(R, psi), so3.rotate_exp(-psi, mu))

        return IncrementalForm(rates, jnp.zeros_like(Pi), Pi, end)


class AbstractExplicitMKRK(AbstractMKRK):
    """MKRK with an explicit tableau: stage by stage, no Newton settings."""

    def step(self, model, state, solver_state, t, dt):
        form = self._form(model, state, t)
        state1, _ = _explicit_step(form, self.dexpinv_degree, dt, self.tableau)
        return state1, solver_state, explicit_info(form.zero.dtype)


class AbstractImplicitMKRK(AbstractMKRK, AbstractImplicitIntegrator):
    """MKRK with an implicit tableau: all `6s` stage unknowns solved with `newton`, started
    from the previous step's stage derivatives extrapolated (the solver state, `(s, 6)`;
    `runge_kutta`)."""

    newton: Newton = eqx.field(default_factory=Newton)

    def init(self, model, state0, t0, dt):
        F, y0, _ = _vector_form(self._form(model, state0, t0), self.dexpinv_degree)
        return initial_slopes(F, y0, dt, self.tableau)

    def step(self, model, state, solver_state, t, dt):
        F, y0, end = _vector_form(self._form(model, state, t), self.dexpinv_degree)
        y1, slopes, info = implicit_rk_step(F, y0, dt, self.tableau, self.newton, solver_state)
        return end(y1), slopes, info


class MKRKMidpoint(AbstractImplicitMKRK):
    """MKRK with the tableau ½|1: IMIDM (Krysl §3.7), the registry's `MKRK`."""

    tableau = IMPLICIT_MIDPOINT


class MKRKGauss4(AbstractImplicitMKRK):
    """MKRK with the two-stage Gauss tableau: order 4."""

    tableau = GAUSS4


class MKRKGauss6(AbstractImplicitMKRK):
    """MKRK with the three-stage Gauss tableau: order 6, all 18 stage unknowns by Newton."""

    tableau = GAUSS6


class MKRKRK4(AbstractExplicitMKRK):
    """MKRK with the classical RK4 tableau: explicit, order 4 (Munthe-Kaas 1998)."""

    tableau = RK4


class MKRKRK4Truncated(AbstractExplicitMKRK):
    """MKRK with the RK4 tableau and `dexp⁻¹_{−Ψ}(v) ≈ v + ½ Ψ×v + (1/12) Ψ×(Ψ×v)`, its series
    truncated after degree `q − 2 = 2` (Munthe-Kaas 1999, "High order Runge–Kutta methods on
    manifolds"; Krysl §3.7 for the incremental form (17)): explicit, order 4.

    Why the order is kept: the degree-3 term vanishes (B₃ = 0), and the first dropped one,
    `−(1/720) (Ψ×)⁴ v`, is O(Δt⁴)·|v| at every stage, since `Ψ = O(Δt)` over the step; it
    enters `Ψ₁` through the Δt-weighted sum `Δt Σ b_i K_i`, so the local error it adds is
    O(Δt⁵), that of RK4 itself (Munthe-Kaas's argument is sharper: along the flow
    `Ψ(τ) = τ v(0) + O(τ²)`, so `Ψ×v = O(Δt²)` and every dropped term of degree ≥ q − 1 is
    O(Δt^q)). It differs from `MKRKRK4` only in `dexpinv_degree`."""

    tableau = RK4
    dexpinv_degree = 2


MKRK_CLASSES = (MKRKMidpoint, MKRKGauss4, MKRKGauss6, MKRKRK4, MKRKRK4Truncated)
# the call form `MKRK(tableau)` builds the exact-`dexp⁻¹` method of a table
_CLASS_OF_TABLEAU: dict[ButcherTableau, type] = {
    cls.tableau: cls for cls in MKRK_CLASSES if cls.dexpinv_degree is None
}


def mkrk_class(tableau: ButcherTableau) -> type[AbstractMKRK]:
    """The MKRK class of `tableau`: a named one (`MKRKGauss4` for `GAUSS4`), else one made
    once per table (explicit or implicit as the table is)."""
    return tableau_method(_CLASS_OF_TABLEAU, tableau, AbstractExplicitMKRK, AbstractImplicitMKRK)


def MKRK(tableau: ButcherTableau = IMPLICIT_MIDPOINT, newton: Newton | None = None):
    """The Munthe-Kaas RK method of `tableau` (default ½|1, i.e. IMIDM): an instance of
    `mkrk_class(tableau)`. `newton` applies to implicit tables; given for an explicit one it
    is a `TypeError`."""
    return construct(mkrk_class(tableau), newton)


# --- unit quaternions: the rolling ball's RKMK2/4/8 ------------------------------------------


class AbstractQuaternionRKMK(AbstractIntegrator):
    """RKMK on SO(3) × Rᵏ, the attitude a unit quaternion, with the class's explicit `tableau`
    (the module's docstring). Order: the tableau's (exact `dexp⁻¹`). Keeps `|q| = 1` (the
    invariant `quaternion_norm_error`) to round-off and the rolling ball's `x₃ = r`
    (`height_error`) exactly; not energy."""

    tableau: ClassVar[ButcherTableau]
    preserves: ClassVar[frozenset[str]] = frozenset({"quaternion_norm_error", "height_error"})
    structures = (AbstractAttitudeQuaternion,)
    reference: ClassVar[str] = "Munthe-Kaas (1998); Hairer, Lubich & Wanner, GNI §IV.8.2"

    @staticmethod
    def _form(model, state, t) -> IncrementalForm:
        """(1) with `g₀ exp Θ = q₀ ⊗ exp Θ`: `y` is the state without `q`."""
        q0 = state.q
        attitude = lambda theta, y: y._replace(q=quaternion.compose_exp(q0, theta))

        def rates(tau, theta, y, dexpinv):
            Y = attitude(theta, y)
            dtheta = dexpinv(model.angular_velocity(Y))
            return dtheta, model.vector_field(t + tau, Y)._replace(q=None)

        return IncrementalForm(rates, jnp.zeros_like(q0[..., :3]), state._replace(q=None), attitude)

    def step(self, model, state, solver_state, t, dt):
        form = self._form(model, state, t)
        state1, theta_sq = _explicit_step(form, None, dt, self.tableau)
        # the half-angle series of `quaternion.expm1` are exact for |Θ| ≤ π only
        within = theta_sq <= math.pi**2
        info = explicit_info(form.zero.dtype)
        info = info._replace(result=results.where(~within, RESULTS.step_bound_broken, info.result))
        return state1, solver_state, info


class RKMK2(AbstractQuaternionRKMK):
    """RKMK with Heun's tableau: explicit, order 2, two field evaluations per step."""

    name: ClassVar[str] = "RKMK2"
    order: ClassVar[int] = 2
    tableau: ClassVar[ButcherTableau] = HEUN


class RKMK4(AbstractQuaternionRKMK):
    """RKMK with the classical RK4 tableau: explicit, order 4, four evaluations per step."""

    name: ClassVar[str] = "RKMK4"
    order: ClassVar[int] = 4
    tableau: ClassVar[ButcherTableau] = RK4


class RKMK8(AbstractQuaternionRKMK):
    """RKMK with Prince & Dormand 8(7)'s 8th-order tableau (`DOPRI8`) at fixed step: explicit,
    order 8, 13 evaluations per step — for tight references."""

    name: ClassVar[str] = "RKMK8"
    order: ClassVar[int] = 8
    tableau: ClassVar[ButcherTableau] = DOPRI8


RKMK_CLASSES = (RKMK2, RKMK4, RKMK8)
"""The quaternion RKMK methods, for the registry."""
