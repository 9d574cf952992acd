"""Types before values (issue 32): `simulate` refuses a boolean or a string where a number is
meant (`dt`, `t0`: `True` would be a step of 1), a state that is not the model's state type,
and a state whose arrays are not of one floating dtype — with a message naming the argument
or the leaves, eagerly and when the value is traced by `jit` or `vmap` (a dtype is known at
trace time). What is a number still runs: an integer `dt` is the float step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.cases import get_case


@pytest.fixture(scope="module")
def body():
    case = get_case("krysl-torque-free")
    return case.build(case.resolve())


def _run(body, dt=0.01, t0=0.0, state=None):
    model, state0 = body
    state = state0 if state is None else state
    return jr.simulate(jr.IMIDM(), model, state, dt, 2, t0=t0)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"dt": True}, r"^dt must be a real number, got a boolean \(True\)$"),
        ({"dt": np.bool_(True)}, r"^dt must be a real number, got a boolean \(True\)$"),
        ({"dt": "0.01"}, r"^dt must be a real number, got the string '0.01'$"),
        ({"dt": 0.01 + 0j}, r"^dt must be a real number, got dtype complex128$"),
        ({"t0": False}, r"^t0 must be a real number, got a boolean \(False\)$"),
        ({"t0": "0"}, r"^t0 must be a real number, got the string '0'$"),
        ({"dt": None}, r"^dt must be a real number, got None$"),
    ],
)
def test_a_time_that_is_not_a_number_is_refused(body, kwargs, message):
    with pytest.raises(TypeError, match=message):
        _run(body, **kwargs)


def test_a_traced_boolean_step_is_refused_under_jit_and_vmap(body):
    message = r"^dt must be a real number, got a boolean \(an array of them\)"
    with pytest.raises(TypeError, match=message):
        jax.jit(lambda d: _run(body, dt=d).final_state)(True)
    with pytest.raises(TypeError, match=message):
        jax.vmap(lambda d: _run(body, dt=d).final_state)(jnp.array([True, False]))


def test_states_of_the_wrong_type_or_dtypes_are_refused_naming_the_leaves(body):
    _, s = body
    with pytest.raises(TypeError, match=r"^state0 must be a RigidBodyState \(the state of "):
        _run(body, state=(s.R, s.Pi))
    mixed = jr.RigidBodyState(s.R, s.Pi.astype(jnp.float32))
    with pytest.raises(TypeError, match=r"share one floating dtype, got \.R float64, \.Pi float32"):
        _run(body, state=mixed)
    integer = jr.RigidBodyState(s.R, jnp.array([1, 2, 3]))
    with pytest.raises(TypeError, match=r"^state leaf \.Pi is int64: a state is floating point"):
        _run(body, state=integer)


def test_an_integer_or_boolean_model_parameter_is_refused_naming_it(body):
    """An inertia written with integers (or booleans) is refused before any check computes
    with it (a float check on it failed inside numpy's `finfo` before; found by
    `test_fuzz.py`); a weakly typed Python number is a float parameter."""
    _, s = body
    for inertia, dtype in ((jnp.diag(jnp.array([1, 2, 3])), "int64"), (jnp.eye(3) > 0, "bool")):
        message = rf"^model parameter RigidBody\.inertia is {dtype}, not a floating array: "
        with pytest.raises(TypeError, match=message):
            jr.simulate(jr.IMIDM(), jr.RigidBody(inertia), s, 0.01, 2)


def test_an_integer_step_is_the_float_step(body):
    """`dt = 1` (an int) and `dt = 1.0` run the same program on the same values: bit for bit."""
    a, b = _run(body, dt=1), _run(body, dt=1.0)
    for x, y in zip(jax.tree.leaves(a.final_state), jax.tree.leaves(b.final_state)):
        np.testing.assert_array_equal(x, y)


def test_a_torque_of_the_wrong_shape_is_named(body):
    """A user's torque function returning the wrong shape is named before tracing (it was
    "add got incompatible shapes for broadcasting: (3,), (2,)" from deep inside a step)."""
    model, state0 = body
    wrong = jr.RigidBody(model.inertia, torque=lambda t, R, Pi: Pi[:2])
    message = r"RigidBody's torque T\(t, R, Pi\) must return .* shape \(3,\) .*got \(2,\)"
    with pytest.raises(ValueError, match=message):
        jr.simulate(jr.IMIDM(), wrong, state0, 0.01, 2)
    with pytest.raises(ValueError, match=message):  # under vmap: one member's shape
        states = jax.tree.map(lambda x: jnp.stack([x, x]), state0)
        jax.vmap(lambda s: jr.simulate(jr.IMIDM(), wrong, s, 0.01, 2).final_state)(states)
    right = jr.RigidBody(model.inertia, torque=lambda t, R, Pi: 0.1 * Pi)
    assert np.isfinite(jr.simulate(jr.IMIDM(), right, state0, 0.01, 2).final_state.Pi).all()


def test_a_model_function_in_another_dtype_is_named(body):
    """A float32 state whose torque computes in float64 (a constant built without the
    state's dtype) is named at trace time, the field and both dtypes; it was the loop's
    "carry input and carry output must have equal types", naming no field of ours."""
    model, state0 = body
    f32 = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), (model, state0))
    ramp = jr.RigidBody(f32[0].inertia, torque=lambda t, R, Pi: jnp.array([0.0, 3.0, 0.0]) * t)
    message = (
        r"IMIDM's step returned R as float64\[3, 3\] for a state's float32\[3, 3\]: the "
        r"model's functions \(torque, potential, force, ...\) must compute in the state's dtype"
    )
    with pytest.raises(TypeError, match=message):
        jr.simulate(jr.IMIDM(), ramp, f32[1], 0.01, 2)
    with pytest.raises(TypeError, match=message):  # an ensemble: one member's shapes
        states = jax.tree.map(lambda x: jnp.stack([x, x]), f32[1])
        jr.simulate(jr.IMIDM(), ramp, states, 0.01, 2)
