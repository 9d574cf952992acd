"""Boundary conditions of a chain of `N + 2` bodies (Chaurasia 2012, §3.2.4 and §3.3.7),
shared by its rotation-matrix and quaternion forms.

- `"c1-c1"`: both end bodies clamped: `r₀, R₀, r_{N+1}, R_{N+1}` fixed, their momenta zero.
- `"c1-c2"`: body 0 clamped; a constant force `F` on body `N+1`, which is free to move and
  rotate: the work `W_F = −F·r_{N+1}` (3.31) is added to the Hamiltonian.
- `"c1-c3"`: body 0 clamped; body `N+1`'s centre held at its prescribed displacement (the
  thesis's `r_{N+1}(t) = d`, `p_{N+1} = 0`: the chain starts with `r_{N+1}(0) = d`), free to
  rotate.
- `"free"`: no body held, no external force (total momentum and angular momentum conserved).

A held coordinate is held by masks: its momentum is zero and the force on it is multiplied by
0, so every integrator leaves it exactly where it started. The energy (including `W_F`) is
conserved in all four cases (the constraints do not depend on time).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .._checks import is_concrete

__all__ = ["BOUNDARY_KINDS", "ChainBoundary"]

BOUNDARY_KINDS = ("c1-c1", "c1-c2", "c1-c3", "free")


class ChainBoundary(eqx.Module):
    """`kind` (static): one of `BOUNDARY_KINDS`; `force (3,)`: `F` on body `N+1` (c1-c2 only;
    zero otherwise, refused if nonzero for another kind when concrete)."""

    kind: str = eqx.field(static=True, default="c1-c1")
    force: jax.Array = eqx.field(default_factory=lambda: jnp.zeros(3))

    def __check_init__(self):
        if self.kind not in BOUNDARY_KINDS:
            raise ValueError(f"unknown chain boundary {self.kind!r}; one of {BOUNDARY_KINDS}")
        if jnp.shape(self.force)[-1:] != (3,):
            shape = jnp.shape(self.force)
            raise ValueError(f"boundary force must have shape (..., 3), got {shape}")
        if (
            self.kind != "c1-c2"
            and is_concrete(self.force)
            and bool(jnp.any(jnp.asarray(self.force) != 0))
        ):
            raise ValueError(f"a force on the last body needs kind 'c1-c2', not {self.kind!r}")

    @property
    def keeps_momenta(self) -> bool:
        """Whether the chain's total momentum and angular momentum are conserved: for the
        free chain only (a held body or the force on the last one acts from outside)."""
        return self.kind == "free"

    def conserved(self, constraint_errors: tuple[str, ...]) -> frozenset[str]:
        """What a chain's flow conserves (its model's `conserved_quantities`): the energy and
        the model's `constraint_errors`, and the total momenta (`momentum1..3`,
        `angular_momentum1..3`) where `keeps_momenta`."""
        kept = {"energy", *constraint_errors}
        if self.keeps_momenta:
            kept |= {f"{name}{i}" for name in ("momentum", "angular_momentum") for i in (1, 2, 3)}
        return frozenset(kept)

    def translation_mask(self, n_bodies: int, dtype=jnp.float64):
        """`(N+2,)`: 1 for a body whose centre moves, 0 for a held one."""
        held_first = self.kind != "free"
        held_last = self.kind in ("c1-c1", "c1-c3")
        return _mask(n_bodies, held_first, held_last, dtype)

    def rotation_mask(self, n_bodies: int, dtype=jnp.float64):
        """`(N+2,)`: 1 for a body free to rotate, 0 for a held one."""
        return _mask(n_bodies, self.kind != "free", self.kind == "c1-c1", dtype)

    def external_potential(self, r):
        """`W_F = −F·r_{N+1}` (3.31) for c1-c2, else 0. `r (N+2, 3)`."""
        if self.kind != "c1-c2":
            return jnp.zeros((), r.dtype)
        return -jnp.dot(jnp.asarray(self.force, r.dtype), r[-1])


def _mask(n: int, held_first: bool, held_last: bool, dtype):
    if n < 2:
        raise ValueError(f"a chain has N + 2 ≥ 2 bodies, got {n}")
    m = jnp.ones((n,), dtype)
    if held_first:
        m = m.at[0].set(0)
    if held_last:
        m = m.at[-1].set(0)
    return m
