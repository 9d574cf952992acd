"""Failures visible under a derivative (issue 32): with the default settings a failed step
under `jax.grad` raises `StepFailedError` naming its cause (eagerly, under `jit` and under
`vmap`, naming the mapped index), where it used to leave a NaN gradient whose cause only the hidden
primal outcome knew; `throw=False` with `has_aux=True` returns the outcome beside the
gradient instead; programs built with `checks="outcome"` (the optimiser's) stay free of the
callback.

A step of 1e300 overflows the explicit Euler update of the free body (Π·Ω ~ 1e300): the
failure is `nonfinite` at step 0, deterministic on every platform.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.integrators import get_method

METHOD = get_method("fEM")
MODEL = jr.RigidBody(jnp.diag(jnp.array([1.0, 2.0, 3.0])))
PI0 = jnp.array([0.1, 1.0, 0.2])
CAUSE = r"step 0 \(t = 0\) failed: nonfinite.*raised under a derivative.*has_aux=True"


def solution(pi, dt, **kw):
    return jr.simulate(METHOD, MODEL, jr.RigidBodyState(jnp.eye(3), pi), dt, 5, **kw)


def loss(pi, dt=1e300, **kw):
    return solution(pi, dt, **kw).final_state.Pi.sum()


def test_a_failed_step_raises_under_grad():
    assert int(solution(PI0, 1e300).result) == jr.RESULTS.nonfinite  # not raised: visible
    with pytest.raises(jr.StepFailedError, match=CAUSE):
        jax.grad(loss)(PI0)
    with pytest.raises(Exception, match=CAUSE):  # from the program: a JaxRuntimeError
        jax.jit(jax.grad(loss))(PI0)
    under_vmap = r"step 0 \(t = 0\) failed: nonfinite \[index 1 of the caller's vmap; 1 of 3 fail\]"
    with pytest.raises(Exception, match=under_vmap):
        dts = jnp.array([0.01, 1e300, 0.01])
        jax.vmap(jax.grad(loss))(jnp.stack([PI0] * 3), dts)
    # a successful run's gradient is untouched (finite, equal with and without the check)
    g = jax.grad(loss)(PI0, 0.01)
    np.testing.assert_array_equal(g, jax.grad(lambda p: loss(p, 0.01, throw=False))(PI0))
    assert np.isfinite(g).all()


def test_the_outcome_beside_the_gradient():
    """The documented pattern: `throw=False`, the outcome as `has_aux`'s auxiliary output."""

    def with_outcome(pi):
        sol = solution(pi, 1e300, throw=False)
        return sol.final_state.Pi.sum(), sol.outcome

    g, outcome = jax.jit(jax.grad(with_outcome, has_aux=True))(PI0)
    assert int(outcome.result) == jr.RESULTS.nonfinite and int(outcome.first_failure) == 0
    assert np.isnan(g).all()


def test_checks_reported_in_the_outcome_add_no_callback():
    """`checks="outcome"` (programs jaxrigid builds and caches) does not raise: the outcome
    is how such a caller learns of the failure, and the program holds no host callback."""
    text = jax.jit(jax.grad(lambda p: loss(p, checks="outcome"))).lower(PI0).as_text()
    assert "callback" not in text
    assert "callback" in jax.jit(jax.grad(loss)).lower(PI0).as_text()
