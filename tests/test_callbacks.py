"""`jaxrigid._callbacks.host_callback`: one host call under `vmap`, a program that does not grow
with the ensemble.

`jax.debug.callback` is unrolled into one call per mapped member; under `multi_start` over
K = 2000 starts that made the compile 292 s (issue 14). These tests fail with it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid import control
from jaxrigid._callbacks import host_callback
from jaxrigid._checks import Check, raise_in_graph

jax.config.update("jax_enable_x64", True)


def _recording(seen):
    def f(x):
        host_callback(lambda a, b: seen.append((np.asarray(a), np.asarray(b))), x, 7)
        return 2 * x

    return f


def test_one_call_under_nested_vmap_with_stacked_values():
    """`vmap(vmap(f))` over (2, 3): one call, both arguments (2, 3) with the members' values
    in place (the unmapped 7 broadcast)."""
    seen = []
    x = jnp.arange(6.0).reshape(2, 3)
    jax.block_until_ready(jax.jit(jax.vmap(jax.vmap(_recording(seen))))(x))
    jax.effects_barrier()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0][0], np.asarray(x))
    np.testing.assert_array_equal(seen[0][1], np.full((2, 3), 7))


def test_under_grad_checkpoint_and_loops():
    """Inside `grad` of a `checkpoint`ed function under `vmap`: called (once per evaluation of
    the primal, never with tangents) and the derivative is the function's own; in a
    `fori_loop` under `vmap` once per iteration."""
    seen = []
    f = _recording(seen)
    g = jax.jit(jax.vmap(jax.grad(jax.checkpoint(lambda x: f(x) ** 2))))
    np.testing.assert_array_equal(g(jnp.arange(4.0)), 8 * np.arange(4.0))
    jax.effects_barrier()
    assert seen and all(a.shape == (4,) for a, _ in seen)
    seen.clear()
    looped = jax.vmap(lambda x: jax.lax.fori_loop(0, 3, lambda i, x: f(x), x))
    jax.block_until_ready(looped(jnp.ones(2)))
    jax.effects_barrier()
    assert len(seen) == 3 and all(a.shape == (2,) for a, _ in seen)


def _program_size(fn, *args):
    return len(jax.jit(fn).lower(*args).as_text())


def test_checked_simulate_program_does_not_grow_with_the_ensemble():
    """`simulate` under the caller's `vmap` with traced (checked) initial conditions: the
    lowered program at 64 members is the size of the one at 16 (two-digit shapes: the
    same text up to 0.1 %); unrolled it grew by one callback per member."""
    model = jr.RigidBody(jnp.diag(jnp.array([1.0, 2.0, 3.0])))

    def run(pi0):
        return jr.simulate(jr.IMIDM(), model, jr.RigidBodyState(jnp.eye(3), pi0), 0.1, 5).states

    sizes = [_program_size(jax.vmap(run), jnp.ones((k, 3))) for k in (16, 64)]
    assert abs(sizes[1] - sizes[0]) <= 0.001 * sizes[0], sizes


@pytest.mark.slow  # 120 s; concrete inputs now put no callback in a program (issue 31)
def test_multi_start_program_does_not_grow_with_the_starts():
    """`control.multi_start`'s compiled function with a progress callback, on `reach-point`:
    the lowered program at 64 starts is the size of the one at 16 (to 0.1 %)."""
    optimise_module = __import__("jaxrigid.control.optimise", fromlist=["_multi"])
    problem = control.get_problem("reach-point", dt=0.25)
    settings = control.AugmentedLagrangian(n_outer=1, n_inner=1)
    sizes = []
    for k in (16, 64):
        p0s = control.initial_guesses(problem, k, seed=0)
        text = optimise_module._multi.lower(problem, p0s, settings, lambda *a: None).as_text()
        sizes.append(len(text))
    assert abs(sizes[1] - sizes[0]) <= 0.001 * sizes[0], sizes


def test_failing_check_under_vmap_names_the_problem():
    """A traced check failing for member 2 of 4 raises its message once, from one call."""

    def checked(x):
        raise_in_graph([Check(x < 0, "x must be non-negative", x)])
        return x

    with pytest.raises(Exception, match=r"x must be non-negative \(got -3\)"):
        jax.block_until_ready(jax.jit(jax.vmap(checked))(jnp.array([1.0, 2.0, -3.0, 4.0])))
        jax.effects_barrier()
