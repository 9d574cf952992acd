"""Controls: prescribed rail coordinates `θ(t) (n,)` of the rolling ball's internal masses.

Mode 1 of the model note (`docs/rolling-ball-model.md`, "prescribed (kinematic)
actuation"): the masses' positions on their rails are given functions of time, and the ball's
equation (B.8) needs `θ, θ̇, θ̈`. `AbstractControl.derivatives` gets the two derivatives by
nested `jax.jvp`, so a control is written once, as `θ(t)`.

A control is an `equinox.Module` whose array fields are traced and differentiable: the
optimiser (`jaxrigid.control`) differentiates a cost through the integrator with respect to
them (e.g. `PiecewiseCubicControl.values`).
"""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..._checks import Check
from ..._jet import as_float, jet2

__all__ = [
    "AbstractControl",
    "ConstantControl",
    "LinearControl",
    "PiecewiseCubicControl",
    "SinusoidControl",
    "ZeroControl",
]


def _all_finite(x):
    """One flag per sweep member: every entry of the trailing axis of `x` is finite."""
    return jnp.all(jnp.isfinite(x), axis=-1)


class AbstractControl(eqx.Module):
    """Rail coordinates as functions of time: `__call__(t) -> θ (n,)`, one per mass.

    `size` is `n` (static); `checks()` lists value checks of the parameters (flags over any
    sweep axes in front), which the model includes in its `parameter_checks`;
    `theta_bounds()` bounds the `θ` it reaches at any time, or is `None` where it cannot.

    **Reach** (`theta_bounds`): `SinusoidControl` `offset ± |amplitude|`, `ConstantControl`
    and `ZeroControl` their values. `PiecewiseCubicControl` and a control without its own
    `theta_bounds` (e.g. `θ = θ₀ + ωt`) give `None`: their `θ(t)` grows without bound in `t`
    (the spline's end cubics continue past the knots) and the checks do not know the run's
    length; on a rail with ends (`SegmentRail`) keep such a control's `θ(t)` inside
    `rail.theta_range()` yourself.

    `holds_still` (a class fact): whether `θ(t)` is constant, so that the masses do no work
    on the ball (`ConstantControl`, `ZeroControl`); the ball then conserves its energy.
    """

    holds_still: ClassVar[bool] = False

    @abc.abstractmethod
    def __call__(self, t):
        """`θ(t)`, shape `(n,)`."""

    def derivatives(self, t):
        """`(θ, θ̇, θ̈)` at time `t`, each `(n,)`, by `jax.jvp` (twice)."""
        return jet2(self, t)

    @property
    def size(self) -> int:
        """`n`, the number of rail coordinates (static)."""
        return jax.eval_shape(self, 0.0).shape[-1]

    def checks(self) -> list[Check]:
        return []

    def theta_bounds(self):
        """`(lo, hi)`, each `(..., n)` (sweep axes in front, traced with the fields):
        `lo ≤ θ(t) ≤ hi` for every `t`; `None`: not bounded (the default)."""
        return None


class SinusoidControl(AbstractControl):
    """`θᵢ(t) = offsetᵢ + amplitudeᵢ sin(frequencyᵢ t + phaseᵢ)`.

    **Fields:** `offset`, `amplitude`, `frequency`, `phase`, each `(n,)`.
    """

    offset: jax.Array
    amplitude: jax.Array
    frequency: jax.Array
    phase: jax.Array

    def __check_init__(self):
        shapes = [
            jnp.shape(getattr(self, f)) for f in ("offset", "amplitude", "frequency", "phase")
        ]
        if any(len(s) < 1 or s[-1] != shapes[0][-1] for s in shapes):
            raise ValueError(
                "SinusoidControl needs offset, amplitude, frequency and phase of shape (..., n) "
                f"with one n, got {', '.join(map(str, shapes))}"
            )

    def __call__(self, t):
        return self.offset + self.amplitude * jnp.sin(self.frequency * t + self.phase)

    @property
    def size(self) -> int:
        return jnp.shape(self.offset)[-1]

    def checks(self):
        ok = (
            _all_finite(self.offset)
            & _all_finite(self.amplitude)
            & _all_finite(self.frequency)
            & _all_finite(self.phase)
        )
        return [Check(~ok, "SinusoidControl parameters contain NaN or inf")]

    def theta_bounds(self):
        """`offset ∓ |amplitude|` (both reached); at `frequency = 0`, the constant `θ(0)`."""
        fields = (self.offset, self.amplitude, self.frequency, self.phase)
        shape = jnp.broadcast_shapes(*(jnp.shape(x) for x in fields))
        offset, amplitude, frequency, phase = (jnp.broadcast_to(x, shape) for x in fields)
        half, still = jnp.abs(amplitude), offset + amplitude * jnp.sin(phase)
        moving = frequency != 0
        return jnp.where(moving, offset - half, still), jnp.where(moving, offset + half, still)


class ConstantControl(AbstractControl):
    """Masses held still: `θ(t) = values`. **Fields:** `values (n,)`."""

    holds_still: ClassVar[bool] = True

    values: jax.Array

    def __check_init__(self):
        if jnp.ndim(self.values) < 1:
            raise ValueError(
                f"ConstantControl needs values of shape (..., n), got {jnp.shape(self.values)}"
            )

    def __call__(self, t):
        return self.values + jnp.zeros_like(as_float(t))

    @property
    def size(self) -> int:
        return jnp.shape(self.values)[-1]

    def checks(self):
        return [Check(~_all_finite(self.values), "ConstantControl values contain NaN or inf")]

    def theta_bounds(self):
        return self.values, self.values


class LinearControl(AbstractControl):
    """`θᵢ(t) = startᵢ + rateᵢ t`: masses running round their rails at a steady rate.
    **Fields:** `start`, `rate`, each `(n,)`."""

    start: jax.Array
    rate: jax.Array

    def __call__(self, t):
        return self.start + self.rate * t

    @property
    def size(self) -> int:
        return jnp.shape(self.start)[-1]

    def checks(self):
        ok = _all_finite(self.start) & _all_finite(self.rate)
        return [Check(~ok, "LinearControl parameters contain NaN or inf")]


class ZeroControl(AbstractControl):
    """`θ(t) = 0` for `n` masses (static `n`; `n = 0` for a ball without masses)."""

    holds_still: ClassVar[bool] = True

    n: int = eqx.field(static=True)

    def __call__(self, t):
        t = as_float(t)
        return jnp.zeros((self.n,), t.dtype) * t

    @property
    def size(self) -> int:
        return self.n

    def theta_bounds(self):
        zero = jnp.zeros((self.n,), jnp.result_type(float))
        return zero, zero


def _natural_spline_weights(K: int) -> np.ndarray:
    """`W (K, K)` with `M = (6/Δt²) W y`: the second derivatives at the knots of the natural
    cubic spline through `y (K, ...)` at equally spaced knots (`M₀ = M_{K−1} = 0`; inside,
    `M_{k−1} + 4M_k + M_{k+1} = 6(y_{k+1} − 2y_k + y_{k−1})/Δt²`). Built once per `K`, in
    float64 numpy at trace time: the control stays linear in its values."""
    W = np.zeros((K, K))
    if K > 2:
        m = K - 2
        T = 4.0 * np.eye(m) + np.eye(m, k=1) + np.eye(m, k=-1)
        D2 = np.zeros((m, K))
        for j in range(m):
            D2[j, j : j + 3] = (1.0, -2.0, 1.0)
        W[1:-1] = np.linalg.solve(T, D2)
    return W


class PiecewiseCubicControl(AbstractControl):
    """The natural cubic spline through `values[k]` at the knots `t₀ + k Δt`, `k = 0..K−1`.

    C² in time (so `θ̈` is continuous, and the ball's `Ω̇` with it), linear in `values` (the
    parameters a trajectory optimiser moves). Beyond the last knots each end segment's cubic
    continues (smoothly; with zero curvature at the end knot).

    **Fields:** `t0 ()`, `dt ()` (> 0), `values (K, n)`, `K ≥ 2`.
    """

    t0: jax.Array
    dt: jax.Array
    values: jax.Array

    def __check_init__(self):
        shape = jnp.shape(self.values)
        if len(shape) < 2 or shape[-2] < 2:
            raise ValueError(
                f"PiecewiseCubicControl needs values of shape (..., K, n) with K ≥ 2, got {shape}"
            )

    @property
    def size(self) -> int:
        return jnp.shape(self.values)[-1]

    def knot_curvatures(self):
        """`θ̈` at the knots, `(K, n)`."""
        y = self.values
        W = jnp.asarray(_natural_spline_weights(y.shape[-2]), y.dtype)
        return (6.0 / self.dt**2) * (W @ y)

    def __call__(self, t):
        y = self.values
        K = y.shape[-2]
        M = self.knot_curvatures()
        s = (t - self.t0) / self.dt
        k = jnp.clip(jnp.floor(s), 0, K - 2).astype(jnp.int32)
        u = s - k
        v = 1.0 - u
        h2 = self.dt**2 / 6.0
        return v * y[k] + u * y[k + 1] + h2 * ((v**3 - v) * M[k] + (u**3 - u) * M[k + 1])

    def checks(self):
        return [
            Check(
                ~(jnp.isfinite(self.dt) & (self.dt > 0)),
                "PiecewiseCubicControl: dt must be positive and finite",
                self.dt,
            ),
            Check(~jnp.isfinite(self.t0), "PiecewiseCubicControl: t0 contains NaN or inf"),
            Check(
                ~jnp.all(jnp.isfinite(self.values), axis=(-2, -1)),
                "PiecewiseCubicControl values contain NaN or inf",
            ),
        ]
