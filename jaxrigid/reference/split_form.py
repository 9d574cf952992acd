"""The non-twisting director body's independent reference (Gebhardt & Romero 2020, §4.1): the
continuous split form (69)–(71) — the frame turning at `w⊥`, the material momenta `Π¹, Π²`
transported along `d3` up to the load — integrated by scipy's DOP853 (the `test` or `bench`
extra). It shares nothing with the energy–momentum scheme but the model's load."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..models.director import (
    DirectorRigidBody,
    DirectorState,
    convected_inertia,
    directors,
    material_momentum,
)


class SplitFormState(NamedTuple):
    """Directors `q (..., 9)` and the material momentum components `Pi_perp = (Π¹, Π²)`."""

    q: jax.Array
    Pi_perp: jax.Array


def split_form_angular_velocity(euler, state: SplitFormState):
    """`w = w⊥ = W¹d1 + W²d2` with `(W¹, W²) = J⊥⁻¹(Π¹, Π²)` (40) and `w∥ = 0` (71c)."""
    Jp = convected_inertia(euler)[:2, :2]
    det = Jp[0, 0] * Jp[1, 1] - Jp[0, 1] * Jp[1, 0]
    P1, P2 = state.Pi_perp[0], state.Pi_perp[1]
    W1 = (Jp[1, 1] * P1 - Jp[0, 1] * P2) / det
    W2 = (Jp[0, 0] * P2 - Jp[1, 0] * P1) / det
    d1, d2, _ = directors(state.q)
    return W1 * d1 + W2 * d2


def split_form_vector_field(model: DirectorRigidBody, t, state: SplitFormState):
    """The non-twisting body in split form (69)–(71): `π⊥ = Π¹d1 + Π²d2` is parallel-
    transported along `d3` (71a) up to the load, `∇π⊥ = m⊥`, i.e. `Π̇ᵅ = m⊥ · dᵅ`, while the
    frame turns at `w = w⊥` (`split_form_angular_velocity`); `ḋᵢ = w × dᵢ` then moves `d1`,
    `d2` along `d3` only: they are parallel-transported along the curve `d3(t)`."""
    w = split_form_angular_velocity(model.euler_inertia, state)
    dq = jnp.cross(w[None, :], state.q.reshape(3, 3)).reshape(9)
    if model.moment is None:
        dPi = jnp.zeros_like(state.Pi_perp)
    else:
        d1, d2, d3 = directors(state.q)
        m = model.moment(t, d1, d2, d3)
        dPi = jnp.stack([jnp.dot(m, d1), jnp.dot(m, d2)])
    return SplitFormState(dq, dPi)


def split_form_reference(
    model: DirectorRigidBody,
    state0: DirectorState,
    t_eval,
    *,
    breakpoints=(0.5, 1.0),
    rtol=1e-13,
    atol=1e-13,
):
    """`(DirectorState, Pi_perp)` at `t_eval (n,)` (from t = 0) of the non-twisting body, by
    scipy's DOP853 on the split form (69)–(71) at `rtol`, `atol`, restarted at the load's
    kinks `breakpoints` (those of (116)): an explicit method on other unknowns (11, no
    multipliers) that shares nothing with the energy–momentum scheme but the load."""
    from scipy.integrate import solve_ivp

    Pi0 = material_momentum(model.euler_inertia, state0)[:2]
    y = np.concatenate([np.asarray(state0.q, np.float64), np.asarray(Pi0, np.float64)])

    @jax.jit
    def f(t, y):
        dy = split_form_vector_field(model, t, SplitFormState(y[:9], y[9:]))
        return jnp.concatenate([dy.q, dy.Pi_perp])

    t_eval = np.atleast_1d(np.asarray(t_eval, np.float64))
    edges = [0.0] + [b for b in breakpoints if 0.0 < b < t_eval[-1]] + [float(t_eval[-1])]
    out = np.empty((len(t_eval), 11))
    for a, b in zip(edges[:-1], edges[1:]):
        inside = (t_eval >= a) & (t_eval <= b)
        sol = solve_ivp(
            lambda t, y: np.asarray(f(t, y)),
            (a, b),
            y,
            method="DOP853",
            t_eval=np.unique(np.concatenate([t_eval[inside], [b]])),
            rtol=rtol,
            atol=atol,
        )
        if not sol.success:
            raise RuntimeError(f"reference integration failed: {sol.message}")
        out[inside] = sol.y.T[: inside.sum()]
        y = sol.y[:, -1]
    Y = jnp.asarray(out)
    split = SplitFormState(Y[:, :9], Y[:, 9:])
    w = jax.vmap(split_form_angular_velocity, in_axes=(None, 0))(model.euler_inertia, split)
    v = jnp.cross(w[:, None, :], split.q.reshape(-1, 3, 3)).reshape(-1, 9)
    return DirectorState(split.q, v), split.Pi_perp
