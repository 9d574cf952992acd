"""Composable costs of a simulated rolling-ball trajectory (the model note,
"Optimal control" and "Where the model holds").

A cost term is an `equinox.Module` `term(trajectory, control) -> ()`; terms add and scale
(`2.0 * Effort() + Tracking(path)` is a `WeightedSum`). A term that can also serve as an
equality constraint `c = 0` of the augmented-Lagrangian optimiser has `residual(trajectory,
control) -> (k,)` (`FinalPosition`, `FinalAttitude`, `FinalRest`, `DiscObstacles`,
`ContactLimits`, `RailBarrier`); `DiscObstacles` also gives pointwise inequality
constraints `g ≤ 0` (`inequality`, one per saved time and disc) for the optimiser's
Powell–Hestenes–Rockafellar terms.

Time integrals over the trajectory use the trapezoid rule on the saved times (`trapezoid`);
the control effort uses the control's own quadrature, exact for its basis and independent of
the integrator's step. Penalties are smooth: the squared hinge `max(s, 0)²` (C¹, zero where the
condition holds, so a solution that satisfies it pays nothing) and a NaN-free distance.

`rollout` runs `simulate` and returns a `Trajectory` of the saved states, and, when a term
asks for it (`needs_contact`), the contact force `model.contact_force(t, state)` at each
saved time (the multiplier of the rolling constraint; `RollingBall.contact_force`, or
`RollingBallUnreduced.contact_force`). The same terms serve both modes of the note: prescribed
rail positions (`control` an `AbstractParametrisedControl`) and dynamic masses driven by
forces (`control` an `AbstractParametrisedActuation`, the trajectory then also holding the
masses' `θ`, `θ̇`); each term reads what it needs from the trajectory and the `control`
argument (the parametrised object, whichever mode).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ..simulation import simulate

__all__ = [
    "AbstractCost",
    "CirclePath",
    "ContactLimits",
    "DiscObstacles",
    "Effort",
    "FinalAttitude",
    "FinalPosition",
    "FinalRest",
    "GeronoPath",
    "RailBarrier",
    "Tracking",
    "Trajectory",
    "WeightedSum",
    "needs_contact",
    "rollout",
    "squared_hinge",
    "trapezoid",
]


class Trajectory(NamedTuple):
    """`ts (n_t,)`; `q (n_t, 4)`, `Omega (n_t, 3)`, `x (n_t, 3)` the saved states;
    `contact_force (n_t, 3)` (spatial, the model's `contact_force`) or `None`; `theta`,
    `theta_dot (n_t, n)`: the rail coordinates when they are part of the state (dynamic
    masses, `RollingBallUnreducedState`), else `None`."""

    ts: jax.Array
    q: jax.Array
    Omega: jax.Array
    x: jax.Array
    contact_force: Any = None
    theta: Any = None
    theta_dot: Any = None


def _observe(t, state):
    """What `simulate` keeps at each saved time: the state itself (ten numbers, plus `2n`
    with dynamic masses; the contact force, which needs the model, is formed from them
    afterwards)."""
    return state


def rollout(
    integrator,
    model,
    state0,
    dt,
    n_steps: int,
    *,
    save_every: int = 1,
    contact: bool = False,
    checkpoint: bool = True,
) -> Trajectory:
    """`simulate` the ball and keep the observables the costs use (`Trajectory`).

    `checkpoint=True` (default): the reverse pass stores O(√n_steps) states. `contact`: also
    `model.contact_force` at each saved time (autodiff along the flow, as the model computes
    it)."""
    sol = simulate(
        integrator,
        model,
        state0,
        dt,
        n_steps,
        save_every=save_every,
        save=_observe,
        checkpoint=checkpoint,
    )
    states = sol.states
    F = jax.vmap(model.contact_force)(sol.ts, states) if contact else None
    theta = getattr(states, "theta", None), getattr(states, "theta_dot", None)
    return Trajectory(sol.ts, states.q, states.Omega, states.x, F, *theta)


def trapezoid(values, ts):
    """`∫ values dt` by the trapezoid rule on the times `ts (n_t,)` (values `(n_t,)`)."""
    dt = ts[1:] - ts[:-1]
    return jnp.sum(0.5 * dt * (values[1:] + values[:-1]))


def squared_hinge(s):
    """`max(s, 0)²`: zero where `s ≤ 0`, C¹, NaN-free gradient."""
    return jnp.square(jnp.maximum(s, 0.0))


def _safe_norm(v, axis=-1):
    """`|v|` with a zero (not NaN) gradient at `v = 0` (the double-`where` trick)."""
    sq = jnp.sum(v * v, axis=axis)
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


class AbstractCost(eqx.Module):
    """A scalar cost `term(trajectory, control)`; terms compose with `+` and scalar `*`.

    `needs_contact` (class fact): the term reads `trajectory.contact_force`."""

    needs_contact: ClassVar[bool] = False

    def __call__(self, trajectory: Trajectory, control) -> jax.Array:
        raise NotImplementedError

    def __add__(self, other):
        return WeightedSum((self, other), (1.0, 1.0))

    def __mul__(self, weight):
        return WeightedSum((self,), (weight,))

    __rmul__ = __mul__


class WeightedSum(AbstractCost):
    """`Σₖ wₖ termₖ` (nested sums are flattened)."""

    terms: tuple
    weights: tuple

    def __init__(self, terms, weights):
        flat_terms, flat_weights = [], []
        for term, w in zip(terms, weights, strict=True):
            if not isinstance(term, AbstractCost):
                raise TypeError(f"cost terms must be AbstractCost, got {type(term).__name__}")
            if isinstance(term, WeightedSum):
                flat_terms += list(term.terms)
                flat_weights += [w * v for v in term.weights]
            else:
                flat_terms.append(term)
                flat_weights.append(w)
        self.terms = tuple(flat_terms)
        self.weights = tuple(flat_weights)

    def __call__(self, trajectory, control):
        return sum(w * term(trajectory, control) for term, w in zip(self.terms, self.weights))

    def parts(self, trajectory, control) -> dict[str, jax.Array]:
        """Each term's unweighted value, by class name (numbered when repeated)."""
        out = {}
        for term in self.terms:
            name = type(term).__name__
            key, k = name, 1
            while key in out:
                k += 1
                key = f"{name}{k}"
            out[key] = term(trajectory, control)
        return out


def needs_contact(*terms) -> bool:
    """Whether any of the terms (sums searched) reads the contact force."""
    for term in terms:
        if isinstance(term, WeightedSum):
            if needs_contact(*term.terms):
                return True
        elif getattr(term, "needs_contact", False):
            return True
    return False


class _ResidualCost(AbstractCost):
    """A term that is `|residual|²` and can serve as an equality constraint `residual = 0`."""

    def residual(self, trajectory, control) -> jax.Array:
        raise NotImplementedError

    def __call__(self, trajectory, control):
        r = self.residual(trajectory, control)
        return jnp.sum(r * r)


class FinalPosition(_ResidualCost):
    """`x(T)[:2] − target`: the contact point's miss at the final time (terminal cost
    `|x(T) − x*|²` of "Optimal control"). **Field:** `target (2,)`."""

    target: jax.Array

    def __check_init__(self):
        if jnp.shape(self.target) != (2,):
            raise ValueError(f"FinalPosition: target must have shape (2,), got {self.target}")

    def residual(self, trajectory, control):
        return trajectory.x[-1, :2] - self.target


class FinalAttitude(_ResidualCost):
    """`1 − (q(T)·q*)²` (`(1,)`): zero iff `q(T) = ±q*` (the sign-blind distance of unit
    quaternions). **Field:** `target (4,)`."""

    target: jax.Array

    def residual(self, trajectory, control):
        d = jnp.dot(trajectory.q[-1], self.target)
        return jnp.reshape(1.0 - d * d, (1,))


class FinalRest(_ResidualCost):
    """`Ω(T)` (`(3,)`): the ball at rest at the final time (then `ẋ = rΛΩ × Γ = 0`)."""

    def residual(self, trajectory, control):
        return trajectory.Omega[-1]


class Effort(AbstractCost):
    """The control's own `effort()`, by its exact quadrature: `∫₀ᵀ Σᵢ θ̈ᵢ² dt` for prescribed
    rail positions (`AbstractParametrisedControl.effort`), `∫₀ᵀ Σᵢ uᵢ² dt` for actuator forces
    on dynamic masses (`AbstractParametrisedActuation.effort`)."""

    def __call__(self, trajectory, control):
        return control.effort()


class CirclePath(eqx.Module):
    """`x*(t) = c + ρ(sin φ(t), −cos φ(t))`, `φ = 2πt/period` (counter-clockwise from the
    point `c − ρe₂`): with `c = (0, ρ)` it starts at the origin. **Fields:** `centre (2,)`,
    `radius ()`, `period ()`."""

    centre: jax.Array
    radius: jax.Array
    period: jax.Array

    def __call__(self, t):
        phi = 2.0 * jnp.pi * t / self.period
        return self.centre + self.radius * jnp.stack([jnp.sin(phi), -jnp.cos(phi)])


class GeronoPath(eqx.Module):
    """The lemniscate of Gerono through the origin: `x*(t) = (a sin φ, (b/2) sin 2φ)`,
    `φ = 2πt/period`: a figure eight crossing itself at the origin, lobes reaching `±a` along
    `e₁`, half-width `b/2`. **Fields:** `a ()`, `b ()`, `period ()`."""

    a: jax.Array
    b: jax.Array
    period: jax.Array

    def __call__(self, t):
        phi = 2.0 * jnp.pi * t / self.period
        return jnp.stack([self.a * jnp.sin(phi), 0.5 * self.b * jnp.sin(2.0 * phi)])


class Tracking(AbstractCost):
    """`∫₀ᵀ |x(t)[:2] − x*(t)|² dt` (trapezoid on the saved times), the tracking cost of
    "Optimal control". **Field:** `path`, a function `t -> (2,)` (e.g. `CirclePath`)."""

    path: Callable

    def errors(self, trajectory):
        """`|x(t)[:2] − x*(t)|` at the saved times, `(n_t,)`."""
        target = jax.vmap(self.path)(trajectory.ts)
        return _safe_norm(trajectory.x[:, :2] - target)

    def __call__(self, trajectory, control):
        target = jax.vmap(self.path)(trajectory.ts)
        d = trajectory.x[:, :2] - target
        return trapezoid(jnp.sum(d * d, axis=-1), trajectory.ts)


class DiscObstacles(_ResidualCost):
    """`∫₀ᵀ Σₖ max(ρₖ + margin − |x(t)[:2] − cₖ|, 0)² dt`: zero while the contact point
    stays `margin` outside every disc (centres `cₖ`, radii `ρₖ` on the plane). As an equality
    constraint the residual is this integral (`(1,)`, `≥ 0`; its gradient vanishes with it,
    so an augmented Lagrangian converges slowly on it); as inequality constraints
    (`inequality`, for `ControlProblem.inequalities`) `ρₖ + margin − |x(tⱼ)[:2] − cₖ| ≤ 0` at
    every saved time `tⱼ` and disc `k`, each with its own multiplier. **Fields:**
    `centres (k, 2)`, `radii (k,)`, `margin ()` (default 0)."""

    centres: jax.Array
    radii: jax.Array
    margin: jax.Array = eqx.field(default_factory=lambda: jnp.asarray(0.0))

    def clearance(self, trajectory):
        """`min over discs of |x(t)[:2] − cₖ| − ρₖ` at the saved times, `(n_t,)` (negative:
        inside a disc)."""
        d = _safe_norm(trajectory.x[:, None, :2] - self.centres[None])
        return jnp.min(d - self.radii[None], axis=-1)

    def inequality(self, trajectory, control):
        """`ρₖ + margin − |x(tⱼ)[:2] − cₖ|` (`(n_t·k,)`, time-major): `≤ 0` outside."""
        d = _safe_norm(trajectory.x[:, None, :2] - self.centres[None])
        return jnp.ravel(self.radii[None] + self.margin - d)

    def residual(self, trajectory, control):
        d = _safe_norm(trajectory.x[:, None, :2] - self.centres[None])
        depth = squared_hinge(self.radii[None] + self.margin - d)
        return jnp.reshape(trapezoid(jnp.sum(depth, axis=-1), trajectory.ts), (1,))

    def __call__(self, trajectory, control):
        return self.residual(trajectory, control)[0]


class RailBarrier(_ResidualCost):
    """`∫₀ᵀ Σᵢ max(θᵢ − upperᵢ, 0)² + max(lowerᵢ − θᵢ, 0)² dt`: keeps each mass within
    `[lowerᵢ, upperᵢ]` on its rail (e.g. away from a rail's end or a region of the shell).
    Prescribed `θ(t)`: integrated on the control's own quadrature nodes (independent of the
    integrator); dynamic masses (`θ` in the trajectory): trapezoid on the saved times.
    **Fields:** `lower (n,)`, `upper (n,)`."""

    lower: jax.Array
    upper: jax.Array

    def _outside(self, theta):
        return squared_hinge(theta - self.upper[None]) + squared_hinge(self.lower[None] - theta)

    def residual(self, trajectory, control):
        if trajectory.theta is not None:  # dynamic masses: θ is simulated, not given
            out = trapezoid(jnp.sum(self._outside(trajectory.theta), -1), trajectory.ts)
            return jnp.reshape(out, (1,))
        nodes, weights = control.quadrature()
        dtype = control.coefficients.dtype
        theta = jax.vmap(control)(jnp.asarray(nodes, dtype))
        out = jnp.sum(jnp.asarray(weights, dtype) * jnp.sum(self._outside(theta), -1))
        return jnp.reshape(out, (1,))

    def __call__(self, trajectory, control):
        return self.residual(trajectory, control)[0]


class ContactLimits(_ResidualCost):
    """`∫₀ᵀ max(N_min − N, 0)² + max(|F_t| − μN, 0)² dt` with `F` the contact force:
    the model holds while the normal force stays above `N_min` (> 0: no lift-off) and the
    friction it needs, `|F_t|/N`, stays below `μ` ("Where the model holds"). As a constraint
    the residual is this integral (`(1,)`). **Fields:** `friction_coefficient ()` (μ),
    `min_normal_force ()` (default 0)."""

    needs_contact: ClassVar[bool] = True
    friction_coefficient: jax.Array
    min_normal_force: jax.Array = eqx.field(default_factory=lambda: jnp.asarray(0.0))

    def residual(self, trajectory, control):
        F = trajectory.contact_force
        if F is None:
            raise ValueError("ContactLimits needs a trajectory with contact_force (rollout)")
        N = F[:, 2]
        Ft = _safe_norm(F[:, :2])
        mu = self.friction_coefficient
        pen = squared_hinge(self.min_normal_force - N) + squared_hinge(Ft - mu * N)
        return jnp.reshape(trapezoid(pen, trajectory.ts), (1,))

    def __call__(self, trajectory, control):
        return self.residual(trajectory, control)[0]
