"""The issue-13 named cases (`jaxrigid.cases.rolling_ball`): every case builds and steps through
`simulate` with its default method RKMK4; `rolling-ball-two-circles` is `two_circles_ball()`
leaf by leaf; `--set` reaches the model; the command's JSON (`final_state.x` with x₃ = r, a unit
`final_state.q`, the invariant `energy`, the observables `min_normal_force`,
`max_friction_needed`); the passive ball keeps its energy to RKMK4's error over its default run;
`rolling-disk` is the planar disk of `RollingDisk`; ensembles stay on their constraints.
"""

from __future__ import annotations

import contextlib
import io
import json
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid import cli, integrators
from jaxrigid.cases import CASES
from jaxrigid.cases.rolling_ball import CASES as BALL_CASES
from jaxrigid.cli import lookups
from jaxrigid.diagnostics import invariants_along
from jaxrigid.integrators.rkmk import RKMK4, RKMK_CLASSES
from jaxrigid.models.rolling_ball import RollingBall, two_circles_ball
from jaxrigid.models.rolling_disk import RollingDisk, RollingDiskState

NAMES = [
    "rolling-ball-pendulum",
    "rolling-ball-two-circles",
    "rolling-ball-linear-rail",
    "rolling-ball-figure-eight",
    "rolling-ball-passive",
    "rolling-disk",
    "suslov",
]
CONTACT = {"min_normal_force", "max_friction_needed"}


def _case(name):
    return CASES[name]


def _observables(case, model, sol):
    return case.observe(model, np.asarray(sol.ts), sol.states, case.resolve())


def test_the_seven_cases_are_listed_with_their_defaults():
    assert [c.name for c in BALL_CASES] == NAMES
    for name in NAMES:
        case = _case(name)
        assert case.family == "rolling_ball" and case.default_method == "RKMK4"
        n = case.default_t_end / case.default_dt
        assert case.default_dt == 0.01 and n == round(n)  # a whole number of steps
        assert RKMK4().integrates(case.model())


@pytest.mark.parametrize("name", [n for n in NAMES if n != "rolling-ball-passive"])
def test_every_case_builds_and_steps(name):
    """Five RKMK4 steps: finite, the invariant `energy`, the documented observables; the ball
    cases keep |q| = 1 and x₃ = r. (The passive ball runs in its own test below.)"""
    case = _case(name)
    model, state0 = case.build(case.resolve())
    sol = jr.simulate(RKMK4(), model, state0, case.default_dt, 5)
    assert all(np.isfinite(x).all() for x in jax.tree_util.tree_leaves(sol.final_state))
    assert "energy" in invariants_along(model, sol.ts, sol.states)
    q = np.asarray(sol.final_state.q)
    assert abs(np.linalg.norm(q) - 1.0) < 1e-14
    obs = _observables(case, model, sol)
    if name == "suslov":
        assert set(obs) == {"max_constraint_torque"} and obs["max_constraint_torque"] > 0
        return
    assert np.asarray(sol.final_state.x)[2] == model.radius
    assert CONTACT <= set(obs)
    assert obs["min_normal_force"] > 0 and 0 <= obs["max_friction_needed"] < 1


def test_two_circles_defaults_are_two_circles_ball():
    """The contract: the case's default model and state are `two_circles_ball()`, leaf by leaf
    (same tree, same shapes, equal values), t_end = 10."""
    case = _case("rolling-ball-two-circles")
    got, want = case.build(case.resolve()), two_circles_ball()
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert np.shape(a) == np.shape(b) and np.array_equal(a, b)
    assert case.default_t_end == 10.0


def test_set_overrides_reach_the_model(capsys):
    """`--set NAME=VALUE` (parsed as the command parses it) changes the built model; `jaxrigid
    cases rolling-ball-two-circles` lists the parameters."""
    case = _case("rolling-ball-two-circles")
    sets = ["amplitude=0.3", "Frequency=2", "phase2=1", "m2=0.1", "rail_radius=0.4", "chi03=-0.2"]
    params = case.resolve(lookups.parse_sets(sets + ["radius=1.5", "Omega3=0.7"], case))
    model, state0 = case.build(params)
    np.testing.assert_array_equal(model.control.amplitude, [0.3, 0.3])
    np.testing.assert_array_equal(model.control.frequency, [2.0, 2.0])
    np.testing.assert_array_equal(model.control.phase, [0.0, 1.0])
    np.testing.assert_array_equal(model.masses, [0.25, 0.1])
    assert [float(r.radius) for r in model.rails] == [0.4, 0.4]
    assert float(model.chi0[2]) == -0.2 and float(model.radius) == 1.5
    assert float(state0.x[2]) == 1.5 and float(state0.Omega[2]) == 0.7

    def built(name, *items):
        c = _case(name)
        return c.build(c.resolve(lookups.parse_sets(list(items), c)))

    model, _ = built("rolling-ball-pendulum", f"azimuth={math.pi / 2}")
    np.testing.assert_allclose(model.rails[0].e1, [0.0, 1.0, 0.0], atol=1e-16)
    model, _ = built("rolling-ball-linear-rail", "half_length=0.3")
    np.testing.assert_array_equal(model.rails[0].end, [0.3, 0.0, 0.0])
    model, _ = built("rolling-ball-figure-eight", "speed=2")
    np.testing.assert_array_equal(model.control.rate, [2.0])
    _, state0 = built("rolling-ball-passive", "theta1=-1")
    np.testing.assert_array_equal(state0.theta[0], -1.0)
    model, state0 = built("rolling-disk", "d2=0.7", "phi_dot0=2")
    assert float(model.inertia[1, 1]) == 0.7 and float(state0.Omega[1]) == -2.0
    model, state0 = built("suslov", "xi1=1", "Omega1=5")  # Ω is projected onto ξ⊥
    assert abs(float(jnp.dot(state0.Omega, model.xi))) < 1e-15

    assert cli.main(["cases", "rolling-ball-two-circles"]) == 0
    text = capsys.readouterr().out
    for name in ("amplitude", "frequency", "phase1", "phase2", "m1", "m2", "rail_radius", "chi03"):
        assert f"  {name} " in text
    assert "RKMK4" in text and "10 (1000 steps)" in text


@pytest.fixture
def registered(monkeypatch):
    """RKMK2/4/8 in the registry (a no-op once `jaxrigid.integrators` registers them)."""
    if "RKMK4" not in [cls.name for cls in integrators.REGISTRY]:
        monkeypatch.setattr(integrators, "REGISTRY", integrators.REGISTRY + RKMK_CLASSES)


def test_run_json_of_two_circles(registered, tmp_path):
    """`jaxrigid run rolling-ball-two-circles --t-end 1 --ensemble 4 --json`: per member, the
    centre x with three components and x₃ = r, a unit q, the energy (an observable: the
    masses work on the ball) and the contact observables (N > 0, finite friction); the
    `.npz`, `.csv` and plot are written."""
    stdout = io.StringIO()
    args = ["run", "rolling-ball-two-circles", "--t-end", "1", "--ensemble", "4", "--json"]
    with contextlib.redirect_stdout(stdout):
        rc = cli.main(args + ["--out", str(tmp_path)])
    assert rc == 0
    report = json.loads(stdout.getvalue())
    assert report["method"] == "RKMK4" and report["n_steps"] == 100
    x, q = np.asarray(report["final_state"]["x"]), np.asarray(report["final_state"]["q"])
    assert x.shape == (4, 3) and q.shape == (4, 4)
    assert np.all(x[:, 2] == report["parameters"]["radius"])
    assert np.all(np.abs(np.linalg.norm(q, axis=-1) - 1.0) < 1e-14)
    obs = report["observables"]
    assert "energy" not in report["invariants"] and len(obs["energy"]["final"]) == 4
    assert CONTACT <= set(obs)
    assert np.all(np.asarray(obs["min_normal_force"]) > 0)
    assert np.all(np.isfinite(obs["max_friction_needed"]))
    assert (tmp_path / "rolling-ball-two-circles.npz").exists()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "rolling-ball-two-circles.png").exists()  # energy, contact path


def test_passive_ball_keeps_its_energy():
    """`rolling-ball-passive` (dynamic masses, u = 0) over its default run (RKMK4, h = 0.01,
    t = 10): the energy is conserved by the flow, so its change is RKMK4's error: measured
    (max over t of |E(t) − E(0)|/|E(0)|) 7.5e-11, 2.2e-9, 6.9e-8 at h = 0.005, 0.01, 0.02 —
    ratios 30.0 and 30.9 per halving, O(h⁵) over t ≤ 10, one order better than the method's 4
    (as `test_rolling_ball_integrators` measures for passive motion). Bounds: 2e-8 at h = 0.01
    (9× the measured), and the ratio from h = 0.02 in [11, 45] (slope 3.5 to 5.5). The contact
    observables stay physical (N > 0)."""
    case = _case("rolling-ball-passive")
    model, state0 = case.build(case.resolve())
    n = round(case.default_t_end / case.default_dt)

    # under jit: the dynamic masses' state checks (saddle matrices) run compiled, not eagerly
    @eqx.filter_jit
    def run(model, state0, dt, n):
        return jr.simulate(RKMK4(), model, state0, dt, n, save_every=n // 100)

    drift = []
    for dt, steps in ((case.default_dt, n), (2 * case.default_dt, n // 2)):
        sol = run(model, state0, dt, steps)
        energy = np.asarray(invariants_along(model, sol.ts, sol.states)["energy"])
        drift.append(np.max(np.abs(energy - energy[0])) / abs(energy[0]))
        if dt == case.default_dt:
            obs = _observables(case, model, sol)
            assert sol.final_state.theta.shape == (2,)
    assert drift[0] < 2e-8
    assert 11 < drift[1] / drift[0] < 45
    assert obs["min_normal_force"] > 0 and obs["max_friction_needed"] < 1


def test_rolling_disk_is_the_planar_disk():
    """Along the disk case (RKMK4, t ≤ 2): the motion stays in the plane (Ω₁ = Ω₃ = 0, x₂ = 0,
    exactly), `RollingDisk`'s φ̈ and energy at (φ, φ̇ = −Ω₂) equal the 3-D ball's −Ω̇₂ and
    energy to round-off, and `disk_final_state` is (φ, φ̇, x) with x = −rφ (x(0) = φ(0) = 0)."""
    case = _case("rolling-disk")
    p = case.resolve()
    ball, state0 = case.build(p)
    assert isinstance(ball, RollingBall)
    sol = jr.simulate(RKMK4(), ball, state0, case.default_dt, 200, save_every=20)
    Om, x = np.asarray(sol.states.Omega), np.asarray(sol.states.x)
    assert np.all(Om[:, [0, 2]] == 0) and np.all(x[:, 1] == 0)
    rho = p["rail_radius"]
    disk = RollingDisk(
        p["radius"],
        p["m0"],
        p["d2"],
        (p["chi01"], p["chi03"]),
        [p["m1"]],
        [lambda th: rho * jnp.stack([jnp.cos(th), jnp.sin(th)])],
        lambda t: p["offset"] + p["amplitude"] * jnp.sin(p["frequency"] * t + p["phase"])[None],
        p["gravity"],
    )
    obs = _observables(case, ball, sol)
    phi = -x[:, 0] / p["radius"]  # rolling from x = 0, φ = 0
    for k, t in enumerate(np.asarray(sol.ts)):
        s = jax.tree_util.tree_map(lambda leaf, k=k: leaf[k], sol.states)
        want = -float(ball.omega_dot(t, s)[1])
        assert disk.phi_ddot(t, phi[k], -Om[k, 1]) == pytest.approx(want, rel=1e-12, abs=1e-12)
        e_disk = disk.energy(t, RollingDiskState(phi[k], -Om[k, 1], x[k, 0]))
        assert float(e_disk) == pytest.approx(float(ball.energy(t, s)), rel=1e-13)
    final = obs["disk_final_state"]
    assert final["phi"] == pytest.approx(phi[-1], abs=1e-9)  # q and x agree to RKMK4's error
    assert final["phi_dot"] == -Om[-1, 1] and final["x"] == x[-1, 0]
    assert CONTACT <= set(obs)


def test_ensembles_stay_on_their_constraints():
    """Member 0 is the case itself; the others differ in Ω only (the disk: in Ω₂ only);
    Suslov's members keep ⟨Ω, ξ⟩ = 0 (the command uses `perturb_with_model`)."""
    rng = lambda: np.random.default_rng(0)  # noqa: E731
    for name in NAMES:
        case = _case(name)
        model, state0 = case.build(case.resolve())
        if name == "suslov":
            members = case.perturb_with_model(model, state0, rng(), 0.1, 5)
            assert np.max(np.abs(np.asarray(members.Omega) @ np.asarray(model.xi))) < 1e-15
            scaled = case.perturb(state0, rng(), 0.1, 5)
            assert np.max(np.abs(np.asarray(scaled.Omega) @ np.asarray(model.xi))) < 1e-15
        else:
            members = case.perturb(state0, rng(), 0.1, 5)
        for field, value in state0._asdict().items():
            got = np.asarray(getattr(members, field))
            assert got.shape == (5,) + np.shape(value)
            assert np.array_equal(got[0], value)
            if field != "Omega":
                assert np.all(got == np.asarray(value))
        delta = np.asarray(members.Omega) - np.asarray(state0.Omega)
        assert np.all(np.abs(delta[1:]).max(axis=-1) > 0)
        if name == "rolling-disk":
            assert np.all(delta[:, [0, 2]] == 0)
