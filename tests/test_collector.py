"""Python's collector while jaxrigid builds (`jaxrigid._collector`): `simulate`, a program
built through `program_store.call` and the command build with the thresholds relaxed, and the
caller's own thresholds are back afterwards — also after an error, and after nested blocks.
The suite itself runs relaxed (conftest.py), so each test starts from CPython's defaults."""

from __future__ import annotations

import gc

import jax
import jax.numpy as jnp
import pytest

import jaxrigid
from jaxrigid import _collector, program_store
from jaxrigid.cli import _main
from jaxrigid.models.rigid_body import RigidBody, RigidBodyState

CPYTHON = (700, 10, 10)  # CPython's defaults: what a user's process has


@pytest.fixture
def default_thresholds():
    suite = gc.get_threshold()
    gc.set_threshold(*CPYTHON)
    yield
    gc.set_threshold(*suite)


def _relaxed(thresholds) -> bool:
    return all(a >= b for a, b in zip(thresholds, _collector.BUILD_THRESHOLDS))


def test_the_block_relaxes_and_restores_also_on_error_and_nested(default_thresholds):
    with _collector.relaxed_collection():
        assert _relaxed(gc.get_threshold())
        with _collector.relaxed_collection():
            assert _relaxed(gc.get_threshold())
        assert _relaxed(gc.get_threshold())  # the inner block did not restore the outer's
    assert gc.get_threshold() == CPYTHON
    with pytest.raises(RuntimeError, match="inside"), _collector.relaxed_collection():
        raise RuntimeError("inside")
    assert gc.get_threshold() == CPYTHON


def test_higher_thresholds_of_the_caller_are_kept(default_thresholds):
    higher = tuple(10 * t for t in _collector.BUILD_THRESHOLDS)
    gc.set_threshold(*higher)
    with _collector.relaxed_collection():
        assert gc.get_threshold() == higher
    assert gc.get_threshold() == higher


def test_simulate_traces_relaxed_and_gives_the_thresholds_back(default_thresholds):
    """The save function runs while `simulate`'s program is traced: it sees the relaxed
    thresholds, and the caller the defaults after the call, with concrete inputs (a program
    `simulate` builds and calls itself) and under a caller's `jit` (traced inside it)."""
    seen = []
    model = RigidBody(jnp.diag(jnp.array([1.0, 2.0, 3.0])))
    state0 = RigidBodyState(jnp.eye(3), jnp.array([0.1, 0.2, 0.3]))

    def save(t, s):
        seen.append(gc.get_threshold())
        return s.Pi

    jaxrigid.simulate(jaxrigid.IMIDM(), model, state0, 0.01, 3, save=save)
    assert seen and all(map(_relaxed, seen)), seen
    assert gc.get_threshold() == CPYTHON
    seen.clear()
    jax.jit(lambda s: jaxrigid.simulate(jaxrigid.TRAP(), model, s, 0.01, 3, save=save).ts)(state0)
    assert seen and all(map(_relaxed, seen)), seen
    assert gc.get_threshold() == CPYTHON


def test_a_stored_programs_first_call_is_relaxed(default_thresholds):
    seen = []

    def fn(x):
        seen.append(gc.get_threshold())
        return x + 1.0

    assert float(program_store.call(fn, "test", (jnp.asarray(1.0),))) == 2.0
    assert len(seen) == 1 and _relaxed(seen[0]), seen
    assert gc.get_threshold() == CPYTHON


def test_the_command_runs_relaxed(default_thresholds, monkeypatch):
    seen = []

    def methods(args):
        seen.append(gc.get_threshold())
        return 0

    monkeypatch.setattr(_main, "cmd_methods", methods)
    assert _main.main(["--no-compilation-cache", "methods"]) == 0
    assert len(seen) == 1 and _relaxed(seen[0]), seen
    assert gc.get_threshold() == CPYTHON
