"""The value checks see the slices that are integrated, for any `model_axes` (issue 32): with
`model_axes=1` they used to check the axis-0 slices, so a non-SPD member passed and a valid
sweep was refused; an axis a leaf does not have was an `IndexError`.

Three inertias of shape (3, 3), stacked on axis 1 into (3, 3, 3): the axis-0 slices are
other (non-symmetric) matrices, so checking the wrong slices cannot pass by coincidence.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.integrators import get_method
from jaxrigid.models.rigid_body import AxialPowerPotential

METHOD = get_method("fEM")  # explicit: the cheapest program that runs a swept model
GOOD = [[1.0, 2.0, 3.0], [1.5, 2.0, 2.5], [2.0, 3.0, 4.0]]
STATE = jr.RigidBodyState(jnp.eye(3), jnp.array([0.1, 1.0, 0.2]))


def inertias(diagonals, axis):
    return jnp.stack([jnp.diag(jnp.array(d)) for d in diagonals], axis=axis)


def run(model, axes, **kw):
    return jr.simulate(METHOD, model, STATE, 0.01, 5, model_axes=axes, **kw)


def test_the_integrated_slices_are_checked():
    on_0 = run(jr.RigidBody(inertias(GOOD, 0)), 0)
    on_1 = run(jr.RigidBody(inertias(GOOD, 1)), 1)  # was refused: axis-0 slices not symmetric
    np.testing.assert_array_equal(on_1.final_state.Pi, on_0.final_state.Pi)
    bad = [GOOD[0], [1.0, 2.0, -3.0], GOOD[2]]
    message = r"inertia must be positive definite \(got -3\) \[ensemble member 1; 1 of 3"
    for axis in (1, -2):
        with pytest.raises(ValueError, match=message):
            run(jr.RigidBody(inertias(bad, 1)), axis)
    with pytest.raises(Exception, match=message):  # traced: from the program
        jax.jit(lambda inertia: run(jr.RigidBody(inertia), 1).final_state.Pi)(inertias(bad, 1))
    # reported in the outcome instead: the integrated member 1 is the invalid one
    sol = run(jr.RigidBody(inertias(bad, 1)), 1, checks="outcome")
    assert sol.result.tolist() == [0, int(jr.RESULTS.invalid_input), 0]


def test_an_axis_a_leaf_does_not_have():
    """`model_axes=0` over a model with a scalar parameter (was an `IndexError`), an axis
    beyond a leaf's, and a non-integer axis: each names the leaf and its shape."""
    potential = AxialPowerPotential(jnp.asarray(0.1), jnp.asarray(0.0), jnp.asarray(0.0))
    swept = jr.RigidBody(inertias(GOOD, 0), potential=potential)
    with pytest.raises(ValueError, match=r"RigidBody.potential.coulomb has shape \(\), no axis 0"):
        run(swept, 0)
    with pytest.raises(ValueError, match=r"RigidBody.inertia has shape \(3, 3, 3\), no axis 3 "):
        run(jr.RigidBody(inertias(GOOD, 0)), 3)
    with pytest.raises(ValueError, match=r"RigidBody.inertia has shape \(3, 3, 3\), no axis 1.0"):
        run(jr.RigidBody(inertias(GOOD, 0)), 1.0)


def test_a_callers_vmap_index_is_named():
    """Under a caller's `vmap` (or two), a failed check names the mapped index, not only
    the quoted value (issue 32: the member could not be found)."""
    diagonals = GOOD + [[1.0, 2.0, -3.0], [3.0, 3.0, 3.0], GOOD[0]]

    def final(inertia):
        return jr.simulate(METHOD, jr.RigidBody(inertia), STATE, 0.01, 5).final_state.Pi

    stacked = inertias(diagonals, 0)
    message = r"positive definite \(got -3\) \[index 3 of the caller's vmap; 1 of 6 fail\]"
    with pytest.raises(Exception, match=message):
        jax.vmap(final)(stacked)
    message = r"positive definite \(got -3\) \[index \(1, 0\) of the caller's vmap; 1 of 6 fail\]"
    with pytest.raises(Exception, match=message):
        jax.vmap(jax.vmap(final))(stacked.reshape(2, 3, 3, 3))
