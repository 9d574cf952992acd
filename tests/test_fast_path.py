"""The default IMIDM's fast path (issue 17): `simulate` runs `IMIDM.fast_variant()` (two
chord updates, no loop, the rotation series for turns ≤ `FAST_MAX_ANGLE`) on every member and
redoes with the full settings the members of which a fast step failed.

What must hold: the answer is IMIDM's (to Newton's stopping tolerance where the fast form
was kept, bit for bit where a member was redone); a member neither form can step still
reports its failure; it works under `jit`, `vmap`, `grad` and in float32.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import problem

import jaxrigid as jr
from jaxrigid.integrators.lie_group import FAST_MAX_ANGLE
from jaxrigid.results import RESULTS

FAST, FULL = jr.IMIDM(), jr.IMIDM(fast_path=False)


def _ensemble(scales, dtype=jnp.float64):
    """The torque-free body with its momentum scaled per member (faster members turn more
    per step)."""
    model, s0 = problem("krysl-torque-free")
    scales = jnp.asarray(scales, dtype)
    Pi = s0.Pi.astype(dtype)[None, :] * scales[:, None]
    R = jnp.broadcast_to(s0.R.astype(dtype)[None], (len(scales), 3, 3))
    model = jax.tree_util.tree_map(lambda x: x.astype(dtype), model)
    return model, jr.RigidBodyState(R, Pi)


def _turn(model, state, dt):
    omega = jnp.linalg.solve(model.inertia, state.Pi.T).T
    return np.asarray(jnp.linalg.norm(omega, axis=-1)) * dt


def test_the_fast_form_is_what_the_docs_say():
    fast = FAST.fast_variant()
    assert (fast.newton.chord, fast.newton.max_steps, fast.newton.peel) == (True, 2, 2)
    assert fast.max_angle == FAST_MAX_ANGLE and not fast.fast_path
    assert fast.fast_variant() is None and FULL.fast_variant() is None
    assert jr.IMIDM(max_angle=0.05).fast_variant().max_angle == 0.05  # the tighter promise
    composed = jr.compose(FAST, "yoshida6")
    assert composed.fast_variant().integrators[0] == fast


def test_where_every_fast_step_succeeds_the_answer_is_imidms():
    """Δt = 0.01: every member turns by < 0.05 rad per step and two chord updates converge.
    The fast and full solves stop at the same tolerance (eps^¾ on the update; the error left
    is its square for full Newton and O(Δt) times it for the chord): the states agree to
    1e-13 after 400 steps (observed: bit for bit or 1 ulp)."""
    model, s0 = _ensemble([1.0, 2.0, 3.0, 4.0])
    assert _turn(model, s0, 0.01).max() < FAST_MAX_ANGLE
    a = jr.simulate(FAST, model, s0, 0.01, 400, save_every=100)
    b = jr.simulate(FULL, model, s0, 0.01, 400, save_every=100)
    assert bool(jnp.all(a.outcome.all_converged))
    assert int(jnp.max(a.outcome.max_iterations)) == 2  # the fast form was kept
    for x, y in zip(jax.tree_util.tree_leaves(a.states), jax.tree_util.tree_leaves(b.states)):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-13)


def _traces_of_the_run(fn):
    """How many times `simulate`'s run program was traced while `fn()` ran."""
    names = []

    def listen(event, duration, **kw):
        if event == "/jax/core/compile/jaxpr_trace_duration":
            names.append(kw.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        out = fn()
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return out, names.count("run")


def test_an_eager_call_builds_the_full_settings_only_when_a_member_needs_them():
    """Concrete inputs: the fast form's program runs first and the full settings' program is
    built (and run) only if a member had a failed fast step. The answer equals the one
    program of a caller's `jit` (which builds both) to round-off: the same arithmetic in two
    differently fused programs may round differently; bound 4 ulps of the largest
    coordinate, measured 0.008 ulps at Δt = 0.01 and 0 at Δt = 0.1)."""
    model, s0 = _ensemble([1.0, 2.0, 3.0])
    # step counts of no other test in this module: no program of theirs is reused
    for dt, n_steps, builds in ((0.01, 47, 1), (0.1, 53, 2)):
        assert (_turn(model, s0, dt).max() > FAST_MAX_ANGLE) == (builds == 2)
        eager, traced = _traces_of_the_run(lambda: jr.simulate(FAST, model, s0, dt, n_steps))
        assert traced == builds
        jitted = jax.jit(lambda s: jr.simulate(FAST, model, s, dt, n_steps, checks="outcome"))(s0)
        np.testing.assert_array_equal(eager.result, jitted.result)
        for x, y in zip(
            jax.tree_util.tree_leaves(eager.states), jax.tree_util.tree_leaves(jitted.states)
        ):
            ulp = np.finfo(np.float64).eps * float(jnp.max(jnp.abs(y)))
            np.testing.assert_allclose(x, y, rtol=0, atol=4 * ulp)


def test_members_that_turn_too_far_are_redone_with_the_full_settings():
    """Δt = 0.1: members 0–1 turn by < 0.25 rad per step, 2–3 by more, so their fast steps
    break the series' promise and they are redone: bit for bit the full run. A run with
    every member within the bound but the chord too slow (members 0–1 at Δt = 0.1 need a third
    update) is redone too: no failed fast step survives."""
    model, s0 = _ensemble([0.5, 1.0, 3.0, 4.0])
    turns = _turn(model, s0, 0.1)
    assert turns[1] < FAST_MAX_ANGLE < turns[2]
    a = jr.simulate(FAST, model, s0, 0.1, 100, save_every=25)
    b = jr.simulate(FULL, model, s0, 0.1, 100, save_every=25)
    assert bool(jnp.all(a.outcome.all_converged))
    for x, y in zip(jax.tree_util.tree_leaves(a.states), jax.tree_util.tree_leaves(b.states)):
        np.testing.assert_array_equal(x[2:], y[2:])
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-13)


def test_a_member_no_form_can_step_reports_its_failure():
    """A step turning by 6 rad: the fast form fails, the full Newton fails or leaves its
    branch; the member's outcome is the full method's failure, the others succeed."""
    model, s0 = _ensemble([1.0, 400.0])
    a = jr.simulate(FAST, model, s0, 0.05, 10)
    b = jr.simulate(FULL, model, s0, 0.05, 10)
    ok = np.asarray(a.outcome.all_converged)
    assert ok[0] and not ok[1]
    assert int(a.outcome.result[1]) == int(b.outcome.result[1]) != RESULTS.successful
    cause = RESULTS(int(b.outcome.result[1])).name
    with pytest.raises(jr.StepFailedError, match=rf"of ensemble member 1 failed: {cause}"):
        jr.simulate(FAST, model, s0, 0.05, 10, throw=True)


def test_under_jit_vmap_grad_and_float32():
    """The driver's `lax.cond` on the ensemble becomes a select under a caller's `vmap`: both
    runs happen and the answer is still per member. The gradient through the fast form is
    Newton's implicit one (its residual is IMIDM's), so it matches the full method's to the
    solve tolerance (relative 1e-9: the two solutions differ by ~1e-13 and the gradients by as
    much times the condition of the step map)."""
    model, s0 = _ensemble([1.0, 3.5])

    @functools.partial(jax.jit, static_argnums=1)
    def final_pi(scale, method_is_fast):
        m = jax.tree_util.tree_map(lambda x: x * scale, model)
        method = FAST if method_is_fast else FULL
        return jr.simulate(method, m, s0, 0.1, 40, save_every=40).final_state.Pi

    w = jnp.array([[1.0, -2.0, 3.0]])  # not |Π|², which the free body keeps (gradient 0)
    g_fast = jax.grad(lambda c: jnp.sum(final_pi(c, True) * w))(1.0)
    g_full = jax.grad(lambda c: jnp.sum(final_pi(c, False) * w))(1.0)
    assert abs(float(g_full)) > 0.1
    np.testing.assert_allclose(g_fast, g_full, rtol=1e-9)

    per_scale = jax.vmap(lambda c: final_pi(c, True))(jnp.array([1.0, 1.3]))
    for k, c in enumerate([1.0, 1.3]):
        np.testing.assert_allclose(per_scale[k], final_pi(c, False), rtol=0, atol=1e-12)

    model32, s32 = _ensemble([1.0, 4.0], jnp.float32)
    a = jr.simulate(FAST, model32, s32, 0.1, 50)
    b = jr.simulate(FULL, model32, s32, 0.1, 50)
    assert a.final_state.Pi.dtype == jnp.float32 and bool(jnp.all(a.outcome.all_converged))
    # float32: both solves stop at eps32^¾ ≈ 6.5e-6 on the update; after 50 steps the
    # states agree to a few times that
    np.testing.assert_allclose(a.final_state.Pi, b.final_state.Pi, rtol=0, atol=5e-5)
