"""What `jaxrigid run` reports and saves (issue 34): the invariants a case conserves apart
from those it does not (`conserved_quantities`), the metadata of the `.npz` and `.csv`, and
the plot of an ensemble. Two runs of the command, each a few steps of a small ensemble."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid
from jaxrigid import cli
from jaxrigid.cases import CASES
from jaxrigid.cli import _main, output
from jaxrigid.models.director import MaterialPulseMoment
from jaxrigid.models.rigid_body import RigidBody
from jaxrigid.models.rolling_ball.controls import ConstantControl


def test_the_split_follows_the_parameters():
    """What is conserved is read from the model's fields: a load scaled to zero, a potential
    about another axis, a user's torque, masses held still, an external force, and a traced
    value (unknown: not conserved)."""
    model, state = CASES["nontwisting-case2"].build(CASES["nontwisting-case2"].resolve())
    assert model.conserved_quantities() == frozenset()
    unloaded = CASES["nontwisting-case2"].resolve({"load_scale": 0.0})
    assert CASES["nontwisting-case2"].build(unloaded)[0].conserved_quantities() is None

    top, _ = CASES["dmv-heavy-top"].build(CASES["dmv-heavy-top"].resolve())
    sideways = eqx.tree_at(lambda m: m.potential.up, top, jnp.array([1.0, 0.0, 0.0]))
    assert {"H", "pi1", "Pi_dot_Gamma"} <= sideways.conserved_quantities()
    assert "pi3" not in sideways.conserved_quantities()
    slanted = eqx.tree_at(lambda m: m.potential.up, top, jnp.array([1.0, 1.0, 0.0]))
    assert not {"pi1", "pi2", "pi3"} & slanted.conserved_quantities()
    torqued = RigidBody(jnp.eye(3), torque=lambda t, R, Pi: jnp.zeros(3))
    assert torqued.conserved_quantities() == {"RtR_error"}

    ball, _ = CASES["rolling-ball-pendulum"].build(CASES["rolling-ball-pendulum"].resolve())
    held = eqx.tree_at(lambda m: m.control, ball, ConstantControl(jnp.array([0.3])))
    assert "energy" in held.conserved_quantities()
    pushed = eqx.tree_at(lambda m: m.external_force, held, jnp.array([0.1, 0.0, 0.0]))
    assert "energy" not in pushed.conserved_quantities()
    passive, _ = CASES["rolling-ball-passive"].build(CASES["rolling-ball-passive"].resolve())
    pushed = eqx.tree_at(lambda m: m.external_force, passive, jnp.array([0.1, 0.0, 0.0]))
    assert "energy" not in pushed.conserved_quantities()

    # a traced value is not known, so what it decides is not conserved
    found = []
    jax.eval_shape(lambda a: found.append(MaterialPulseMoment(a).vanishes()), jnp.zeros(2))
    assert found == [False] and MaterialPulseMoment(jnp.zeros(2)).vanishes()
    with_up = lambda up: eqx.tree_at(lambda m: m.potential.up, top, up)  # noqa: E731
    jax.eval_shape(lambda up: found.append(with_up(up).conserved_quantities()), jnp.ones(3))
    assert "H" in found[-1] and not {"pi1", "pi2", "pi3"} & found[-1]
    assert "pi3" in with_up(jnp.array([0.0, 0.0, 2.0])).conserved_quantities()


def _run(args, out):
    """`jaxrigid run ARGS --json --out OUT`: the JSON, and stdout's lines as the summary
    prints them from it (`print_summary`)."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), jax.numpy_rank_promotion("allow"):
        assert cli.main(["run", *args, "--json", "--out", str(out)]) == 0
    report = json.loads(stdout.getvalue())
    summary = io.StringIO()
    with contextlib.redirect_stdout(summary):
        output.print_summary(report, types.SimpleNamespace(all_converged=True), [])
    return report, summary.getvalue().splitlines()


def _csv(path):
    """`(comment lines, column names, table)` of a run's `.csv`."""
    lines = path.read_text().splitlines()
    comments = [line for line in lines if line.startswith("#")]
    header = lines[len(comments)].split(",")
    return comments, header, np.loadtxt(path, delimiter=",", skiprows=len(comments) + 1)


TF_ARGS = ["krysl-torque-free", "--method", "IMIDM", "--dt", "0.01", "--t-end", "0.5"]
TF_ARGS += ["--ensemble", "3", "--seed", "5", "--set", "Omega1=0.5"]


@pytest.fixture(scope="module")
def torque_free(tmp_path_factory):
    out = tmp_path_factory.mktemp("torque_free")
    return (*_run(TF_ARGS, out), out)


def test_a_torque_free_body_conserves_all_its_invariants(torque_free):
    """krysl-torque-free keeps `K`, `H`, `π` and `RᵀR = 1`: all are invariants, none is an
    observable. IMIDM keeps `π = RΠ` and `RᵀR` to round-off (50 steps: ~1e-15); its energy
    error is O(Δt²) and bounded, measured 3e-9 relative over t = 1 at Δt = 0.01: below
    1e-7 with a margin of 30."""
    report, summary, _ = torque_free
    assert set(report["invariants"]) == {"K", "H", "pi1", "pi2", "pi3", "pi_norm", "RtR_error"}
    assert report["observables"] == {}
    drift = {k: np.asarray(v["max_abs_drift"]) for k, v in report["invariants"].items()}
    assert all(d.shape == (3,) for d in drift.values())
    for name in ("pi1", "pi2", "pi3", "pi_norm", "RtR_error"):
        assert drift[name].max() < 1e-13, name
    for name in ("K", "H"):
        assert np.all(drift[name] < 1e-7 * np.abs(report["invariants"][name]["initial"]))
    assert summary[1].startswith("max |drift| of invariants: H ")
    assert not any(line.startswith("range of observables") for line in summary)


def test_the_saved_files_carry_the_runs_metadata(torque_free):
    """The `.npz` (entry `metadata`, a JSON string) and the `.csv` (its last comment line)
    carry the same metadata: the command's arguments, the resolved parameters, the ensemble's
    seed and spread, the versions; its `command` repeats the run (parsed by the command's own
    parser, without `--out`). The `.npz` keeps its arrays' names; the `.csv` is member 0's."""
    report, _, out = torque_free
    with np.load(out / "krysl-torque-free.npz") as z:
        assert set(z.files) == {"t", "R", "Pi", "metadata"}
        meta = json.loads(z["metadata"].item())
        t = z["t"]
    expected = {
        "case": "krysl-torque-free",
        "method": "IMIDM",
        "dt": 0.01,
        "t_end": 0.5,
        "n_steps": 50,
        "save_every": 1,
        "n_saved": 51,
        "ensemble": 3,
        "seed": 5,
        "spread": CASES["krysl-torque-free"].ensemble_spread,
        "conserved": list(report["invariants"]),
        "not_conserved": [],
        "dtype": "float64",
        "versions": {"jaxrigid": jaxrigid.__version__, "jax": jax.__version__},
    }
    assert {k: meta[k] for k in expected} == expected
    assert meta["parameters"] == report["parameters"] and meta["parameters"]["Omega1"] == 0.5
    args = _main._parser().parse_args(shlex.split(meta["command"])[1:])
    assert (args.case, args.method, args.dt, args.t_end) == (
        "krysl-torque-free",
        "IMIDM",
        0.01,
        0.5,
    )
    assert (args.ensemble, args.seed, args.set, args.out) == (3, 5, ["Omega1=0.5"], "jaxrigid-out")

    comments, header, table = _csv(out / "krysl-torque-free_invariants.csv")
    assert "ensemble member 0 of 3" in comments[0]
    assert comments[-1].startswith("# metadata: ")
    assert json.loads(comments[-1].removeprefix("# metadata: ")) == meta
    assert header == ["t", *report["invariants"]]
    np.testing.assert_array_equal(table[:, 0], t)
    K0 = report["invariants"]["K"]["initial"][0]
    np.testing.assert_allclose(table[0, header.index("K")], K0, rtol=1e-15)
    assert (out / "krysl-torque-free.png").stat().st_size > 0


BALL_ARGS = ["rolling-ball-pendulum", "--t-end", "0.5", "--ensemble", "3"]


def test_a_driven_ball_reports_its_energy_as_an_observable(tmp_path):
    """rolling-ball-pendulum, its mass swung by a prescribed control: the energy is not
    conserved, so it is an observable (its range, per member) with the work the actuators
    did; the invariants are the constraint errors, kept to round-off (RKMK4 moves `q` by
    exponentials, and `ẋ₃ = 0`). Along the exact flow `E(t) − E(0) = W(t)`: RKMK4's O(Δt⁴)
    energy error and the O(Δt⁴) quadrature of `W` (Δt = 0.01) leave 8.5e-8 of the change
    (measured; 1.3e-6 at Δt = 0.02, 5.4e-9 at 0.005: fourth order), the bound 1e-6. The
    summary's two lines; the `.csv` holds the observables after the invariants; the
    ensemble's plot is written."""
    report, summary = _run(BALL_ARGS, tmp_path)
    assert set(report["invariants"]) == {"quaternion_norm_error", "height_error"}
    for name, v in report["invariants"].items():
        assert np.max(v["max_abs_drift"]) < 1e-14, name
    obs = report["observables"]
    assert {"energy", "actuator_work", "min_normal_force", "max_friction_needed"} <= set(obs)
    energy, work = obs["energy"], obs["actuator_work"]
    assert set(energy) == set(work) == {"initial", "final", "min", "max"}
    assert np.shape(energy["min"]) == (3,)
    assert np.all(np.less_equal(energy["min"], energy["initial"]))
    assert np.all(np.less_equal(energy["initial"], energy["max"]))
    change = np.subtract(energy["final"], energy["initial"])
    assert np.all(np.abs(change) > 1e-3)  # the swing works on the ball
    np.testing.assert_allclose(work["final"], change, rtol=1e-6)
    assert work["initial"] == [0.0, 0.0, 0.0]
    assert summary[1].startswith("max |drift| of invariants: height_error ")
    assert summary[2].startswith("range of observables: energy [")
    assert "actuator_work [" in summary[2]

    comments, header, _ = _csv(tmp_path / "rolling-ball-pendulum_invariants.csv")
    assert header == ["t", *report["invariants"], "energy", "actuator_work"]
    assert comments[1].endswith(": height_error, quaternion_norm_error")
    assert comments[2].endswith(": energy, actuator_work")
    assert (tmp_path / "rolling-ball-pendulum.png").stat().st_size > 0


def test_the_phases_after_the_run_are_reported_off_a_terminal(tmp_path):
    """Off a terminal (a log, a pipe), what follows the run — evaluating the invariants and
    observables, writing the files — is a line when it starts and one with its time when it
    ends, so a log shows what a silent stretch was spent on; stdout keeps the JSON alone."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        assert cli.main(["run", *TF_ARGS, "--json", "--out", str(tmp_path)]) == 0
    json.loads(stdout.getvalue())
    lines = stderr.getvalue().splitlines()
    for desc in ("invariants and observables along the run", f"writing {tmp_path}"):
        assert f"{desc} ..." in lines
        (done,) = [line for line in lines if line.startswith(f"{desc}: ")]
        assert done.endswith(" s") and float(done.split(": ")[-1][:-2]) >= 0
