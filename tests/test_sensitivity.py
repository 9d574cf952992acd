"""Sensitivities through a simulation: `jax.grad` and `jax.jacfwd` of a function of the final
state at t = 10 with respect to the initial momentum and the inertia tensor equal central
finite differences, for an explicit and an implicit method, on the slow top (whose torque is
itself an autodiff derivative of the potential, so this differentiates twice through it).

Tolerance 1e-6 relative (issue): central differences with step 1e-6 have truncation error
~1e-12·f''' and round-off ~1e-16/1e-6 = 1e-10 relative to f, both well below it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import problem

import jaxrigid as jr
from jaxrigid.lie import so3

T_END, DT = 10.0, 0.01


def _inertia(p):
    d, o = p[:3], p[3:]
    return jnp.array([[d[0], o[2], o[1]], [o[2], d[1], o[0]], [o[1], o[0], d[2]]])


def _objective(integrator, Pi0, inertia_params):
    """Attitude error at t = 10 against the initial attitude, plus the body momentum's
    second component: a smooth scalar of the whole final state."""
    model, s0 = problem("krysl-slow-top")
    model = jr.RigidBody(_inertia(inertia_params), model.potential)
    sol = jr.simulate(
        integrator, model, s0._replace(Pi=Pi0), DT, round(T_END / DT), save_every=round(T_END / DT)
    )
    err = so3.log(s0.R.T @ sol.final_state.R)
    return jnp.sum(err**2) + sol.final_state.Pi[1]


def _central_difference(f, x, h=1e-6):
    g = np.zeros(x.shape)
    for i in range(x.size):
        e = np.zeros(x.shape)
        e[i] = h
        g[i] = (float(f(x + e)) - float(f(x - e))) / (2 * h)
    return g


@pytest.mark.parametrize(
    "integrator",
    # IMIDM's Newton solve itself (no fast path: its gradient is tests/test_fast_path.py's)
    [jr.integrators.ForwardEulerMomentum(), jr.IMIDM(fast_path=False)],
    ids=["fEM-explicit", "IMIDM-implicit"],
)
def test_gradients_equal_finite_differences(integrator):
    _, s0 = problem("krysl-slow-top")
    Pi0 = s0.Pi + jnp.array([0.3, -0.2, 0.0])
    p0 = jnp.array([5.0, 5.0, 1.0, 0.1, -0.05, 0.02])
    f = jax.jit(lambda Pi, p: _objective(integrator, Pi, p))
    g_Pi, g_p = jax.grad(f, argnums=(0, 1))(Pi0, p0)
    fd_Pi = _central_difference(lambda x: f(x, p0), Pi0)
    fd_p = _central_difference(lambda x: f(Pi0, x), p0)
    for g, fd in ((g_Pi, fd_Pi), (g_p, fd_p)):
        assert np.max(np.abs(np.asarray(g) - fd)) <= 1e-6 * np.max(np.abs(fd)), (g, fd)
    # forward mode agrees with reverse mode to round-off
    j_Pi = jax.jacfwd(f, argnums=0)(Pi0, p0)
    np.testing.assert_allclose(j_Pi, g_Pi, rtol=1e-9, atol=1e-12)


@pytest.mark.slow  # 88 s on 2 CPU cores (issue 31: the default suite's time)
def test_reverse_mode_through_newton_uses_the_implicit_function_theorem():
    """lax.while_loop has no reverse-mode rule: a gradient exists only because the solve's VJP
    comes from the implicit function theorem. Its value does not depend on how many Newton
    iterations the forward pass took (1e-12: both solves converge to round-off)."""
    _, s0 = problem("krysl-slow-top")
    p0 = jnp.array([5.0, 5.0, 1.0, 0.0, 0.0, 0.0])
    # no fast path: each forward pass runs exactly these Newton settings
    loose = jr.IMIDM(newton=jr.Newton(max_steps=40, rtol=1e-14, atol=1e-14), fast_path=False)
    tight = jr.IMIDM(newton=jr.Newton(max_steps=3), fast_path=False)
    g1 = jax.grad(lambda Pi: _objective(loose, Pi, p0))(s0.Pi)
    g2 = jax.grad(lambda Pi: _objective(tight, Pi, p0))(s0.Pi)
    np.testing.assert_allclose(g1, g2, rtol=1e-10, atol=1e-12)
