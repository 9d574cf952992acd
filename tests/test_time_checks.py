"""The run's times are checked (issue 32, found by `tests/test_fuzz.py`): `t0 + k·dt` in the
state's dtype must be finite and advance. At t0 = 1.79e308 a step of 1e-3 left every saved
time equal to t0 and one of 1e307 made them inf, both reported as success.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.integrators import get_method

METHOD = get_method("fEM")
MODEL = jr.RigidBody(jnp.diag(jnp.array([1.0, 2.0, 2.5])))
STATE = jr.RigidBodyState(jnp.eye(3), jnp.array([0.1, 1.0, 0.2]))
FROZEN = r"dt is below t0's resolution in float64 \(t0 \+ dt == t0.*\(got 0.001\)"
OVERFLOW = r"t0 \+ n_steps·dt overflows: the run's last time is not finite \(got inf\)"


def run(dt, t0, n_steps=4, state=STATE, model=MODEL, **kw):
    return jr.simulate(METHOD, model, state, dt, n_steps, t0=t0, **kw)


def test_times_that_do_not_advance_or_overflow_are_refused():
    with pytest.raises(ValueError, match=FROZEN):
        run(1e-3, 1.79e308)
    with pytest.raises(ValueError, match=OVERFLOW):
        run(1e307, 1.79e308)
    with pytest.raises(ValueError, match=OVERFLOW):  # the count matters, not only the step
        run(1e306, 1.7e308, n_steps=100)
    run(1e306, 1.7e308, n_steps=4)  # 1.704e308: finite, and the times advance
    with pytest.raises(Exception, match=FROZEN):  # traced: from the program
        jax.jit(lambda t0: run(1e-3, t0).final_state.Pi)(1.79e308)
    sol = run(1e-3, 1.79e308, checks="outcome")
    assert int(sol.result) == jr.RESULTS.invalid_input and np.isnan(sol.final_state.Pi).all()


def test_in_the_states_dtype():
    """float32 times: at t0 = 1e6 the resolution is 0.0625, so dt = 0.01 would not advance;
    dt = 0.1 does (1e6 + 0.125)."""
    state = jax.tree.map(lambda x: x.astype(jnp.float32), STATE)
    model = jax.tree.map(lambda x: x.astype(jnp.float32), MODEL)
    with pytest.raises(ValueError, match=r"below t0's resolution in float32 .*\(got 0.01\)"):
        run(0.01, 1e6, state=state, model=model)
    sol = run(0.1, 1e6, state=state, model=model)
    assert (np.diff(np.asarray(sol.ts)) > 0).all()
