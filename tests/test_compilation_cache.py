"""Programs that build once: the persistent compilation cache's settings, programs jaxrigid
builds that JAX can cache (no host callback), value checks reported in the outcome instead
of raised, and the fast path left out under a derivative."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid import compilation_cache
from jaxrigid.cases import get_case


def test_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("JAXRIGID_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compilation_cache.cache_dir() == tmp_path / "xdg" / "jaxrigid" / "xla"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compilation_cache.cache_dir() == tmp_path / "home" / ".cache" / "jaxrigid" / "xla"
    monkeypatch.setenv("JAXRIGID_CACHE_DIR", str(tmp_path / "mine"))
    assert compilation_cache.cache_dir() == tmp_path / "mine"


def test_the_variable_turns_the_cache_off_and_a_bad_directory_is_no_failure(monkeypatch, tmp_path):
    before = jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("JAXRIGID_NO_COMPILATION_CACHE", "1")
    assert jr.enable_compilation_cache(tmp_path / "off") is None
    assert not (tmp_path / "off").exists()
    assert jax.config.jax_compilation_cache_dir == before
    monkeypatch.delenv("JAXRIGID_NO_COMPILATION_CACHE")
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert jr.enable_compilation_cache(blocker / "sub") is None  # cannot be created
    assert jax.config.jax_compilation_cache_dir == before


_PROGRAMS = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    events = []
    jax.monitoring.register_event_listener(lambda event, **kw: events.append(event))
    import jaxrigid as jr
    assert jr.enable_compilation_cache(sys.argv[1]) is not None
    inertia = jnp.diag(jnp.array([0.9144, 1.098, 1.66]))
    model = jr.RigidBody(inertia)
    Pi = inertia @ jnp.array([0.45549, 0.82623, 0.03476])
    state0 = jr.RigidBodyState(jnp.broadcast_to(jnp.eye(3), (4, 3, 3)), jnp.stack([Pi] * 4))
    direct = jr.simulate(jr.IMIDM(), model, state0, 0.01, 20, save_every=10)
    mine = jax.jit(
        lambda s: jr.simulate(jr.IMIDM(), model, s, 0.01, 20, checks="outcome").final_state
    )(state0)
    # the optimiser with a progress callback (as `jaxrigid control` runs it)
    from jaxrigid.control.optimise import AugmentedLagrangian, optimise
    toy = lambda p: (jnp.sum((p - 1.0) ** 2), p[:1] + p[1:2])  # noqa: E731
    best = optimise(toy, jnp.zeros(3), AugmentedLagrangian(2, 3), callback=lambda *a: None)
    jax.block_until_ready((direct, mine, best))
    count = lambda name: sum(e == "/jax/compilation_cache/" + name for e in events)
    print(json.dumps({k: count(k) for k in ("compile_requests_use_cache", "cache_hits")}))
    """
)


def test_a_second_process_compiles_nothing(tmp_path):
    """`simulate`'s own programs (the value checks' and the run's, concrete inputs) and a
    caller's `jit` of `simulate(checks="outcome")` carry no host callback, nor do the
    optimiser's with a progress callback (called from the host), so a second process loads
    every one from the persistent cache: no XLA compile at all. (A program
    with a callback still asks the cache, and misses every time: JAX never stores it.)"""
    script = tmp_path / "programs.py"
    script.write_text(_PROGRAMS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXRIGID_")}
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "cache")],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["compile_requests_use_cache"] > 0 and first["cache_hits"] == 0, runs
    # every program the second process asks for is a hit: none was refused by the cache
    assert second["cache_hits"] == second["compile_requests_use_cache"], runs
    assert second["compile_requests_use_cache"] == first["compile_requests_use_cache"], runs


def _ensemble(n=4):
    case = get_case("krysl-torque-free")
    model, state0 = case.build(case.resolve())
    return model, case.perturb(state0, np.random.default_rng(3), 0.05, n)


def test_checks_in_the_outcome_mark_only_the_bad_member():
    """`checks="outcome"` under `jit`: the member with a NaN momentum is
    `RESULTS.invalid_input` from step 0 with NaN states; the others equal the run without
    it (the same ensemble with member 2 good) bit for bit; nothing is raised."""
    model, states = _ensemble()
    bad = states._replace(Pi=states.Pi.at[2, 1].set(jnp.nan))
    run = jax.jit(lambda s: jr.simulate(jr.IMIDM(), model, s, 0.01, 30, checks="outcome"))
    sol = run(bad)
    result = np.asarray(sol.outcome.result)
    assert result[2] == jr.RESULTS.invalid_input and np.all(np.delete(result, 2) == 0)
    assert np.asarray(sol.outcome.first_failure)[2] == 0
    assert np.all(np.asarray(sol.outcome_per_save.result)[2] == jr.RESULTS.invalid_input)
    assert np.isnan(np.asarray(sol.states.Pi[2])).all()
    assert np.isnan(np.asarray(sol.final_state.R[2])).all()
    # the same program on the ensemble with member 2 good: the others are computed alike
    good = states._replace(Pi=states.Pi.at[2].set(states.Pi[0]))
    ref = run(good)
    for a, b in zip(ref.states, sol.states):
        np.testing.assert_array_equal(
            np.delete(np.asarray(a), 2, 0), np.delete(np.asarray(b), 2, 0)
        )


def test_checks_in_the_outcome_for_a_shared_value_mark_every_member():
    """A bad value every member shares (dt = 0, traced) marks every member."""
    model, states = _ensemble()
    run = jax.jit(lambda dt: jr.simulate(jr.IMIDM(), model, states, dt, 10, checks="outcome"))
    sol = run(0.0)
    assert np.all(np.asarray(sol.outcome.result) == jr.RESULTS.invalid_input)
    assert np.isnan(np.asarray(sol.final_state.Pi)).all()


def test_checks_mode_is_validated():
    model, states = _ensemble()
    with pytest.raises(ValueError, match='checks must be "raise" or "outcome", got \'loud\''):
        jr.simulate(jr.IMIDM(), model, states, 0.01, 10, checks="loud")


def test_an_eager_gradient_checks_its_primal_values_at_once():
    """Under an eager `jax.grad` the checks see the primal values: a plain `ValueError`
    naming the member, before any program of the run is built."""
    model, states = _ensemble()
    bad = states.Pi.at[1, 0].set(jnp.inf)

    def loss(Pi):
        return jr.simulate(jr.IMIDM(), model, states._replace(Pi=Pi), 0.01, 5).final_state.Pi[0, 0]

    with pytest.raises(ValueError, match=r"ensemble member 1; 1 of 4 members fail"):
        jax.grad(loss)(bad)


def test_under_a_derivative_the_fast_path_is_not_built():
    """A derivative runs the method alone: the gradient with the fast path on equals, bit for
    bit, the one with it off (the fast path's chord iterates would round differently)."""
    model, states = _ensemble(3)

    def loss(Pi, method):
        sol = jr.simulate(method, model, states._replace(Pi=Pi), 0.05, 40, save_every=40)
        return jnp.sum(sol.final_state.Pi**2) + jnp.sum(sol.final_state.R[:, 0])

    fast = jax.grad(loss)(states.Pi, jr.IMIDM())
    plain = jax.grad(loss)(states.Pi, jr.IMIDM(fast_path=False))
    np.testing.assert_array_equal(np.asarray(fast), np.asarray(plain))


@pytest.mark.skipif(
    compilation_cache.disabled_by_environment(), reason="JAXRIGID_NO_COMPILATION_CACHE is set"
)
def test_the_suite_shares_one_cache_directory():
    """The test run's cache is on, in the directory the controller chose for all workers."""
    assert jax.config.jax_compilation_cache_dir
    assert Path(jax.config.jax_compilation_cache_dir) == compilation_cache.cache_dir()


def test_another_step_count_with_as_many_saves_builds_nothing():
    """A concrete call's program depends on the number of saved states, not on the steps
    between them (an input of the program): a second `n_steps` with as many saves compiles
    nothing and equals the run that a caller's `jit` builds for exactly that count."""
    model, states = _ensemble(3)
    compiles = []

    def listen(event, seconds, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(seconds)

    jr.simulate(jr.IMIDM(), model, states, 0.01, 40, save_every=20)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        sol = jr.simulate(jr.IMIDM(), model, states, 0.01, 60, save_every=30)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert compiles == []
    # the times with the new count of steps per save: t0 + k·dt·30, one rounding each
    np.testing.assert_allclose(np.asarray(sol.ts), [0.0, 0.3, 0.6], rtol=0, atol=1e-15)
    traced = jax.jit(
        lambda s: jr.simulate(jr.IMIDM(), model, s, 0.01, 60, save_every=30, checks="outcome")
    )(states)
    for a, b in zip(
        jax.tree_util.tree_leaves(sol.states), jax.tree_util.tree_leaves(traced.states)
    ):
        np.testing.assert_array_equal(a, b)
