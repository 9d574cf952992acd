"""The core contracts, over the registry of every integrator: traced parameters and `dt`
under `jit(grad)` against finite differences, `jit` = eager, `vmap` = loop; value checks under
`jit` naming the problem and the member; every outcome cause produced and named; refusals
of incompatible models and mixed dtypes; checkpointed = store-everything gradients; `save`."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.cases import get_case
from jaxrigid.integrators import METHODS_BY_FAMILY, REGISTRY, families_of
from jaxrigid.results import RESULTS

# For each family, the cases whose models its methods integrate (the first that a method
# integrates is used): a torqued body where the method takes one, DMV's heavy top.
CASES_BY_FAMILY = {
    # the preprocessed DMV integrates the free body only
    "rigid_body": ["krysl-slow-top", "dmv-heavy-top", "dmv-free-body-asymmetric"],
    "hamiltonian": ["pendulum", "symmetric-top-euler-angles"],
    "director": ["nontwisting-case2"],
    "constrained": ["symmetric-top-rattle"],
    "coupled_bodies": ["dmv-coupled-right-angle"],
    "rolling_ball": ["rolling-ball-two-circles"],
    # DLA-midpoint: any LagrangeDAlembertSystem, and the unreduced ball with dynamic masses
    "lagrange_d_alembert_system": ["rolling-ball-passive"],
    # a chain of 8 tetrahedra: gauss6/4/2 integrate its quaternion form, rattle its matrices
    "chain": ["chain-tetrahedra-c1c2"],
}
N_STEPS = 4


# Variants whose contract test compiles for 40–150 s on the 2-core CI machine (a gradient
# through their implicit or many-stage step, under jit and vmap): in the slow suite. The
# default suite keeps one of each family and implementation module (IMIDM, the Euler
# forms, MKRK midpoint, DMV and DMV4, LP-split, the RK/RATTLE/chain methods, RKMK4 and DLA
# for the ball).
SLOW_CONTRACTS = {
    "TRAP",
    "TRAPM",
    "SWC1",
    "AKW",
    "BBTRAP",
    "BBTRAPWD",
    "bE",
    "bEM",
    "MKRK-gauss4",
    "MKRK-gauss6",
    "MKRK-rk4",
    "MKRK-rk4-truncated",
    "DMV6-body",
    "DMV6-spatial",
    "DMV8-body",
    "DMV8-spatial",
    "DMV10-body",
    "DMV10-spatial",
    "DLA-midpoint",
    # the same implementations as RKMK4 and IMIDM (rkmk, lie_group), which stay
    "RKMK2",
    "RKMK8",
    "IMID",
}


@functools.cache  # the registry is static: built once for the parametrisation and its test
def _pairs():
    out = []
    for family, methods in METHODS_BY_FAMILY.items():
        for name, factory in methods.items():
            for case_name in CASES_BY_FAMILY[family]:
                # by the case's model stand-ins: building every case here cost each xdist
                # worker its collection time, for cases most of its tests never run
                if get_case(case_name).accepts(factory()):
                    # the chain's Gauss4/6 forms take 30–45 s each (a 32-unknown-per-stage
                    # implicit step, differentiated): in the slow suite; gauss2 and rattle
                    # keep the chain's contracts in the default one
                    slow = (family == "chain" and name in ("gauss4", "gauss6")) or (
                        name in SLOW_CONTRACTS
                    )
                    marks = (pytest.mark.slow,) if slow else ()
                    param = pytest.param(family, name, case_name, id=f"{name}-{case_name}")
                    out.append(pytest.param(*param.values, id=param.id, marks=marks))
                    break
            else:
                raise AssertionError(f"no test case for {family} method {name}")
    return out


def _scaled(model, p):
    """Every floating parameter of `model` times `p` (a traced scalar in the tests): inertia,
    potential weights, loads — all stay valid near p = 1; but a rolling ball's `radius`, which
    its state's height must equal (x₃ = r: a scaled radius puts the state off the constraint)."""
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def scale(path, x):
        return x if jax.tree_util.keystr(path) == ".radius" else x * p

    return eqx.combine(jax.tree_util.tree_map_with_path(scale, params), static)


def _setup(family, name, case_name):
    case = get_case(case_name)
    factory = dict(METHODS_BY_FAMILY[family])[name]
    model, state0 = case.build_for(factory())(case.resolve())
    dt = case.default_dt

    def loss(p, h):
        sol = jr.simulate(factory(), _scaled(model, p), state0, h, N_STEPS, save_every=N_STEPS)
        leaves = jax.tree_util.tree_leaves(sol.final_state)
        # a generic smooth functional of the whole final state, with unequal weights
        return sum(jnp.sum(jnp.sin(1.0 + k + x)) for k, x in enumerate(leaves))

    return loss, dt


def test_every_registered_method_is_tested():
    """Every registered class once in each of its families (RATTLE in two: one body and a
    chain of bodies)."""
    assert len(_pairs()) == sum(len(families_of(cls)) for cls in REGISTRY)


@pytest.mark.parametrize("family,name,case_name", _pairs())
def test_traced_parameter_and_dt_gradients_jit_and_vmap(family, name, case_name):
    """`jit(grad)` with respect to a model parameter and to `dt`, with a concrete initial
    state (this crashed with `TracerArrayConversionError` before), equals a central finite
    difference to 1e-6 relative: the step h = 1e-4 (relative) leaves O(h²) ≈ 1e-8 truncation
    and Newton's tolerance eps^¾ ≈ 2e-12 over h gives ≈ 2e-8 noise. `jit` = eager to
    round-off (the same compiled runner; 1e-13), `vmap` over the parameter = a loop (1e-12:
    only the order of reductions may differ). The `jit` value is the one `jit(value_and_grad)`
    computes: one program fewer to build than a separate `jit(loss)` (issue 31)."""
    loss, dt = _setup(family, name, case_name)
    value, (gp, gh) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(1.0, dt)
    e = 1e-4
    # the chain's loss is steep in the scale p (its Lennard-Jones σ enters as (pσ)¹²): the
    # central difference's truncation, measured 3.3e-6 relative at 1e-4 and 3.3e-4 at 1e-3
    # (∝ e²), needs e = 1e-5 (3e-8), where Newton's noise (≈ 1e-11 in the loss) over 2e is 5e-7
    e_p = 1e-5 if case_name.startswith("chain-") else e
    fd_p = (loss(1.0 + e_p, dt) - loss(1.0 - e_p, dt)) / (2 * e_p)
    fd_h = (loss(1.0, dt * (1 + e)) - loss(1.0, dt * (1 - e))) / (2 * e * dt)
    # atol 1e-9: a bound for a gradient that happened to vanish, well under any O(1e-3)
    # gradient's relative bound; the losses and their gradients here are O(1)
    np.testing.assert_allclose(float(gp), float(fd_p), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(float(gh), float(fd_h), rtol=1e-6, atol=1e-9)

    eager = loss(1.0, dt)
    np.testing.assert_allclose(float(value), float(eager), rtol=1e-13)
    ps = jnp.array([0.99, 1.0, 1.01])
    batched = jax.jit(jax.vmap(loss, in_axes=(0, None)))(ps, dt)
    looped = [loss(p, dt) for p in (0.99, 1.0, 1.01)]
    np.testing.assert_allclose(np.asarray(batched), np.asarray(looped), rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# value checks under jit


def _ensemble(n=4):
    case = get_case("krysl-torque-free")
    model, state0 = case.build(case.resolve())
    return model, case.perturb(state0, np.random.default_rng(0), 0.05, n)


def _run_bad_values(inertia, Pi, R, dt, t0=0.0):
    state = jr.RigidBodyState(R, Pi)
    sol = jr.simulate(jr.IMIDM(), jr.RigidBody(inertia), state, dt, 2, t0=t0)
    return sol.final_state.Pi


# one program for every bad value (they share shapes and dtypes): a `jit` per test built it six
# times, and its host callback keeps it out of the persistent cache
_jit_run_bad_values = jax.jit(_run_bad_values)


@pytest.mark.parametrize(
    "bad,message",
    [
        ("nan_state", r"Pi0 contains NaN or inf \[ensemble member 2; 1 of 4"),
        ("scaled_R", r"R0 is not orthonormal.*\[ensemble member 2; 1 of 4"),
        ("indefinite", r"inertia must be positive definite"),
        ("triangle", r"triangle inequality"),
        ("dt_zero", r"dt must be a finite nonzero scalar"),
        ("t0_nan", r"t0 must be a finite scalar"),
    ],
)
def test_bad_values_raise_under_jit_naming_problem_and_member(bad, message):
    model, states = _ensemble()
    run = _run_bad_values
    inertia, Pi, R, dt, t0 = model.inertia, states.Pi, states.R, 0.01, 0.0
    if bad == "nan_state":
        Pi = Pi.at[2, 1].set(jnp.nan)
    elif bad == "scaled_R":
        R = R.at[2].multiply(1.01)
    elif bad == "indefinite":
        inertia = jnp.diag(jnp.array([1.0, -1.0, 2.0]))
    elif bad == "triangle":
        inertia = jnp.diag(jnp.array([1.0, 1.0, 3.0]))  # 3 > 1 + 1: no rigid body
    elif bad == "t0_nan":
        t0 = float("nan")
    else:
        dt = 0.0
    run(model.inertia, states.Pi, states.R, 0.01)  # the good values run
    with pytest.raises(Exception, match=message):
        jax.block_until_ready(_jit_run_bad_values(inertia, Pi, R, dt, t0))
    with pytest.raises(ValueError, match=message):  # and eagerly, as a plain ValueError
        run(inertia, Pi, R, dt, t0)


# ---------------------------------------------------------------------------------------------
# outcomes by cause


def _coulomb_off_branch():
    case = get_case("krysl-coulomb-wall")
    model, state0 = case.build(case.resolve({"coulomb": -1.0, "wall": 0.001}))
    return jr.integrators.get_method(case.default_method), model, state0, 0.5, 20


@functools.cache  # the cases of every cause, built once for the seven tests
def _cause_cases():
    top = get_case("krysl-fast-top")
    model, s0 = top.build(top.resolve())
    free = get_case("krysl-torque-free")
    free_model, free0 = free.build(free.resolve())

    def nan_torque(t, R, Pi):
        return jnp.where(t > 0.0105, jnp.nan, 0.0) * Pi

    nan_model = jr.RigidBody(free_model.inertia, torque=nan_torque)
    return {
        RESULTS.max_steps_reached: (
            jr.IMIDM(newton=jr.Newton(max_steps=1)),
            model,
            s0,
            0.01,
            4,
        ),
        RESULTS.diverged: (jr.IMIDM(), model, s0, 5.0, 4),
        RESULTS.nonfinite: (jr.IMIDM(), nan_model, free0, 0.01, 4),
        RESULTS.off_branch: _coulomb_off_branch(),
        RESULTS.step_bound_broken: (jr.IMIDM(max_angle=0.05), free_model, free0, 0.2, 4),
        # a value check failed and the caller asked for it in the outcome (dt = 0)
        RESULTS.invalid_input: (jr.IMIDM(), free_model, free0, 0.0, 4),
    }


_FREE_PARAMS = get_case("krysl-torque-free").resolve()


@pytest.mark.parametrize("cause", [c for c in RESULTS if c is not RESULTS.successful])
def test_each_outcome_cause_is_produced_and_named(cause):
    if cause is RESULTS.model_unsupported:
        # `simulate` refuses such a model before any step (the method's `value_checks`);
        # the code is what a bare step reports (LP-split on a non-principal inertia).
        model, state0 = get_case("krysl-torque-free").build({**_FREE_PARAMS, "I12": 0.1})
        with pytest.raises(ValueError, match="principal axes"):
            jr.simulate(jr.integrators.LiePoissonSplitting(), model, state0, 0.01, 4)
        _, _, info = jr.integrators.LiePoissonSplitting().step(model, state0, None, 0.0, 0.01)
        assert RESULTS(int(info.result)) is cause
        return
    integrator, model, state0, dt, n = _cause_cases()[cause]
    checks = "outcome" if cause is RESULTS.invalid_input else "raise"
    sol = jr.simulate(integrator, model, state0, dt, n, checks=checks)
    assert RESULTS(int(sol.result)) is cause
    assert not bool(sol.outcome.all_converged) and int(sol.outcome.first_failure) >= 0
    step = int(sol.outcome.first_failure)
    with pytest.raises(jr.StepFailedError, match=rf"step {step} \(t = .*failed: {cause.name}"):
        jr.simulate(integrator, model, state0, dt, n, throw=True, checks=checks)


def test_throw_works_inside_jit_and_names_the_member():
    model, states = _ensemble(3)
    top = get_case("krysl-fast-top")
    top_model, _ = top.build(top.resolve())

    def run(dt):
        return jr.simulate(jr.IMIDM(), top_model, states, dt, 4, throw=True).final_state.Pi

    jax.block_until_ready(jax.jit(run)(0.001))  # no failure, no error
    causes = "|".join(c.name for c in RESULTS if c is not RESULTS.successful)
    with pytest.raises(
        Exception, match=rf"step 0 \(t = 0\) of ensemble member 0 failed: ({causes})"
    ):
        jax.block_until_ready(jax.jit(run)(5.0))


def test_explicit_step_to_nan_is_reported_nonfinite():
    """An explicit method has no solve to fail, but a NaN state is still not accepted
    silently."""
    free = get_case("krysl-torque-free")
    model, s0 = free.build(free.resolve())
    bad = jr.RigidBody(
        model.inertia, torque=lambda t, R, Pi: jnp.where(t > 0.015, jnp.nan, 0.0) * Pi
    )
    sol = jr.simulate(jr.integrators.ForwardEuler(), bad, s0, 0.01, 4)
    assert RESULTS(int(sol.result)) is RESULTS.nonfinite and int(sol.outcome.first_failure) == 2


# ---------------------------------------------------------------------------------------------
# refusals


def test_incompatible_model_is_refused_before_tracing_listing_valid_methods():
    free = get_case("krysl-torque-free")
    model, s0 = free.build(free.resolve())
    gauss4 = dict(METHODS_BY_FAMILY["hamiltonian"])["gauss4"]()
    with pytest.raises(
        jr.IncompatibleModelError, match=r"gauss4 does not integrate a RigidBody.*IMIDM"
    ):
        jr.simulate(gauss4, model, s0, 0.01, 2)
    wall = get_case("krysl-coulomb-wall")  # a RigidBody, but not a torque DMV takes
    wall_model, _ = wall.build(wall.resolve())
    with pytest.raises(TypeError, match=r"DMV-body does not integrate .*heavy top.*IMIDM"):
        jr.simulate(jr.integrators.DMVBody(), wall_model, s0, 0.01, 2)
    assert "DMV-body" not in jr.integrators.methods_for(wall_model)
    top = get_case("krysl-fast-top")  # a heavy top: DMV takes it
    assert {"DMV-body", "IMIDM"} <= set(jr.integrators.methods_for(top.build(top.resolve())[0]))
    assert {"DMV-body", "IMIDM"} <= set(jr.integrators.methods_for(model))


def test_mixed_dtypes_are_refused_clearly():
    free = get_case("krysl-torque-free")
    model, s0 = free.build(free.resolve())
    s32 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), s0)
    with pytest.raises(TypeError, match=r"RigidBody\.inertia is float64 but the state is float32"):
        jr.simulate(jr.IMIDM(), model, s32, 0.01, 2)


# ---------------------------------------------------------------------------------------------
# gradients: checkpointed = store-everything; save=fn


@pytest.mark.parametrize(
    "n_steps,save_every",
    # each compiles a checkpointed and a stored gradient (≈ 2 min on the CI machine): one
    # in the default suite — 37 saves of 37 steps: no block length within a factor 2 of √37
    # divides 37, so both levels replay surplus steps (`_run_program._replayed_blocks`) —
    # and the saving patterns whose blocks divide the run in the slow one
    [
        (1369, 37),
        pytest.param(100, 100, marks=pytest.mark.slow),
        pytest.param(60, 5, marks=pytest.mark.slow),
        pytest.param(7, 1, marks=pytest.mark.slow),
    ],
)
def test_checkpointed_gradient_equals_store_everything(n_steps, save_every):
    """The √n checkpointed scans recompute the same steps: the gradient is the same to
    round-off (1e-12 relative: only the order of the adjoint sums may differ; measured for
    37 × 37 steps: 1.2e-15 in the suite's build, 6.7e-15 with XLA's defaults)."""
    top = get_case("krysl-slow-top")
    model, s0 = top.build(top.resolve())

    def loss(p, checkpoint):
        # IMIDM without its fast path: the subject is the checkpointed scan, and the fast
        # path's second (fallback) solve would double the two gradients' compile time
        # (its own gradient: tests/test_fast_path.py)
        sol = jr.simulate(
            jr.IMIDM(fast_path=False),
            _scaled(model, p),
            s0,
            0.01,
            n_steps,
            save_every=save_every,
            checkpoint=checkpoint,
        )
        return jnp.sum(sol.states.Pi**2) + jnp.sum(sol.final_state.R[..., 0])

    g_ckpt = jax.jit(jax.grad(loss), static_argnums=1)(1.0, True)
    g_all = jax.jit(jax.grad(loss), static_argnums=1)(1.0, False)
    np.testing.assert_allclose(float(g_ckpt), float(g_all), rtol=1e-12)
    np.testing.assert_allclose(float(loss(1.0, True)), float(loss(1.0, False)), rtol=0)


def test_a_step_count_without_a_dividing_block_builds_one_step():
    """37 steps saved every step (no block length within a factor 2 of √37 = 6.1 divides
    37: 6 blocks of 7 segments, the last block's 5 surplus ones replayed) build the program
    of 36 (blocks of 6): as many loops in the forward program, and a gradient's StableHLO
    within 10 % of 36 steps' (measured 11 986 against 11 876 lines, 1 %; the remainder scan
    this replaced, a second copy of the segment, made it 19 780, 1.67×, and added a loop).
    Lowered only."""
    top = get_case("krysl-slow-top")
    model, s0 = top.build(top.resolve())

    def lowered(n, grad):
        def loss(p):
            sol = jr.simulate(jr.IMIDM(fast_path=False), _scaled(model, p), s0, 0.01, n)
            return jnp.sum(sol.final_state.Pi)

        return jax.jit(jax.grad(loss) if grad else loss).lower(1.0).as_text()

    assert lowered(37, False).count("stablehlo.while") == lowered(36, False).count(
        "stablehlo.while"
    )
    lines = [len(lowered(n, True).splitlines()) for n in (36, 37)]
    assert lines[1] <= 1.1 * lines[0], lines


def test_save_keeps_an_observable_instead_of_the_state():
    model, states = _ensemble(3)
    full = jr.simulate(jr.IMIDM(), model, states, 0.01, 20, save_every=5)
    energy = jr.simulate(
        jr.IMIDM(),
        model,
        states,
        0.01,
        20,
        save_every=5,
        save=lambda t, s: (t, model.kinetic_energy(s.Pi)),
    )
    ts, K = energy.states
    assert K.shape == (3, 5) and ts.shape == (3, 5)
    np.testing.assert_allclose(np.asarray(ts[0]), np.asarray(full.ts), rtol=0, atol=1e-15)
    # the same formula on the same states, compiled inside the scan or outside: a few ulps
    np.testing.assert_allclose(
        np.asarray(K),
        np.asarray(jax.vmap(jax.vmap(model.kinetic_energy))(full.states.Pi)),
        rtol=4e-16,
    )
