"""Quick builds (`jaxrigid.xla_options`): XLA's options reach the programs jaxrigid builds
itself inside `quick_build`, never a nested `jit`, and change nothing but rounding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import monitoring

import jaxrigid as jr
from jaxrigid import program_store, xla_options
from jaxrigid.cases import get_case
from jaxrigid.control.optimise import AugmentedLagrangian, optimise

pytest.importorskip("flatbuffers")  # stored programs below (`jax.export`)

# every program built anew is lowered, even one whose executable then comes from the
# persistent cache (a compile event would miss that: a rerun with a kept cache hits)
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"


@pytest.fixture
def lowerings():
    """The number of programs lowered since the fixture started, as a function."""
    seen = []
    listener = lambda name, *a, **kw: seen.append(name) if name == _LOWER else None  # noqa: E731
    monitoring.register_event_duration_secs_listener(listener)
    yield lambda: len(seen)
    monitoring.unregister_event_duration_listener(listener)


@pytest.fixture
def full_process_builds(monkeypatch):
    """As in a process that builds with XLA's defaults (the suite's fast build puts the quick
    builds' options into every program, and then a quick build adds none)."""
    monkeypatch.setattr(xla_options, "_in_effect", lambda name, value: False)


def _ensemble():
    case = get_case("krysl-slow-top")
    model, state0 = case.build(case.resolve())
    return model, case.perturb(state0, np.random.default_rng(1), 0.05, 4)


def _simulate(model, state0, n_steps=40):
    return jr.simulate(jr.IMIDM(), model, state0, 0.01, n_steps, save_every=10)


def test_profiles_on_the_cpu_and_outside_a_block(full_process_builds):
    assert jax.default_backend() == "cpu"  # the suite's machine; elsewhere the options are None
    once, repeated = jr.quick_build_options(), jr.quick_build_options("repeated")
    # the older fusion emitter in both; level 0 only where a program runs once
    assert once["xla_backend_optimization_level"] == 0
    assert "xla_backend_optimization_level" not in repeated
    assert once["xla_cpu_use_fusion_emitters"] is repeated["xla_cpu_use_fusion_emitters"] is False
    assert xla_options.options() is None
    with jr.quick_build():
        assert xla_options.options() == once
        with jr.quick_build(None):  # an ensemble inside a quick block builds as usual
            assert xla_options.options() is None
        with jr.quick_build("repeated"):
            assert xla_options.options() == repeated
        assert xla_options.options() == once
    assert xla_options.options() is None


def test_options_the_process_builds_with_are_left_out(monkeypatch, lowerings):
    """An option every program of the process has already (jax's
    `jax_disable_most_optimizations`: level 0 and cheap LLVM passes; one in `XLA_FLAGS`) is
    left out of a quick build's, so that, with all of them in effect, a quick build is the
    plain program: built once, not again under another key."""
    level0 = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
    before = jax.config.values["jax_disable_most_optimizations"]
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/dev/null --xla_cpu_use_fusion_emitters=false")
    try:
        jax.config.update("jax_disable_most_optimizations", False)
        assert jr.quick_build_options() == level0 and jr.quick_build_options("repeated") is None
        jax.config.update("jax_disable_most_optimizations", True)
        assert jr.quick_build_options() is None
        monkeypatch.setenv("XLA_FLAGS", "")
        assert jr.quick_build_options() == {"xla_cpu_use_fusion_emitters": False}
    finally:
        jax.config.update("jax_disable_most_optimizations", before)
    monkeypatch.setattr(xla_options, "_in_effect", lambda name, value: True)
    model, state0 = _ensemble()
    plain = _simulate(model, state0)
    built = lowerings()
    with jr.quick_build():
        assert xla_options.options() is None
        quick = _simulate(model, state0)
    assert lowerings() == built  # the plain program, not a copy
    for a, b in zip(
        jax.tree_util.tree_leaves(plain.states), jax.tree_util.tree_leaves(quick.states)
    ):
        np.testing.assert_array_equal(a, b)


def test_an_option_this_xla_does_not_know_is_left_out(monkeypatch):
    """All options are probed in one compile; where that fails (an option this jaxlib's XLA
    does not know), one by one: the unknown one is left out, the others kept."""
    known = jr.quick_build_options()
    unknown = ("xla_no_such_option_for_jaxrigid", 1)
    monkeypatch.setitem(xla_options._PROFILES, "once", xla_options._PROFILES["once"] + (unknown,))
    xla_options._known.cache_clear()
    try:
        assert jr.quick_build_options() == known
        assert not xla_options._known((unknown,))
    finally:
        xla_options._known.cache_clear()


def test_an_unknown_profile_is_refused_naming_the_profiles():
    with pytest.raises(ValueError, match=r"one of \['once', 'repeated'\] or None, got 'fast'"):
        with jr.quick_build("fast"):
            pass
    with pytest.raises(ValueError, match=r"one of \['once', 'repeated'\], got None"):
        jr.quick_build_options(None)


def test_a_quick_build_is_its_own_program_and_equal_to_rounding(lowerings, full_process_builds):
    model, state0 = _ensemble()
    plain = _simulate(model, state0)
    before = lowerings()
    with jr.quick_build():
        quick = _simulate(model, state0)
        built = lowerings() - before
        again = _simulate(model, state0)
        assert lowerings() - before == built  # the second call reuses the quick program
    assert built >= 1  # not the plain program of the first call
    # rounding only: products and sums fused differently over 40 steps of |Π| ≈ 1 leave
    # differences of a few hundred ulps at most
    for a, b in zip(
        jax.tree_util.tree_leaves(plain.states), jax.tree_util.tree_leaves(quick.states)
    ):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)
    for a, b in zip(
        jax.tree_util.tree_leaves(quick.states), jax.tree_util.tree_leaves(again.states)
    ):
        np.testing.assert_array_equal(a, b)


def test_stored_programs_take_the_options_where_they_are_compiled(
    tmp_path, monkeypatch, full_process_builds
):
    # a stored program is traced for export with no options (JAX refuses them on a nested
    # jit), and compiled with them: the quick run is stored and equals the direct one
    monkeypatch.setattr(program_store, "_CALLABLE", {})
    model, state0 = _ensemble()
    with jr.quick_build():
        direct = _simulate(model, state0, 20)
        with program_store.stored_programs("quick-test", tmp_path):
            stored = _simulate(model, state0, 20)
    assert list(tmp_path.glob("*.program"))
    assert all(k[1] for k in program_store._CALLABLE)  # compiled with the options
    for a, b in zip(
        jax.tree_util.tree_leaves(direct.states), jax.tree_util.tree_leaves(stored.states)
    ):
        np.testing.assert_array_equal(a, b)


def test_the_optimiser_under_a_quick_build_reaches_the_same_optimum():
    # min |p|² subject to p₀ + p₁ = 1: the optimum (½, ½) whatever the build
    def objective(p):
        return jnp.dot(p, p), jnp.reshape(p[0] + p[1] - 1.0, (1,))

    settings = AugmentedLagrangian(n_outer=10, n_inner=10)
    with jr.quick_build("repeated"):
        res = optimise(objective, jnp.zeros(2), settings)
    # ten multiplier updates leave |c| ≈ 4e-11 here (either build): 1e-9 is that with margin
    assert float(res.residual_norm) < 1e-9
    np.testing.assert_allclose(res.coefficients, [0.5, 0.5], atol=1e-9)


def test_a_methods_preferred_profile_applies_only_where_the_caller_chose_none(monkeypatch):
    """`preferred(profile)` is `quick_build(profile)` outside any `quick_build` block and
    nothing inside one, `quick_build(None)` (XLA's defaults) included. The options are made
    visible per profile: in the suite's process a profile's options may all be in effect
    already (`quick_build_options` then gives `None` for every profile)."""
    monkeypatch.setattr(xla_options, "quick_build_options", lambda p: {"profile": p})
    assert xla_options.options() is None
    with xla_options.preferred("repeated"):
        assert xla_options.options() == {"profile": "repeated"}
    with xla_options.preferred(None):
        assert xla_options.options() is None
    with jr.quick_build("once"), xla_options.preferred("repeated"):
        assert xla_options.options() == {"profile": "once"}
    with jr.quick_build(None), xla_options.preferred("repeated"):
        assert xla_options.options() is None
    assert xla_options.options() is None  # every block restored the state before it


class _Built(Exception):
    """Raised by the stand-in for the runner's builder, once it has seen the options."""


@pytest.mark.parametrize(
    ("method", "case", "expected"),
    [("DLA-midpoint", "rolling-ball-passive", "repeated"), ("IMIDM", "krysl-torque-free", None)],
)
def test_simulate_builds_with_the_methods_preferred_profile(monkeypatch, method, case, expected):
    """A concrete `simulate` call builds its run with the method's `build_profile`
    (DLA-midpoint: `"repeated"`; IMIDM: none, XLA's defaults), and a caller's
    `quick_build(None)` overrides it. The runner's builder is replaced by one that records
    the options it is given and stops before anything is traced."""
    from jaxrigid import _run_program

    monkeypatch.setattr(xla_options, "quick_build_options", lambda p: {"profile": p})
    seen = []

    def builder(spec, model_axes, layout, compiler_options=None):
        seen.append(compiler_options)
        raise _Built

    monkeypatch.setattr(_run_program, "compiled_runner", builder)
    c = get_case(case)
    model, state0 = c.build(c.resolve({}))
    integrator = jr.get_method(method)
    assert integrator.build_profile == expected
    with pytest.raises(_Built):
        jr.simulate(integrator, model, state0, 0.01, 2)
    with pytest.raises(_Built), jr.quick_build(None):
        jr.simulate(integrator, model, state0, 0.01, 2)
    assert seen == [None if expected is None else {"profile": expected}, None]
