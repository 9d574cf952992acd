"""Independent float64 reference trajectories: scipy's DOP853 on the embedded equations.

The rigid body's `(R, Π)` is integrated as a plain 12-dimensional ODE `Ṙ = RΩ̂`,
`Π̇ = Π×Ω + T` (Krysl eq. 7) with an explicit eighth-order Runge–Kutta method at tight
tolerance: it shares no code path with the Lie-group integrators except the model's vector
field. Requires scipy (the `test` or `bench` extra).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..models.rigid_body import RigidBody, RigidBodyState


def rigid_body_reference(
    model: RigidBody, state0: RigidBodyState, t_eval, *, t0=0.0, rtol=1e-13, atol=1e-13
) -> RigidBodyState:
    """`RigidBodyState` with leading axis `len(t_eval)`, by DOP853 at `rtol`, `atol`."""
    from scipy.integrate import solve_ivp

    def f(t, y):
        state = RigidBodyState(y[:9].reshape(3, 3), y[9:])
        dR, dPi = model.vector_field(t, state)
        return jnp.concatenate([dR.reshape(-1), dPi])

    f_jit = jax.jit(f)
    y0 = np.concatenate(
        [np.asarray(state0.R, np.float64).reshape(-1), np.asarray(state0.Pi, np.float64)]
    )
    t_eval = np.atleast_1d(np.asarray(t_eval, np.float64))
    sol = solve_ivp(
        lambda t, y: np.asarray(f_jit(t, y)),
        (float(t0), float(t_eval[-1])),
        y0,
        method="DOP853",
        t_eval=t_eval,
        rtol=rtol,
        atol=atol,
    )
    if not sol.success:
        raise RuntimeError(f"reference integration failed: {sol.message}")
    Y = sol.y.T
    return RigidBodyState(jnp.asarray(Y[:, :9].reshape(-1, 3, 3)), jnp.asarray(Y[:, 9:]))
