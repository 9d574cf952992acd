"""The model contract (DESIGN.md "The contracts").

A model is an `equinox.Module` whose array fields are its parameters (traceable,
differentiable, sweepable with `simulate(..., model_axes=...)`). It names its state type and
the event shape of each state leaf: the trailing axes of one member, with the body axis first
among them for a model of several bodies (a state of N bodies is `(*ensemble, N, ...)`), so the
ensemble axes always stay in front. Its checks are written once, in `jax`, as `Check`s with one
flag per member: `simulate` applies them under `jit`, `grad`, `vmap` and sharding alike and
names the failing member (`jaxrigid._checks`). The driver contains no code about any
particular model.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import equinox as eqx
import jax.numpy as jnp

from .. import _linalg
from .._checks import Check, is_concrete
from ..lie import so3

__all__ = [
    "AbstractModel",
    "Check",
    "axis_index",
    "finite",
    "known_zero",
    "per_member",
    "rotation_checks",
    "spd3_checks",
]


class AbstractModel(eqx.Module):
    """Base of every model.

    Class facts: `state_type`; `time_dependent`, whether the dynamics depend on `t` (a
    canonical system's `grad_q` and `grad_p` then take it, `(q, p, t)`). Methods:
    `state_event_ndims()` (a state-shaped pytree of ints: the event rank of each leaf);
    `check_state_shapes(state)` (raise `ValueError` for wrong shapes: static, runs once before
    tracing); `parameter_checks()` and `state_checks(state, t=None)` (`Check`s on values, flags
    over leading axes). Which methods integrate a model is said by its structure
    (`models.structures`), which it subclasses.
    """

    state_type: ClassVar[type]
    time_dependent: ClassVar[bool] = False

    @abc.abstractmethod
    def state_event_ndims(self) -> Any:
        """The number of trailing (event) axes of each state leaf."""

    def check_state_shapes(self, state) -> None:
        """Raise `ValueError` unless `state`'s leaves have this model's event shapes."""

    def parameter_checks(self) -> list[Check]:
        """Checks of the parameters' values (flags over a sweep's leading axes)."""
        return []

    def state_checks(self, state, t=None) -> list[Check]:
        """Checks of a state's values (flags over the ensemble axes); `t`, the state's time
        where known (`simulate` passes `t0`), for a model whose constraints depend on it."""
        return []

    def conserved_quantities(self) -> frozenset[str] | None:
        """The names among `invariants` that this model's exact flow conserves; `None`: all
        of them. A constraint's or a normalisation's error (`RtR_error`) counts as conserved
        (the exact flow keeps it zero); an energy a driving changes, a momentum a torque
        changes, does not. Decided from the model's structure and, where it depends on them,
        concrete parameter values; a traced value counts as unknown, hence not conserved."""
        return None


S = TypeVar("S")


def event_ndims(state_type: Callable[..., S], **ndims: int | None) -> S:
    """`state_type(**ndims)`, what `state_event_ndims()` returns: a state whose leaves are event
    ranks, not the arrays its fields are typed as (so built here, where `state_type` is only a
    callable to the type checker)."""
    return state_type(**ndims)


# --- building blocks shared by the models' checks -------------------------------------------


def per_member(tree, n_model_axes: int, batch: tuple):
    """The leaves of `tree` (a model, or part of one, swept with `model_axes=0`: `n_model_axes`
    leading axes) broadcast to the ensemble's `batch` shape and flattened into one axis: one
    entry per member, for a `vmap` over a flat ensemble alongside the state."""
    import jax

    def flat(x):
        event = jnp.shape(x)[n_model_axes:]
        return jnp.broadcast_to(x, tuple(batch) + event).reshape((-1,) + event)

    return jax.tree_util.tree_map(flat, tree)


def known_zero(x) -> bool:
    """Whether `x` is concrete and zero everywhere (a traced `x` is not known to be)."""
    return is_concrete(x) and not bool(jnp.any(jnp.asarray(x) != 0))


def axis_index(v) -> int | None:
    """`k` when the concrete vector `v (3,)` lies along the coordinate axis `e_k` (0-based),
    else `None` (another direction, a batch of vectors, or a traced `v`)."""
    if not is_concrete(v) or jnp.shape(v) != (3,):
        return None
    nonzero = [k for k in range(3) if bool(jnp.asarray(v)[k] != 0)]
    return nonzero[0] if len(nonzero) == 1 else None


def finite(x, event_ndims: int):
    """One flag per member: every entry of the trailing `event_ndims` axes is finite."""
    axes = tuple(range(-event_ndims, 0)) if event_ndims else None
    return jnp.all(jnp.isfinite(x), axis=axes)


def rotation_checks(R, name: str) -> list[Check]:
    """`R (..., 3, 3)` is a rotation: finite, `‖RᵀR − 1‖ ≤ √eps`, `det R > 0`."""
    tol = float(jnp.finfo(R.dtype).eps) ** 0.5
    err = so3.orthogonality_error(R)
    return [
        Check(~finite(R, 2), f"{name} contains NaN or inf"),
        Check(err > tol, f"{name} is not orthonormal: ‖RᵀR − 1‖ > {tol:.2g}", err),
        Check(
            _linalg.det3(R) <= 0,
            f"{name} has a negative determinant (a reflection, not a rotation)",
        ),
    ]


def spd3_checks(inertia, name: str = "inertia", rigid: bool = True) -> list[Check]:
    """A body inertia `(..., 3, 3)`: finite, symmetric to 100 eps of its largest entry,
    positive definite, and (`rigid`) its principal moments obey the triangle inequality
    `𝕀ᵢ ≤ 𝕀ⱼ + 𝕀ₖ` (to 100 eps): every rigid body's do, since `𝕀ᵢ + 𝕀ⱼ − 𝕀ₖ = 2∫x_k² dm ≥ 0`."""
    eps = float(jnp.finfo(inertia.dtype).eps)
    scale = jnp.max(jnp.abs(inertia), axis=(-2, -1))
    asym = jnp.max(jnp.abs(inertia - jnp.swapaxes(inertia, -1, -2)), axis=(-2, -1))
    ok = finite(inertia, 2)
    safe = jnp.where(ok[..., None, None], inertia, jnp.eye(3, dtype=inertia.dtype))
    sym = 0.5 * (safe + jnp.swapaxes(safe, -1, -2))
    eig = _linalg.eigvalsh3(sym)  # quoted in the messages only (√eps-accurate near repeats)
    definite = _linalg.positive_definite3(sym)
    checks = [
        Check(~ok, f"{name} contains NaN or inf"),
        Check(asym > 100 * eps * scale, f"{name} must be symmetric (to 100 eps)", asym),
        Check(ok & ~definite, f"{name} must be positive definite", eig[..., 0]),
    ]
    if rigid:
        # 𝕀ᵢ + 𝕀ⱼ − 𝕀ₖ = 2 λ(J) for J = ½ tr(𝕀) 1 − 𝕀 = ∫ x xᵀ dm, so the inequality (to
        # 100 eps) is J + 50 eps·scale·1 positive definite: decided by Sylvester's criterion
        slack = eig[..., 0] + eig[..., 1] - eig[..., 2]
        trace = sym[..., 0, 0] + sym[..., 1, 1] + sym[..., 2, 2]
        J = (
            0.5 * trace[..., None, None] * jnp.broadcast_to(jnp.eye(3, dtype=sym.dtype), sym.shape)
            - sym
        )
        checks.append(
            Check(
                ok & definite & ~_linalg.positive_definite3(J, 50 * eps * scale),
                f"{name}'s principal moments break the triangle inequality 𝕀₃ ≤ 𝕀₁ + 𝕀₂: "
                "no rigid body has them (𝕀₁ + 𝕀₂ − 𝕀₃ = 2∫z² dm ≥ 0)",
                slack,
            )
        )
    return checks
