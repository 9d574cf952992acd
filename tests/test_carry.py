"""`_carry.tied`: a loop's initial carry that has every tangent and batch axis it will have
from the start (design notes 36 and 46), its values, derivatives and cotangents unchanged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid._carry import tied

R, PI, K, OK = jnp.eye(3), jnp.array([0.3, -0.2, 0.9]), jnp.int32(7), jnp.array(True)


def carry(pi):
    return tied((R, pi, K, OK), (jnp.float64(0.1),))


def test_tied_leaves_every_value_as_it_was():
    """The identity on values, under `jit` and `vmap`, a boolean leaf's included."""
    for f in (carry, jax.jit(carry)):
        out = f(PI)
        for a, b in zip(out, (R, PI, K, OK)):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    batched = jax.vmap(carry)(jnp.stack([PI, 2 * PI]))
    np.testing.assert_array_equal(batched[1], jnp.stack([PI, 2 * PI]))
    np.testing.assert_array_equal(batched[3], [True, True])


def test_a_tied_constant_has_a_tangent_computed_from_the_others():
    """Under `linearize` with respect to Π alone, R (a constant) leaves with a tangent computed
    from Π's — one of zeros, but not JAX's symbolic zero, which would make each loop's
    derivative rule transform its body once more when R gains its tangent after the first
    iteration (design note 36)."""
    _, f_lin = jax.linearize(lambda pi: carry(pi)[:2], PI)
    jaxpr = jax.make_jaxpr(f_lin)(PI).jaxpr
    dR = jaxpr.outvars[0]
    assert not isinstance(dR, jax.extend.core.Literal)
    assert any(dR in eqn.outvars for eqn in jaxpr.eqns)  # computed, not a constant zero
    np.testing.assert_array_equal(f_lin(PI)[0], np.zeros((3, 3)))


def test_a_tied_constant_is_batched_with_the_others():
    """Under `vmap` over Π alone, the constant leaves (R, the count, the `ok` flag) leave
    batched: `out_axes=None` for them is refused, as for any batched output — they would
    otherwise gain their batch axis in a loop's first iteration (design note 46)."""
    pis = jnp.stack([PI, 2 * PI])
    untied = lambda pi: (R, pi, K, OK)
    out = jax.vmap(untied, out_axes=(None, 0, None, None))(pis)  # unbatched without `tied`
    np.testing.assert_array_equal(out[3], True)
    for leaf in (0, 2, 3):
        axes = [0, 0, 0, 0]
        axes[leaf] = None
        # JAX's words differ between versions; both name out_axes and None
        with pytest.raises(ValueError, match=r"out_axes.*None"):
            jax.vmap(carry, out_axes=tuple(axes))(pis)


def test_a_tied_carry_sends_back_exactly_the_cotangents_it_was_given():
    """The transpose sends back exactly the cotangent of Π, an inf cotangent of R included
    (a zero multiple of the sum, in place of `select`, would make it NaN)."""
    _, pullback = jax.vjp(lambda pi: carry(pi)[:2], PI)
    (g,) = pullback((jnp.full((3, 3), jnp.inf), jnp.array([1.0, 2.0, 3.0])))
    np.testing.assert_array_equal(g, [1.0, 2.0, 3.0])


def test_an_inf_in_the_context_reaches_no_value():
    """The sum `Σ` of an inf and a −inf is NaN; `select` never takes it, so no leaf changes."""
    out = tied((PI, OK), (jnp.array([jnp.inf, -jnp.inf]),))
    np.testing.assert_array_equal(out[0], PI)
    assert bool(out[1])
