"""The chain cases `chain-tetrahedra-c1c1/c1c2/c1c3` (Chaurasia §3.5): one example in two forms.

- `--method` picks the form: `gauss6` (and gauss4/2) the quaternion form, `rattle` the
  rotation-matrix form; no other method applies.
- Both forms start from the same physical state: equal centres and momenta, `R(q) = R`, and
  the same energy computed by each form's own Hamiltonian (independent code paths).
- The command runs both forms with `energy` among the JSON invariants, lengthens the chain with
  `--set n_bodies`, and runs ensembles; a sweep holds the structural `n_bodies` fixed.
- The held boundary kinds (c1-c1, c1-c2, c1-c3) are data: their models have one pytree
  structure and one compiled program, and stack into one `vmap`; `ChainBoundary.kind` reads
  the kind back from concrete arrays and refuses traced or mixed ones.
"""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.cases import get_case
from jaxrigid.integrators import METHODS_BY_FAMILY
from jaxrigid.models.chain_boundary import BOUNDARY_KINDS, ChainBoundary
from jaxrigid.models.chain_quaternion import QuaternionChain
from jaxrigid.models.particle_chain import quaternion_matrix

jax.config.update("jax_enable_x64", True)

NAMES = ["chain-tetrahedra-c1c1", "chain-tetrahedra-c1c2", "chain-tetrahedra-c1c3"]
EPS = float(np.finfo(np.float64).eps)


def _forms(name):
    case = get_case(name)
    params = case.resolve()
    quaternion = case.build_for(METHODS_BY_FAMILY["chain"]["gauss6"]())(params)
    matrix = case.build_for(METHODS_BY_FAMILY["chain"]["rattle"]())(params)
    return case, quaternion, matrix


@pytest.mark.parametrize("name", NAMES)
def test_two_forms_of_one_state(name):
    """Same centres and momenta, `R(q) = R`, and the two Hamiltonians (3.8) and (3.35) agree
    to round-off (relative 1e-13: a sum of ~10² terms of size ≤ 10² each) — the kinetic
    energies come from `½ tr(P J⁻¹ Pᵀ)` and `½ gᵀ μ⁻¹(q) g`, different formulas."""
    case, (qmodel, qstate), (mmodel, mstate) = _forms(name)
    assert isinstance(qmodel, QuaternionChain)
    assert case.methods() == ["gauss2", "gauss4", "gauss6", "rattle"]
    np.testing.assert_array_equal(qstate.r, mstate.r)
    np.testing.assert_allclose(qstate.p, mstate.p, rtol=0, atol=1e-15)
    np.testing.assert_allclose(quaternion_matrix(qstate.q), mstate.R, rtol=0, atol=4 * EPS)
    e_q = float(qmodel.invariants(0.0, qstate)["energy"])
    e_m = float(mmodel.invariants(0.0, mstate)["energy"])
    assert abs(e_q - e_m) <= 1e-13 * max(abs(e_q), 1.0), (e_q, e_m)
    # the chosen first-mode velocity is zero at the ends and not elsewhere
    speeds = np.linalg.norm(np.asarray(mstate.p), axis=-1)
    assert speeds[0] == 0 and speeds[-1] == 0 and np.all(speeds[1:-1] > 0)


def test_boundary_values():
    """c1-c2 pulls the last body with F = (3, 0, 0); c1-c3 holds it displaced by d."""
    _, (qmodel, _), _ = _forms("chain-tetrahedra-c1c2")
    np.testing.assert_array_equal(qmodel.boundary.force, [3.0, 0.0, 0.0])
    case, (_, qstate), _ = _forms("chain-tetrahedra-c1c3")
    d = np.array([case.resolve()[k] for k in ("d1", "d2", "d3")])
    n = int(case.resolve()["n_bodies"])
    np.testing.assert_allclose(qstate.r[-1], [2.0 * n, 0, 0] + d, rtol=0, atol=1e-15)


def _avals(tree):
    return [
        (jnp.shape(x), jnp.result_type(x), getattr(x, "weak_type", False))
        for x in jax.tree.leaves(tree)
    ]


@pytest.mark.parametrize("method", ["rattle", "gauss6"])
def test_held_kinds_share_one_program(method):
    """The three cases' models (and states) of one form have one pytree structure and the same
    array types, so a `jit` traces them once; `simulate` builds its program for the first kind
    only (its runners' cache grows by nothing for the second and third); the free chain (a
    static difference: it keeps its momenta) is another structure. Stacked, the three models
    `vmap` as one, each member with its own masks."""
    integrator = METHODS_BY_FAMILY["chain"][method]()
    built = [get_case(name).build_for(integrator)(get_case(name).resolve()) for name in NAMES]
    assert len({jax.tree.structure(b) for b in built}) == 1
    assert all(_avals(b) == _avals(built[0]) for b in built)
    model, _ = built[0]
    free = type(model)(model.chain, ChainBoundary("free"))
    assert jax.tree.structure(free) != jax.tree.structure(model)

    traces = []

    @jax.jit
    def forces(model, state):
        traces.append(None)
        tm, rm = model.masks(state.r.shape[-2], state.r.dtype)
        return tm, rm, model.energy(state)

    for m, s in built:
        forces(m, s)
    assert len(traces) == 1

    if method == "rattle":  # one step each: the runner of the first kind serves the others
        from jaxrigid import _run_program

        def programs():
            return sum(f._cache_size() for f in _run_program._RUNNERS.values())

        m, s = built[0]
        jr.simulate(integrator, m, s, 1e-3, 1)
        first = programs()
        for m, s in built[1:]:
            jr.simulate(integrator, m, s, 1e-3, 1)
        assert programs() == first

    models, states = (jax.tree.map(lambda *x: jnp.stack(x), *parts) for parts in zip(*built))
    n = states.r.shape[-2]
    tm, rm = jax.vmap(lambda m: m.masks(n, jnp.float64))(models)
    for i, (m, _) in enumerate(built):
        np.testing.assert_array_equal(tm[i], m.boundary.translation_mask(n))
        np.testing.assert_array_equal(rm[i], m.boundary.rotation_mask(n))


def test_boundary_kind_read_back_and_refusals():
    """`kind` is each kind's (also for a batch of forces); traced or mixed (stacked kinds) it
    is refused with a message that says why; the construction refusals are kept."""
    for kind in BOUNDARY_KINDS:
        assert ChainBoundary(kind).kind == kind
    assert ChainBoundary(kind="c1-c2", force=jnp.ones((4, 3))).kind == "c1-c2"
    assert ChainBoundary("c1-c2", jnp.ones((4, 3))).translation_ends.shape == (4, 2)
    with pytest.raises(ValueError, match="only from concrete arrays"):
        jax.jit(lambda b: b.kind)(ChainBoundary("c1-c3"))
    mixed = jax.tree.map(lambda *x: jnp.stack(x), *(ChainBoundary(k) for k in BOUNDARY_KINDS[:3]))
    with pytest.raises(ValueError, match="its members hold c1-c1; c1-c2; c1-c3"):
        mixed.kind
    with pytest.raises(ValueError, match="unknown chain boundary 'c2'"):
        ChainBoundary("c2")
    with pytest.raises(ValueError, match=r"must have shape \(\.\.\., 3\), got \(2,\)"):
        ChainBoundary("c1-c2", jnp.ones(2))
    with pytest.raises(ValueError, match="needs kind 'c1-c2', not 'c1-c3'"):
        ChainBoundary("c1-c3", jnp.ones(3))


def _cli(*args):
    out = subprocess.run(
        [sys.executable, "-m", "jaxrigid", "run", *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


# gauss6 (30–55 s on the CI machine) in the slow suite; rattle runs the same command path
@pytest.mark.parametrize("method", [pytest.param("gauss6", marks=pytest.mark.slow), "rattle"])
def test_command_runs_both_forms(method, tmp_path):
    """`jaxrigid run chain-tetrahedra-c1c1 --method M --json`: `energy` among the invariants
    and kept (relative drift below 1e-3 over 100 steps at the default step: RATTLE's
    O(h²) error at h = 0.0025 is ~1e-4 relative, Gauss6's far less)."""
    report = _cli(
        "chain-tetrahedra-c1c1", "--method", method, "--t-end", "0.25", "--out", str(tmp_path)
    )
    energy = report["invariants"]["energy"]
    assert energy["max_abs_drift"] <= 1e-3 * abs(energy["initial"])
    assert report["newton"]["all_converged"]
    assert (tmp_path / "chain-tetrahedra-c1c1.png").exists()


def test_command_lengthens_the_chain_and_runs_ensembles(tmp_path):
    """`--set n_bodies=20` gives 20 bodies; `--ensemble 3` three members, member 0 the case's
    own state (its energy equals the unperturbed run's)."""
    long = _cli(
        "chain-tetrahedra-c1c2",
        "--method",
        "rattle",
        "--set",
        "n_bodies=20",
        "--t-end",
        "0.05",
        "--out",
        str(tmp_path),
    )
    assert np.shape(long["final_state"]["r"]) == (20, 3)
    ensemble = _cli(
        "chain-tetrahedra-c1c2",
        "--method",
        "rattle",
        "--ensemble",
        "3",
        "--t-end",
        "0.05",
        "--out",
        str(tmp_path),
    )
    single = _cli("chain-tetrahedra-c1c2", "--method", "rattle", "--t-end", "0.05")
    e0 = np.asarray(ensemble["invariants"]["energy"]["initial"])
    assert e0.shape == (3,) and len(set(e0.tolist())) == 3
    assert e0[0] == pytest.approx(single["invariants"]["energy"]["initial"], rel=1e-14)


def test_bad_chain_length_is_refused():
    """Fewer than three bodies (no moving body between the clamped ends) is refused."""
    case = get_case("chain-tetrahedra-c1c1")
    with pytest.raises(ValueError, match="n_bodies must be an integer ≥ 3"):
        case.build(case.resolve({"n_bodies": 2}))
    with pytest.raises(ValueError, match="n_bodies must be an integer"):
        case.build(case.resolve({"n_bodies": 7.5}))


@pytest.mark.parametrize("method", ["rattle", pytest.param("gauss6", marks=pytest.mark.slow)])
def test_sweep_keeps_the_structural_length(method, tmp_path):
    """A sweep over `v0` with `[set] n_bodies = 5` (structural, not swept), in each form: each
    member equals its own run (3 steps, a few ulps: one batched program against one
    member's; the sweep's checks run on one model per member)."""
    from jaxrigid.simulation import simulate
    from jaxrigid.sweep import Sweep, Values, load, run

    sweep = Sweep(
        case="chain-tetrahedra-c1c2",
        method=method,
        axes=[Values("v0", [0.2, 0.4])],
        set={"n_bodies": 5},
        n_steps=3,
    )
    data = load(run(sweep, tmp_path / "out", progress=False))
    assert data["finished"].all()
    case = get_case("chain-tetrahedra-c1c2")
    integrator = METHODS_BY_FAMILY["chain"][method]()
    for k, v0 in enumerate([0.2, 0.4]):
        model, state0 = case.build_for(integrator)(case.resolve({"n_bodies": 5, "v0": v0}))
        sol = simulate(integrator, model, state0, case.default_dt, 3, save_every=3)
        final = np.asarray(data["final/r"])[k]
        assert final.shape == (5, 3)
        np.testing.assert_allclose(final, sol.final_state.r, rtol=0, atol=64 * EPS)


def test_observables():
    """`end_final` is the last body's final centre; `extension_final` 1 for a chain that did
    not move; `tilt_max` 0 when no body turned."""
    case, (qmodel, qstate), _ = _forms("chain-tetrahedra-c1c1")
    states = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), qstate)
    obs = case.observe(qmodel, jnp.array([0.0, 1.0]), states, case.resolve())
    np.testing.assert_array_equal(obs["end_final"], np.asarray(qstate.r[-1]))
    assert obs["extension_final"] == pytest.approx(1.0, abs=1e-15)
    assert obs["tilt_max"] == pytest.approx(0.0, abs=1e-7)


def test_the_two_forms_agree_at_rattles_order():
    """The same chain (`chain-tetrahedra-c1c2`, its two forms) to t = 0.25: RATTLE at
    h = 1/200, 1/400, 1/800 against Gauss6 at h = 1/800 (order 6: its own error ~1e-12, far
    below RATTLE's ≥ 1e-6) — centres and attitudes (`R(q)` against `R`) differ by O(h²):
    measured 7.5e-5, 1.9e-5, 4.7e-6, slopes 1.999 and 2.000 (asserted within 0.15 of 2)."""
    from jaxrigid.simulation import simulate

    case = get_case("chain-tetrahedra-c1c2")
    gauss, rattle = METHODS_BY_FAMILY["chain"]["gauss6"](), METHODS_BY_FAMILY["chain"]["rattle"]()
    params = case.resolve()
    qmodel, q0 = case.build_for(gauss)(params)
    mmodel, m0 = case.build_for(rattle)(params)
    t_end = 0.25
    ref = simulate(gauss, qmodel, q0, t_end / 200, 200, save_every=200).final_state
    errors = []
    for n in (50, 100, 200):
        out = simulate(rattle, mmodel, m0, t_end / n, n, save_every=n).final_state
        errors.append(
            max(
                float(jnp.max(jnp.abs(out.r - ref.r))),
                float(jnp.max(jnp.abs(out.R - quaternion_matrix(ref.q)))),
            )
        )
    slopes = np.log2(np.asarray(errors[:-1]) / np.asarray(errors[1:]))
    assert np.all(np.abs(slopes - 2.0) <= 0.15), (errors, slopes)
