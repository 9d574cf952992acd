"""Stored programs (`jaxrigid.program_store`): a run traced once and loaded by later calls
and processes, equal bit for bit to the ordinary run, keyed by what it depends on, and run
the ordinary way whenever it cannot be stored or read."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid import program_store
from jaxrigid.cases import get_case

pytest.importorskip("flatbuffers")  # what `jax.export` serialises with (a core dependency)


@pytest.fixture
def fresh(monkeypatch):
    """No program loaded in this process yet (as in a new process)."""
    monkeypatch.setattr(program_store, "_CALLABLE", {})


def _run(state0, model, n_steps=30, save_every=10):
    return jr.simulate(jr.IMIDM(), model, state0, 0.01, n_steps, save_every=save_every)


def _ensemble(n=3):
    case = get_case("krysl-slow-top")
    model, state0 = case.build(case.resolve())
    return model, case.perturb(state0, np.random.default_rng(0), 0.05, n)


def _equal(a, b):
    leaves = jax.tree_util.tree_leaves
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(leaves(a), leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_stored_run_equals_the_ordinary_one_and_is_loaded_without_tracing(
    tmp_path, fresh, monkeypatch
):
    model, state0 = _ensemble()
    plain = _run(state0, model)
    with program_store.stored_programs("slow top", tmp_path):
        stored = _run(state0, model)
    files = list(tmp_path.glob("*.program"))
    assert len(files) == 1  # the fast form only: every member's every step succeeded
    _equal(plain, stored)

    # a new process's view: nothing loaded; the runner must not be traced again
    monkeypatch.setattr(program_store, "_CALLABLE", {})
    monkeypatch.setattr(program_store, "_export", lambda *a: pytest.fail("traced again"))
    with program_store.stored_programs("slow top", tmp_path):
        # as many saves, more steps per save: an argument of the same program
        again = _run(state0, model, n_steps=60, save_every=20)
    _equal(_run(state0, model, n_steps=60, save_every=20), again)
    assert list(tmp_path.glob("*.program")) == files


def test_the_file_is_keyed_by_key_shapes_and_source(tmp_path, fresh, monkeypatch):
    model, state0 = _ensemble()
    with program_store.stored_programs("a", tmp_path):
        _run(state0, model)
    with program_store.stored_programs("b", tmp_path):
        _run(state0, model)
    assert len(list(tmp_path.glob("*.program"))) == 2
    model4, state4 = _ensemble(4)
    with program_store.stored_programs("a", tmp_path):
        _run(state4, model4)
    assert len(list(tmp_path.glob("*.program"))) == 3
    monkeypatch.setattr(program_store, "source_digest", lambda: "edited source")
    with program_store.stored_programs("a", tmp_path):
        _run(state0, model)
    assert len(list(tmp_path.glob("*.program"))) == 4


def test_a_damaged_file_is_rebuilt(tmp_path, fresh, monkeypatch):
    model, state0 = _ensemble()
    with program_store.stored_programs("k", tmp_path):
        first = _run(state0, model)
    (path,) = tmp_path.glob("*.program")
    path.write_bytes(b"not a program")
    monkeypatch.setattr(program_store, "_CALLABLE", {})
    with program_store.stored_programs("k", tmp_path):
        second = _run(state0, model)
    _equal(first, second)
    assert path.read_bytes() != b"not a program"  # replaced by a readable one


def test_outside_the_block_and_under_a_transformation_nothing_is_stored(tmp_path, fresh):
    model, state0 = _ensemble()
    _run(state0, model)
    with program_store.stored_programs("k", tmp_path):
        final = jax.jit(lambda s: _run(s, model).final_state.Pi)(state0)
        grad = jax.grad(lambda p: jnp.sum(_run(state0._replace(Pi=p), model).final_state.Pi))(
            state0.Pi
        )
    assert not list(tmp_path.glob("*.program"))
    assert np.all(np.isfinite(final)) and np.all(np.isfinite(grad))


def test_a_program_that_cannot_be_exported_runs_the_ordinary_way(tmp_path, fresh):
    @jax.jit
    def with_callback(x):
        return jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    x = jnp.linspace(0.0, 1.0, 5)
    with program_store.stored_programs("k", tmp_path):
        y = program_store.call(with_callback, "callback", (x,))
    np.testing.assert_array_equal(np.asarray(y), np.sin(np.asarray(x)))
    assert not list(tmp_path.glob("*.program"))


def test_the_command_stores_its_run_and_a_second_process_gives_the_same_files(tmp_path):
    """Two processes of `jaxrigid run` with one cache directory: the second loads the stored
    run and the program of its invariants (`output.evaluate_along`), and writes the same
    `.npz` bit for bit (what it saves in build time is measured in bench/compile_cost.py,
    program `cli`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXRIGID_")}
    env["JAXRIGID_CACHE_DIR"] = str(tmp_path / "cache")
    outs = []
    for k in range(2):
        out = tmp_path / f"out{k}"
        command = [sys.executable, "-m", "jaxrigid", "run", "krysl-torque-free", "--t-end", "4"]
        done = subprocess.run(
            [*command, "--ensemble", "3", "--json", "--out", str(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        outs.append((json.loads(done.stdout), np.load(out / "krysl-torque-free.npz")))
    assert len(list((tmp_path / "cache" / "programs").glob("*.program"))) == 2
    (first, a), (second, b) = outs
    assert sorted(a.files) == sorted(b.files)
    for name in a.files:
        np.testing.assert_array_equal(a[name], b[name])
    assert first["invariants"] == second["invariants"]


def test_the_optimisers_programs_are_stored_and_loaded(tmp_path, fresh, monkeypatch):
    """`optimise` from the host (as `jaxrigid control` runs it): its one program, the outer
    iteration (the start and the end come from its evaluations), is stored once and gives
    the same optimum when loaded."""
    from jaxrigid.control.optimise import AugmentedLagrangian, optimise

    def toy(p):  # least squares to 1 subject to p0 + p1 = 0
        return jnp.sum((p - 1.0) ** 2), p[:1] + p[1:2]

    settings = AugmentedLagrangian(3, 5)
    p0 = jnp.zeros(3)
    plain = optimise(toy, p0, settings)
    with program_store.stored_programs("toy", tmp_path):
        stored = optimise(toy, p0, settings)
    assert len(list(tmp_path.glob("*.program"))) == 1
    monkeypatch.setattr(program_store, "_CALLABLE", {})
    monkeypatch.setattr(program_store, "_export", lambda *a: pytest.fail("traced again"))
    with program_store.stored_programs("toy", tmp_path):
        loaded = optimise(toy, p0, settings)
    _equal(plain, stored)
    _equal(plain, loaded)


def test_a_sweeps_chunk_program_is_stored_and_loaded(tmp_path, fresh, monkeypatch):
    """A sweep's chunk program is stored under its plan's key (in JAX's cache directory: the
    driver's or a Dask worker's), and a later sweep of the same plan loads it: its store holds
    the same data bit for bit."""
    from jaxrigid.sweep import Grid, Sweep, load, run
    from jaxrigid.sweep import program as sweep_program

    real = program_store.stored_programs  # into this test's directory, not the suite's
    monkeypatch.setattr(
        program_store, "stored_programs", lambda key: real(key, tmp_path / "cache" / "programs")
    )
    sweep = Sweep(
        "krysl-torque-free", axes=(Grid("Omega1", -0.5, 0.5, 6),), t_end=0.5, chunk_size=4
    )
    run(sweep, tmp_path / "a", progress=False)
    stored = list((tmp_path / "cache" / "programs").glob("*.program"))
    assert len(stored) == 1
    monkeypatch.setattr(program_store, "_CALLABLE", {})
    monkeypatch.setattr(sweep_program, "_PROGRAMS", {})  # the driver's in-process cache
    monkeypatch.setattr(program_store, "_export", lambda *a: pytest.fail("traced again"))
    run(sweep, tmp_path / "b", progress=False)
    a, b = load(tmp_path / "a"), load(tmp_path / "b")
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(np.asarray(a[name]), np.asarray(b[name]))
