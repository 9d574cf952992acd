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

The held kinds are data, not structure: which end body is held in translation and in rotation
are array fields (`translation_ends`, `rotation_ends`) beside the force, so c1-c1, c1-c2 and
c1-c3 models have one pytree structure and share one compiled program (and stack into one
`vmap`). Only `free` is static: it changes what the model claims to conserve (its momenta).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import is_concrete

__all__ = ["BOUNDARY_KINDS", "ChainBoundary"]

BOUNDARY_KINDS = ("c1-c1", "c1-c2", "c1-c3", "free")

# Each kind's mask values at body 0 and body N+1 (1 moves, 0 held): (translation, rotation).
_ENDS = {
    "c1-c1": ((0.0, 0.0), (0.0, 0.0)),
    "c1-c2": ((0.0, 1.0), (0.0, 1.0)),
    "c1-c3": ((0.0, 0.0), (0.0, 1.0)),
    "free": ((1.0, 1.0), (1.0, 1.0)),
}

# (translation, rotation) ends as moving flags -> kind, for reading `kind` back
_KIND_OF_ENDS = {(*(x > 0 for x in t), *(x > 0 for x in r)): k for k, (t, r) in _ENDS.items()}


class ChainBoundary(eqx.Module):
    """`ChainBoundary(kind="c1-c1", force=None)`: `kind` one of `BOUNDARY_KINDS`; `force (3,)`
    `F` on body `N+1` (c1-c2 only; zero by default, refused if nonzero for another kind when
    concrete). Leading batch axes of `force` are given to every array field.

    **Fields:** `force (..., 3)`; `translation_ends`, `rotation_ends (..., 2)`: the translation
    and rotation masks' values at body 0 and body N+1 (1 moves, 0 held; read as `> 0`), set by
    `kind`; `free` (static): no body held (the total momenta are conserved). `kind` is read
    back from them (`ValueError` when they are traced or the members' kinds differ).
    """

    force: jax.Array
    translation_ends: jax.Array
    rotation_ends: jax.Array
    free: bool = eqx.field(static=True)

    def __init__(self, kind: str = "c1-c1", force=None):
        if kind not in BOUNDARY_KINDS:
            raise ValueError(f"unknown chain boundary {kind!r}; one of {BOUNDARY_KINDS}")
        force = jnp.zeros(3) if force is None else jnp.asarray(force)
        if jnp.shape(force)[-1:] != (3,):
            shape = jnp.shape(force)
            raise ValueError(f"boundary force must have shape (..., 3), got {shape}")
        if kind != "c1-c2" and is_concrete(force) and bool(jnp.any(jnp.asarray(force) != 0)):
            raise ValueError(f"a force on the last body needs kind 'c1-c2', not {kind!r}")
        dtype = jnp.result_type(force)
        if not jnp.issubdtype(dtype, jnp.inexact):
            dtype = jnp.result_type(float)
        # one array type whatever the force was given as (a weakly typed force, e.g. stacked
        # from Python numbers, would be a program of its own): every kind's arrays alike
        self.force = jnp.asarray(force, dtype)
        batch = jnp.shape(force)[:-1]
        translation, rotation = _ENDS[kind]
        self.translation_ends = jnp.broadcast_to(jnp.asarray(translation, dtype), (*batch, 2))
        self.rotation_ends = jnp.broadcast_to(jnp.asarray(rotation, dtype), (*batch, 2))
        self.free = kind == "free"

    @property
    def kind(self) -> str:
        """The kind (`BOUNDARY_KINDS`) the arrays hold: `ValueError` when they are traced (a
        boundary passed into a `jit` or `vmap`), when members of a batch hold different kinds,
        or when the ends are no kind's."""
        if self.free:
            return "free"
        ends = (self.translation_ends, self.rotation_ends)
        if not is_concrete(ends):
            raise ValueError(
                "the chain boundary's kind is data (which end bodies are held): it can be read "
                "only from concrete arrays, not inside a jit, vmap or grad; read it outside"
            )
        t, r = (np.asarray(x) > 0 for x in ends)
        rows = {tuple(e) for e in np.concatenate([t, r], axis=-1).reshape(-1, 4).tolist()}
        unknown = "no kind's ends (moving: translation of body 0, N+1, rotation of body 0, N+1) "
        kinds = sorted(_KIND_OF_ENDS.get(e, unknown + str(e)) for e in rows)
        if len(kinds) != 1 or kinds[0] not in BOUNDARY_KINDS:
            listed = "; ".join(kinds)
            raise ValueError(f"the chain boundary holds no single kind: its members hold {listed}")
        return kinds[0]

    def known_kind(self) -> str | None:
        """`kind` where it can be read (concrete arrays, one kind), else `None`: for messages
        that must not fail under a trace."""
        try:
            return self.kind
        except ValueError:
            return None

    @property
    def keeps_momenta(self) -> bool:
        """Whether the chain's total momentum and angular momentum are conserved: for the
        free chain only (a held body or the force on the last one acts from outside)."""
        return self.free

    def conserved(self, constraint_errors: tuple[str, ...]) -> frozenset[str]:
        """What a chain's flow conserves (its model's `conserved_quantities`): the energy and
        the model's `constraint_errors`, and the total momenta (`momentum1..3`,
        `angular_momentum1..3`) where `keeps_momenta`."""
        kept = {"energy", *constraint_errors}
        if self.keeps_momenta:
            kept |= {f"{name}{i}" for name in ("momentum", "angular_momentum") for i in (1, 2, 3)}
        return frozenset(kept)

    def translation_mask(self, n_bodies: int, dtype=jnp.float64):
        """`(..., N+2)`: 1 for a body whose centre moves, 0 for a held one (the boundary's
        batch axes first)."""
        return _mask(n_bodies, self.translation_ends, dtype)

    def rotation_mask(self, n_bodies: int, dtype=jnp.float64):
        """`(..., N+2)`: 1 for a body free to rotate, 0 for a held one."""
        return _mask(n_bodies, self.rotation_ends, dtype)

    def external_potential(self, r):
        """`W_F = −F·r_{N+1}` (3.31), `r (N+2, 3)`: zero for every kind but c1-c2, whose force
        alone may be nonzero (a zero force gives ±0: adding it, or its gradient to the forces,
        changes no nonzero value)."""
        return -jnp.dot(jnp.asarray(self.force, r.dtype), r[-1])


def _mask(n: int, ends, dtype):
    """`(..., n)` ones with `ends (..., 2)` (read as `> 0`) at the first and last body."""
    if n < 2:
        raise ValueError(f"a chain has N + 2 ≥ 2 bodies, got {n}")
    moves = (jnp.asarray(ends) > 0).astype(dtype)
    m = jnp.ones((*jnp.shape(moves)[:-1], n), dtype)
    return m.at[..., 0].set(moves[..., 0]).at[..., -1].set(moves[..., 1])
