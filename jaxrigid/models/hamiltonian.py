"""Canonical Hamiltonian systems `q̇ = ∂H/∂p`, `ṗ = −∂H/∂q` (Chaurasia 2012, ch. 2).

A system is a Hamiltonian function `H(q, p, params)` (static) and its parameters (a pytree of
arrays, sweepable with `simulate(..., model_axes=...)`); the derivatives come from autodiff.
The four test problems of the thesis's chapter 2 are defined here; their named presets
(initial values, step sizes) are in `jaxrigid.cases.hamiltonian`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .base import Check, event_ndims, finite
from .structures import AbstractCanonicalSystem


class CanonicalState(NamedTuple):
    """Positions `q (..., n)` and conjugate momenta `p (..., n)`."""

    q: jax.Array
    p: jax.Array


class HamiltonianSystem(AbstractCanonicalSystem):
    """`H(q, p, params) -> scalar` for one state `q (n,)`, `p (n,)`.

    **Fields:** `hamiltonian` (static callable); `params` (pytree of arrays); `extra_invariants`
    (static, optional: `(q, p, params) -> dict` of further conserved scalars, e.g. Kepler's
    angular momentum `L`).
    """

    state_type: ClassVar[type] = CanonicalState
    hamiltonian: Callable = eqx.field(static=True)
    params: Any = None
    extra_invariants: Callable | None = eqx.field(default=None, static=True)

    def energy(self, q, p):
        return self.hamiltonian(q, p, self.params)

    def grad_q(self, q, p):
        """`∂H/∂q (n,)`."""
        return jax.grad(self.hamiltonian, argnums=0)(q, p, self.params)

    def grad_p(self, q, p):
        """`∂H/∂p (n,)`."""
        return jax.grad(self.hamiltonian, argnums=1)(q, p, self.params)

    def vector_field(self, t, state: CanonicalState) -> CanonicalState:
        """`(q̇, ṗ) = (∂H/∂p, −∂H/∂q)`; autonomous (`t` unused). One `grad` for both: `H` is
        traced and transposed once, not once per partial derivative."""
        del t
        H_q, H_p = jax.grad(self.hamiltonian, argnums=(0, 1))(state.q, state.p, self.params)
        return CanonicalState(H_p, -H_q)

    def invariants(self, t, state: CanonicalState) -> dict[str, jax.Array]:
        """`H`, and the system's `extra_invariants` if any."""
        del t
        out = {"H": self.energy(state.q, state.p)}
        if self.extra_invariants is not None:
            out.update(self.extra_invariants(state.q, state.p, self.params))
        return out

    def state_event_ndims(self) -> CanonicalState:
        return event_ndims(CanonicalState, q=1, p=1)

    def check_state_shapes(self, state: CanonicalState) -> None:
        q, p = state
        if q.ndim < 1 or q.shape != p.shape:
            raise ValueError(
                f"canonical state needs q and p of equal shape (..., n), got {q.shape}, {p.shape}"
            )

    def state_checks(self, state: CanonicalState, t=None) -> list[Check]:
        return [Check(~(finite(state.q, 1) & finite(state.p, 1)), "q0 or p0 contains NaN or inf")]


# --- the test problems of Chaurasia (2012) ch. 2 -------------------------------------------


class OscillatorParams(NamedTuple):
    m: jax.Array
    k: jax.Array


def oscillator_hamiltonian(q, p, params: OscillatorParams):
    """§2.1: `H = p²/2m + k q²/2`."""
    return jnp.sum(p**2) / (2 * params.m) + params.k * jnp.sum(q**2) / 2


def pendulum_hamiltonian(q, p, params=None):
    """§2.2 (Hairer, Lubich & Wanner, GNI p. 314): `H = p²/2 − cos q (1 − p/6)`, not separable."""
    del params
    return jnp.sum(p**2 / 2 - jnp.cos(q) * (1 - p / 6))


def kepler_hamiltonian(q, p, params=None):
    """§2.3: `H = (p₁² + p₂²)/2 − 1/√(q₁² + q₂²)`."""
    del params
    return jnp.sum(p**2) / 2 - 1 / jnp.sqrt(jnp.sum(q**2))


def kepler_invariants(q, p, params=None):
    """Angular momentum `L = q₁p₂ − q₂p₁`, a quadratic invariant."""
    del params
    return {"L": q[0] * p[1] - q[1] * p[0]}


class GalacticParams(NamedTuple):
    a: jax.Array
    b: jax.Array
    c: jax.Array
    A: jax.Array
    C: jax.Array
    Omega: jax.Array


def galactic_hamiltonian(q, p, params: GalacticParams):
    """§2.4: `H = |p|²/2 + Ω(p₁q₂ − p₂q₁) + A log(C + q₁²/a² + q₂²/b² + q₃²/c²)`, a star in a
    rotating triaxial galaxy (GNI p. 322); `H` is the Jacobi integral of the rotating frame."""
    a, b, c, A, C, Omega = params
    rotation = Omega * (p[0] * q[1] - p[1] * q[0])
    return (
        jnp.sum(p**2) / 2
        + rotation
        + A * jnp.log(C + q[0] ** 2 / a**2 + q[1] ** 2 / b**2 + q[2] ** 2 / c**2)
    )


def harmonic_oscillator(m=1.0, k=4.0) -> HamiltonianSystem:
    return HamiltonianSystem(
        oscillator_hamiltonian, OscillatorParams(jnp.asarray(m), jnp.asarray(k))
    )


def pendulum() -> HamiltonianSystem:
    return HamiltonianSystem(pendulum_hamiltonian)


def kepler() -> HamiltonianSystem:
    return HamiltonianSystem(kepler_hamiltonian, extra_invariants=kepler_invariants)


def galactic_orbit(a=1.25, b=1.0, c=0.5, A=1.0, C=1.0, Omega=0.25) -> HamiltonianSystem:
    params = GalacticParams(*(jnp.asarray(x) for x in (a, b, c, A, C, Omega)))
    return HamiltonianSystem(galactic_hamiltonian, params)


def kepler_solution(t, e=0.6):
    """Exact Kepler orbit from the pericentre `q = (1 − e, 0)`, `p = (0, √((1+e)/(1−e)))`
    (semi-major axis 1, period 2π), by Kepler's equation `E − e sin E = t` solved with Newton
    in float64 (numpy). Returns `(q (..., 2), p (..., 2))`.

    Chaurasia (2012) §2.3 prints `q = (1 − e²)(cos t, sin t)/(1 + e cos t)`: the orbit with the
    true anomaly in place of time, which is not the solution at time `t` for `e ≠ 0`.
    """
    t = np.asarray(t, dtype=np.float64)
    E = t + e * np.sin(t)
    for _ in range(60):
        E = E - (E - e * np.sin(E) - t) / (1 - e * np.cos(E))
    d, w = 1 - e * np.cos(E), np.sqrt(1 - e * e)
    q = np.stack([np.cos(E) - e, w * np.sin(E)], axis=-1)
    p = np.stack([-np.sin(E) / d, w * np.cos(E) / d], axis=-1)
    return q, p
