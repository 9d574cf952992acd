"""A trajectory-optimisation problem: `ControlProblem` binds a model carrying a
parametrised object, the initial state, an integrator and step, a cost and constraints;
called on the coefficients it returns `(f, c, g)` (what `optimise` minimises). The two modes
of the model note:

- prescribed rail positions: a `RollingBall` (or a prescribed `RollingBallUnreduced`) whose
  `control` is an `AbstractParametrisedControl` `θ(t)`;
- dynamic masses: a `RollingBallUnreduced(..., control=None, actuation=u)` whose `actuation`
  is an `AbstractParametrisedActuation` `u(t)`, the masses' `θ`, `θ̇` in the state.

Which field holds the coefficients is the one the model declares as its input (`input_field`,
read by `parametrised_slot`).
The named problems are in `presets`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .._checks import is_integer, real_number
from ..lie.quaternion import to_matrix
from .costs import (
    AbstractCost,
    DiscObstacles,
    FinalPosition,
    Tracking,
    Trajectory,
    WeightedSum,
    needs_contact,
    rollout,
)
from .parametrisations import AbstractParametrisedActuation, AbstractParametrisedControl

__all__ = ["ControlProblem", "ParametrisedSlot", "parametrised_slot"]


class ParametrisedSlot(NamedTuple):
    """Where a model keeps the object the optimiser's coefficients parametrise: `mode`
    (`"prescribed"` or `"dynamic"`), `field` (the model's field holding it: `"control"` or
    `"actuation"`), `kind` (the class it must be); the model's `parameter_checks` include
    its values' checks, so `simulate` checks the coefficients."""

    mode: str
    field: str
    kind: type

    def get(self, model):
        """The parametrised object of `model` (also `eqx.tree_at`'s selector)."""
        return getattr(model, self.field)


def checked_step(dt) -> float:
    """`dt` as a float if it is a positive finite real number; `TypeError` for a boolean, a
    string or another non-number, `ValueError` for 0, a negative step, NaN or inf."""
    try:
        value = real_number("dt", dt)
    except ValueError as err:
        raise TypeError(str(err)) from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"dt must be a positive finite number, got {dt!r}")
    return value


_PRESCRIBED = ParametrisedSlot("prescribed", "control", AbstractParametrisedControl)
_DYNAMIC = ParametrisedSlot("dynamic", "actuation", AbstractParametrisedActuation)


def parametrised_slot(model) -> ParametrisedSlot:
    """The model's slot, from the field it declares as its input (`input_field`): the
    `actuation` of a ball with dynamic masses, the `control` of one with prescribed masses.
    `TypeError` for a model that declares none."""
    field = getattr(model, "input_field", None)  # declared by the models that take an input
    for slot in (_PRESCRIBED, _DYNAMIC):
        if field == slot.field:
            return slot
    raise TypeError(
        f"ControlProblem: a {type(model).__name__} has no input to optimise (no `input_field` "
        f"naming its 'control' or 'actuation'); a control problem needs a rolling ball"
    )


class ControlProblem(eqx.Module):
    """`min cost(p)` subject to `c(p) = 0` and `g(p) ≤ 0`: `c` the `constraints'` residuals
    concatenated, `g` the `inequalities'` pointwise values (e.g. `DiscObstacles.inequality`,
    one per saved time and disc).

    **Fields:** `model` (a `RollingBall` whose `control` is an `AbstractParametrisedControl`,
    or a dynamic-mass `RollingBallUnreduced` whose `actuation` is an
    `AbstractParametrisedActuation` (`parametrised_slot`); its coefficients are replaced by
    `p`); `state0`; `integrator`; `cost` (an `AbstractCost`); `constraints` (a tuple of
    terms with `residual`); `inequalities` (a tuple of terms with `inequality`, default
    none); static: `name`, `dt`, `n_steps`, `save_every`, `tolerance` (the constraint
    tolerance that counts as solved, on `|c|`), `description`.

    The cost terms get the parametrised object as their `control` argument (`Effort` is its
    `effort()`: `∫Σθ̈²` or `∫Σu²`)."""

    model: Any
    state0: Any
    integrator: Any
    cost: AbstractCost
    constraints: tuple
    name: str = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    n_steps: int = eqx.field(static=True)
    save_every: int = eqx.field(static=True, default=1)
    tolerance: float = eqx.field(static=True, default=1e-3)
    description: str = eqx.field(static=True, default="")
    inequalities: tuple = ()

    def __check_init__(self):
        slot = self.slot
        if not isinstance(slot.get(self.model), slot.kind):
            raise TypeError(
                f"ControlProblem ({slot.mode} mode): the model's {slot.field} must be an "
                f"{slot.kind.__name__}, got {type(slot.get(self.model)).__name__}"
            )
        checked_step(self.dt)
        for name in ("n_steps", "save_every"):
            n = getattr(self, name)
            if not is_integer(n):
                raise TypeError(f"ControlProblem: {name} must be an integer, got {n!r}")
            if n < 1:
                raise ValueError(f"ControlProblem: {name} must be ≥ 1, got {n}")
        if not real_number("tolerance", self.tolerance) >= 0:  # NaN too
            raise ValueError(f"ControlProblem: tolerance must be ≥ 0, got {self.tolerance!r}")

    @property
    def slot(self) -> ParametrisedSlot:
        return parametrised_slot(self.model)

    @property
    def mode(self) -> str:
        """`"prescribed"` (rail positions `θ(t)`) or `"dynamic"` (forces `u(t)`)."""
        return self.slot.mode

    @property
    def control(self) -> AbstractParametrisedControl | AbstractParametrisedActuation:
        """The parametrised object: the model's control `θ(t)` or its actuation `u(t)`."""
        return self.slot.get(self.model)

    @property
    def coefficient_shape(self) -> tuple[int, ...]:
        return tuple(jnp.shape(self.control.coefficients))

    @property
    def t_end(self) -> float:
        return self.dt * self.n_steps

    def initial_coefficients(self):
        """The problem's own guess: the parametrised object's coefficients (zero: masses at
        rest)."""
        return self.control.coefficients

    def with_coefficients(self, p):
        """The model driven by the control (or actuation) with coefficients `p` (shape
        checked)."""
        return eqx.tree_at(self.slot.get, self.model, self.control.with_coefficients(p))

    def trajectory(self, p, *, integrator=None, refine: int = 1, contact=None) -> Trajectory:
        """Simulate with coefficients `p`; `integrator` and a step `dt/refine` (saved at the
        problem's times) to re-simulate with another method or a finer step."""
        integrator = self.integrator if integrator is None else integrator
        if contact is None:
            contact = needs_contact(self.cost, *self.constraints, *self.inequalities)
        model = self.with_coefficients(p)
        return rollout(
            integrator,
            model,
            self.state0,
            self.dt / refine,
            self.n_steps * refine,
            save_every=self.save_every * refine,
            contact=contact,
        )

    def evaluate(self, trajectory: Trajectory, p):
        """`(f, c, g)` on a computed trajectory (`c`, `g` empty `(0,)` when there are none)."""
        control = self.control.with_coefficients(p)
        f = self.cost(trajectory, control)
        empty = jnp.zeros((0,), f.dtype)
        c = [k.residual(trajectory, control) for k in self.constraints]
        g = [k.inequality(trajectory, control) for k in self.inequalities]
        return f, jnp.concatenate([empty, *c]), jnp.concatenate([empty, *g])

    def __call__(self, p):
        """`(f (), c (k,), g (m,))` at coefficients `p`, through `simulate` (checkpointed)."""
        return self.evaluate(self.trajectory(p), p)

    def _terms(self):
        cost = self.cost.terms if isinstance(self.cost, WeightedSum) else (self.cost,)
        return cost + tuple(self.constraints) + tuple(self.inequalities)

    def target_path(self):
        """The tracked path `t -> (2,)` (a `Tracking` term's), or None."""
        return next((k.path for k in self._terms() if isinstance(k, Tracking)), None)

    def target_point(self):
        """The final-position target `(2,)` (a `FinalPosition` term's), or None."""
        return next((k.target for k in self._terms() if isinstance(k, FinalPosition)), None)

    def miss(self, trajectory: Trajectory):
        """What "solved" is measured by: the distance `|x(T)[:2] − x*|` to the target point,
        or, for a tracking problem, the largest tracking error `max |x(tⱼ)[:2] − x*(tⱼ)|` over
        the saved times."""
        path = self.target_path()
        if path is not None:
            target = jax.vmap(path)(trajectory.ts)
            return jnp.max(jnp.linalg.norm(trajectory.x[:, :2] - target, axis=-1))
        return jnp.linalg.norm(trajectory.x[-1, :2] - self.target_point())

    def obstacle_clearance(self, trajectory: Trajectory):
        """`(at_saves, guaranteed)` for the `DiscObstacles` terms (None without): the least
        `|x(tⱼ)[:2] − cₖ| − ρₖ` over saved times and discs, and that minus `v_max·Δt/2`, a
        lower bound of the clearance of the continuous path between the saved times (up to
        the integrator's error and to `v_max` being sampled at the saved times): the contact
        point's speed is `|ẋ| = r|(ω₁, −ω₀)|` (`ω = ΛΩ`, (B.8)'s rolling constraint), `Δt` the
        save interval, and a point between two saves is within `v_max·Δt/2` of one of them."""
        discs = [k for k in self._terms() if isinstance(k, DiscObstacles)]
        if not discs:
            return None
        at_saves = jnp.min(jnp.stack([jnp.min(k.clearance(trajectory)) for k in discs]))
        omega = jnp.einsum("tij,tj->ti", jax.vmap(to_matrix)(trajectory.q), trajectory.Omega)
        v_max = self.model.radius * jnp.max(jnp.linalg.norm(omega[:, :2], axis=-1))
        step = jnp.max(jnp.diff(trajectory.ts))
        return at_saves, at_saves - 0.5 * v_max * step

    def with_integrator(self, integrator, refine: int = 1) -> ControlProblem:
        """The same problem discretised by `integrator` at step `dt/refine` (saved at the
        same times)."""
        return dataclasses.replace(
            self,
            integrator=integrator,
            dt=self.dt / refine,
            n_steps=self.n_steps * refine,
            save_every=self.save_every * refine,
        )
