"""Every case's build is traceable: a sweep calls `jax.vmap(case.build)` over its members'
parameters (traced float arrays), so no build may branch in Python on a parameter's value.

- The batched build equals each member's own (concrete) build bit for bit: the same
  operations run on the same float64 inputs, op by op in both (eager `vmap`), and XLA:CPU's
  elementwise kernels do not depend on the batch.
- Under `jax.jit` the whole build is one compiled program, which XLA may fuse differently
  (an FMA, a reordered sum): equal to a few ulps of each leaf's largest entry.
- A bad value given to a traced build is not lost: the eager build's checks cannot run on
  tracers, so the member's model or state carries it to `simulate`'s value checks (and the
  sweep's validation pass, which applies the same checks per member).
- A small sweep of each formerly untraceable family equals its members run one by one.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.cases import CASES
from jaxrigid.integrators import get_method
from jaxrigid.simulation import simulate
from jaxrigid.sweep import Grid, Keep, Sweep, Values, load, run

EPS = float(np.finfo(np.float64).eps)

# a common factor on every component would make Γ non-unit, which the case refuses
CONSTRAINED = {"dmv-heavy-top": {"Gamma1", "Gamma2", "Gamma3"}}


def members(case, n: int = 3) -> list[dict[str, float]]:
    """`n` parameter sets: the defaults times `1 + 1e-3 k` (member `k`), structural and
    constrained parameters left at their defaults."""
    fixed = {k for k, p in case.parameters.items() if not p.sweepable}
    fixed |= CONSTRAINED.get(case.name, set())
    base = case.resolve()
    return [
        {k: v if k in fixed else v * (1.0 + 1e-3 * i) for k, v in base.items()} for i in range(n)
    ]


def structural(case) -> dict[str, float]:
    """The structural parameters' defaults: Python constants of a sweep's build (they may set
    shapes, e.g. a chain's `n_bodies`), never traced."""
    return {k: float(p.default) for k, p in case.parameters.items() if not p.sweepable}


def stack(params: list[dict[str, float]], case) -> dict[str, jax.Array]:
    """The members' traced parameters, structural ones left out (`traced_build` adds them)."""
    fixed = structural(case)
    return {k: jnp.asarray([p[k] for p in params]) for k in params[0] if k not in fixed}


def traced_build(case, build=None):
    """`build` (default the case's) as a sweep calls it: traced parameters, the structural
    ones as constants."""
    build = case.build if build is None else build
    fixed = structural(case)
    return lambda params: build({**{k: v for k, v in params.items() if k not in fixed}, **fixed})


def leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def _axes_condition(model) -> float:
    """`λ_max / min gap` of the principal moments of a chain's body."""
    from jaxrigid.models.particle_body import inertia_tensor

    body = model.chain.body
    moments = np.linalg.eigvalsh(np.asarray(inertia_tensor(body.m, body.r)))
    return float(moments.max() / np.min(np.diff(moments)))


@pytest.mark.parametrize("name", list(CASES))
def test_batched_build_equals_each_members_build(name):
    case = CASES[name]
    ms = members(case)
    for build in case.forms():  # every form (the chain's quaternions and rotation matrices)
        batched = jax.vmap(traced_build(case, build))(stack(ms, case))
        assert not all(np.array_equal(a[0], a[1]) for a in leaves(batched)), "members differ"
        for i, params in enumerate(ms):
            single = build(params)
            assert jax.tree_util.tree_structure(single) == jax.tree_util.tree_structure(batched)
            for b, s in zip(leaves(batched), leaves(single)):
                assert b.shape[1:] == s.shape and b.dtype == s.dtype
                np.testing.assert_array_equal(b[i], s)
        jitted = jax.jit(traced_build(case, build))(ms[2])
        eager = build(ms[2])
        # one compiled program vs op by op: XLA may fuse (FMA) or reorder, a few ulps. A
        # chain's body goes through an eigendecomposition (its principal axes): a rounding
        # of the inertia by δ moves the axes by up to δ/gap (first-order eigenvector
        # perturbation, Golub & Van Loan, Matrix Computations, 4th ed., Thm 8.1.12), so
        # 4 ulps times the eigenvectors' condition number λ_max / min gap (17 for the
        # tetrahedron; measured: 8.5 ulps on one CPU, 23 on another)
        ulps = 4 * _axes_condition(eager[0]) if name.startswith("chain-") else 4
        for j, s in zip(leaves(jitted), leaves(eager)):
            atol = ulps * EPS * np.max(np.abs(s), initial=0.0)
            np.testing.assert_allclose(j, s, rtol=0, atol=atol)


def test_structural_parameters_are_marked():
    """`q2_every` sets the number of Q_II reports (a Python number, not used by the build):
    not sweepable; every other parameter is."""
    fixed = {(n, k) for n, c in CASES.items() for k, p in c.parameters.items() if not p.sweepable}
    chains = {(f"chain-tetrahedra-{k}", "n_bodies") for k in ("c1c1", "c1c2", "c1c3")}
    assert fixed == {(f"nontwisting-case{i}", "q2_every") for i in (1, 2, 3)} | chains


# --- bad values: the eager error, and simulate's check of a traced build ---------------------

NAN = math.nan
BAD = [
    # case, bad parameters, eager error at build (None: at simulate), simulate's message
    ("dmv-heavy-top", {"Gamma3": 1.1}, "must be a unit vector", "R0 contains NaN or inf"),
    (
        "dmv-coupled-right-angle",
        {"mass2": -1.0},
        "masses must be positive",
        "CoupledBodies: masses must be positive",
    ),
    ("dmv-coupled-aligned", {"theta": NAN}, "Lambda contains NaN", "Lambda contains NaN or inf"),
    ("kepler", {"e": 1.5}, None, "q0 or p0 contains NaN or inf"),
    (
        "nontwisting-case3",
        {"omega2": NAN},
        "director state contains NaN",
        "initial director state contains NaN or inf",
    ),
    (
        "symmetric-top-euler-angles",
        {"theta0": 180.0},
        "strictly between 0 and 180",
        "q0 or p0 contains NaN or inf",
    ),
    ("symmetric-top-rattle", {"I3": 11.0}, "need 𝕀ᵢ < 𝕀ⱼ", "ConstrainedRigidBody needs J"),
    ("rolling-ball-pendulum", {"rail_radius": 1.5}, None, r"rail 0 \(CircleRail\) leaves"),
    ("rolling-ball-linear-rail", {"half_length": 1.2}, None, r"rail 0 \(SegmentRail\) leaves"),
    ("suslov", {"xi1": 0.0, "xi2": 0.0, "xi3": 0.0}, "xi must be nonzero", "xi must be finite"),
    ("chain-tetrahedra-c1c1", {"spacing": 0.9}, None, "overlap"),
]


def _promotion(case):
    """tests/conftest.py's strict rank promotion, for every model (a batched inertia must
    broadcast explicitly: DirectorRigidBody.parameter_checks once did not)."""
    del case
    return jax.numpy_rank_promotion("raise")


def _simulate(case, model, state0, **kw):
    integrator = get_method(case.default_method, case.family)
    return simulate(integrator, model, state0, case.default_dt, 1, **kw)


@pytest.mark.parametrize("name, bad, eager, message", BAD, ids=[b[0] for b in BAD])
def test_bad_value_is_refused_concrete_and_traced(name, bad, eager, message):
    case = CASES[name]
    good = case.resolve()
    wrong = case.resolve(bad)
    if eager is not None:  # concrete: the build refuses it at once, as before
        with pytest.raises(ValueError, match=eager):
            case.build(wrong)
    else:  # concrete: the build passes, simulate refuses it
        with pytest.raises(ValueError, match=message):
            _simulate(case, *case.build(wrong))
    # traced: the build passes; simulate names the problem and the member
    model, state0 = jax.vmap(traced_build(case))(stack([good, wrong, good], case))
    with pytest.raises(ValueError, match=message) as err, _promotion(case):
        _simulate(case, model, state0, model_axes=0)
    assert "ensemble member 1; 1 of 3 members fail" in str(err.value)


def test_bad_sweep_member_is_named_before_any_work(tmp_path):
    """The sweep's validation applies the same checks to the members it builds traced."""
    sweep = Sweep("dmv-heavy-top", axes=(Values("Gamma3", (1.0, 1.1)),), t_end=0.2, chunk_size=2)
    with pytest.raises(ValueError, match=r"sweep member 1 \{'Gamma3': 1.1\}: R0 contains NaN"):
        run(sweep, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


# --- sweeps of the formerly untraceable families equal their members' own runs ----------------

SWEEPS = [
    # case, axes, steps; one per family (rigid body, coupled bodies, Hamiltonian, director,
    # symmetric top in Euler angles, rolling ball)
    ("dmv-heavy-top", (Grid("M1", 0.1, 0.2, 2), Grid("mgchi3", 1.0, 1.5, 2)), 5),
    ("dmv-coupled-right-angle", (Grid("theta", 1.5, 1.6, 2), Grid("mass2", 1.0, 2.0, 2)), 5),
    pytest.param(
        "kepler",
        (Grid("e", 0.5, 0.6, 4),),
        5,
    ),
    ("nontwisting-case3", (Grid("omega1", 1.5, 2.0, 2), Grid("load_scale", 0.5, 1.0, 2)), 3),
    ("symmetric-top-euler-angles", (Grid("theta0", 30.0, 45.0, 2), Grid("I3", 1.0, 2.0, 2)), 3),
    ("symmetric-top-rattle", (Grid("theta0", 30.0, 45.0, 2), Grid("I3", 1.0, 2.0, 2)), 3),
    ("rolling-ball-pendulum", (Grid("azimuth", 0.0, 0.5, 2), Grid("amplitude", 0.5, 1.0, 2)), 5),
]


@pytest.mark.parametrize("name, axes, steps", SWEEPS)
def test_sweep_equals_members_run_alone(name, axes, steps, tmp_path):
    case = CASES[name]
    dt = case.default_dt
    sweep = Sweep(
        name,
        axes=axes,
        t_end=steps * dt,
        chunk_size=4,
        keep=Keep(invariants=False),
    )
    with _promotion(case):
        data = load(run(sweep, tmp_path / "out", progress=False))
    assert data["finished"].all() and (data["outcome/result"] == 0).all()
    integrator = get_method(case.default_method, case.family)
    shape = tuple(a.size for a in axes)
    for index in np.ndindex(shape):
        params = case.resolve(
            {a.names[0]: float(np.asarray(data[f"param/{a.names[0]}"])[index]) for a in axes}
        )
        model, state0 = case.build(params)
        sol = simulate(integrator, model, state0, dt, steps, save_every=steps)
        for field, value in sol.final_state._asdict().items():
            # the sweep builds and steps its members in one batched compiled program, this
            # run one member: fused differently, they may part by ulps (measured: at most
            # 1.3 eps of the leaf's largest entry after these 3 to 5 steps)
            np.testing.assert_allclose(
                data[f"final/{field}"][index],
                value,
                rtol=0,
                atol=16 * EPS * float(np.max(np.abs(value))),
            )
