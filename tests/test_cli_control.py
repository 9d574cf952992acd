"""`jaxrigid control PROBLEM` (issue 14): the contract of a short run (few iterations, coarse
step) — files, array shapes, JSON fields — its verdict (issue 32: `converged`, exit status
`NOT_CONVERGED` when the target is missed), and bad input (one line, exit status 2)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import threading

import numpy as np
import pytest
from jax._src import monitoring

from jaxrigid import cli
from jaxrigid.cli import control_setup
from jaxrigid.cli.control import NOT_CONVERGED
from jaxrigid.control import presets

KEYS = {
    "problem",
    "method",
    "dt",
    "iterations",
    "starts",
    "cost_initial",
    "cost_final",
    "final_x",
    "miss",
    "resimulated_miss",
    "tolerance",
    "converged",
    "seconds",
    "total_seconds",
}
SHORT_RUN = ["reach-point", "--iterations", "4", "--starts", "2", "--dt", "0.25"]


def _control(args):
    """`main(["control", *args])`: (exit status, stdout, stderr)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli.main(["control", *args])
    return rc, stdout.getvalue(), stderr.getvalue()


# a lowering is what every program built anew costs, even one whose executable then comes
# from the persistent cache (shape checks trace, `eval_shape`, but never lower)
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_OPTIMUM_RUN_LOWERINGS: list[int] = []  # in each of the main thread's runs of the optimum


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """reach-point, 2 starts × 4 iterations at dt = 0.25 (20 steps), as JSON: far too few
    iterations to reach the target within 1e-3, so the command exits `NOT_CONVERGED`
    (`test_not_converged`). Records the programs lowered by the runs of the optimum after
    the optimiser (`test_the_optimums_runs_were_built_beside_the_optimiser`)."""
    lowerings: list[str] = []
    listener = lambda name, *a, **kw: lowerings.append(name) if name == _LOWER else None  # noqa: E731
    dense = control_setup.dense

    def counted(*args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            return dense(*args, **kwargs)  # the prebuild's
        before = len(lowerings)
        out = dense(*args, **kwargs)
        _OPTIMUM_RUN_LOWERINGS.append(len(lowerings) - before)
        return out

    out = tmp_path_factory.mktemp("control")
    args = [*SHORT_RUN, "--method", "rkmk4", "--out", str(out), "--json"]
    monitoring.register_event_duration_secs_listener(listener)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(control_setup, "dense", counted)
            rc, stdout, stderr = _control(args)
    finally:
        monitoring.unregister_event_duration_listener(listener)
    assert rc in (0, NOT_CONVERGED), stderr
    return json.loads(stdout), stderr, out, rc


def test_the_optimums_runs_were_built_beside_the_optimiser(short_run):
    # the two runs of the optimum (RKMK4, then DLA at dt/4) reuse the programs a thread built
    # while the optimiser ran: not one lowered after it (a committed optimum against an
    # uncommitted initial guess would build both again)
    assert _OPTIMUM_RUN_LOWERINGS == [0, 0]


def test_json_report(short_run):
    """One JSON object with the issue's fields; `iterations` counts the L-BFGS iterations
    (`--iterations 4`: one outer iteration of 4, fewer than the problem's 25 inner), the
    re-simulation uses DLA at dt/4, the miss is the distance of `final_x` to (1, 0.5)."""
    report, _, _, _ = short_run
    assert KEYS <= set(report)
    assert report["problem"] == "reach-point" and report["method"] == "RKMK4"
    assert report["dt"] == 0.25 and report["starts"] == 2 and report["iterations"] == 4
    assert report["resimulation"] == {"method": "DLA", "dt": 0.0625}
    assert len(report["final_x"]) == 3
    miss = np.hypot(report["final_x"][0] - 1.0, report["final_x"][1] - 0.5)
    np.testing.assert_allclose(report["miss"], miss, rtol=1e-12)
    assert report["cost_final"] >= 0 and report["seconds"] > 0
    assert report["spread"]["n_feasible"] == 0  # neither start met the target
    assert report["cost_initial"] >= 0.0
    assert np.isfinite(report["resimulated_miss"])


def test_progress_lines(short_run):
    """Progress on stderr: a `tqdm` bar (`jaxrigid.progress`). stderr is not a terminal here,
    so the bar is redrawn at most every few seconds (`\\r`-separated lines) and closing it
    writes the final line: `compiling ...` before the first iteration, then the count reaching
    4/4 with the least augmented Lagrangian of the two starts (`best L_A`, at most the best
    start's final `L_A` in the npz history) and a gradient norm; the count never exceeds 4
    (one callback per iteration holding both starts' values, one step). stdout holds the JSON
    alone."""
    _, stderr, out, _ = short_run
    bars = [line.strip() for line in stderr.splitlines() if "%|" in line]
    assert len(bars) >= 2 and stderr.endswith("\n")
    assert "0/4" in bars[0] and "compiling ..." in bars[0]
    counts = [int(re.search(r"\| (\d+)/4 \[", line).group(1)) for line in bars]
    assert counts == sorted(counts) and counts[-1] == 4
    final = re.search(r"best L_A=(\S+), \|grad\|=(\S+)\]$", bars[-1])
    assert bars[-1].startswith("reach-point: 100%|") and final, bars[-1]
    value, grad_norm = float(final.group(1)), float(final.group(2))
    with np.load(out / "reach-point.npz") as z:
        best_final = float(z["lagrangian_history"][-1])
    assert np.isfinite(value) and value <= best_final + 1e-5 * abs(best_final)
    assert np.isfinite(grad_norm) and grad_norm >= 0.0


def test_every_phase_after_the_optimiser_reports_its_time(short_run):
    """After the bar, each long step says what it does when it starts and how long it took
    when it ends (`jaxrigid.progress.phase`; stderr is no terminal: two lines each), in the
    order they run; the JSON's `total_seconds` (building, optimising, re-simulating,
    writing) covers the optimiser's `seconds`."""
    report, stderr, _, _ = short_run
    lines = [line for line in stderr.splitlines() if "%|" not in line]
    steps = [
        "reach-point: simulating the optimum (RKMK4, saved every step)",
        "reach-point: re-simulating it (DLA, dt/4)",
        "reach-point: writing reach-point.npz and the plot",
    ]
    expected = [line for step in steps for line in (step + " ...", step + ": ")]
    shown = [line for line in lines if any(line.startswith(step) for step in steps)]
    assert len(shown) == len(expected), lines
    for line, start in zip(shown, expected):
        assert line.startswith(start), (line, start)
        if start.endswith(": "):
            assert re.fullmatch(r"\d+\.\d s", line[len(start) :]), line
    assert report["total_seconds"] >= report["seconds"] > 0


def test_files(short_run):
    """`DIR/reach-point.npz`: `t` every step (21 times), `theta`, `theta_dot`, `theta_ddot`
    `(21, 2)`, `x (21, 3)`, the coefficients `(M, 2)`; the controls start at rest at −π/2;
    `x` ends at `final_x`. And the plot `DIR/reach-point.png`."""
    report, _, out, _ = short_run
    with np.load(out / "reach-point.npz") as z:
        t, theta = z["t"], z["theta"]
        np.testing.assert_allclose(t, 0.25 * np.arange(21), atol=1e-12)
        for key in ("theta", "theta_dot", "theta_ddot"):
            assert z[key].shape == (21, 2)
        assert z["x"].shape == (21, 3)
        assert z["coefficients"].ndim == 2 and z["coefficients"].shape[1] == 2
        np.testing.assert_allclose(theta[0], [-np.pi / 2] * 2, atol=1e-12)
        np.testing.assert_allclose(z["theta_dot"][0], 0.0, atol=1e-12)
        np.testing.assert_allclose(z["x"][-1], report["final_x"], rtol=1e-12)
        np.testing.assert_allclose(z["target"], [1.0, 0.5])
    png = (out / "reach-point.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_not_converged(short_run):
    """4 iterations leave reach-point's target missed by far more than its tolerance 1e-3:
    `converged` false in the JSON and in the npz (a 0-d bool), the exit status
    `NOT_CONVERGED` (3, not bad input's 2), the JSON still on stdout and the files written,
    and stderr's last line says so with the tolerance and the miss."""
    report, stderr, out, rc = short_run
    assert NOT_CONVERGED == 3 and rc == NOT_CONVERGED
    assert report["converged"] is False and report["tolerance"] == 1e-3
    assert report["infeasibility"] > 1e-3 and report["miss"] > 1e-3
    with np.load(out / "reach-point.npz") as z:
        assert z["converged"].dtype == np.bool_ and z["converged"].shape == ()
        assert not z["converged"]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("jaxrigid: error: problem reach-point: not converged")
    assert "tolerance 0.001" in last and f"{report['miss']:.3e}" in last
    assert last.endswith("exit status 3")


def test_converged_within_tolerance(short_run, monkeypatch, tmp_path):
    """The same short run judged against a tolerance above what it reached (reach-point
    rebuilt with `tolerance` = 2 × its infeasibility): the same numbers, `converged` true in
    the JSON and the npz, exit status 0 and no error line. The compiled programs are the
    first run's (the tolerance is not in them)."""
    first, _, _, _ = short_run
    tolerance = 2 * max(first["infeasibility"], first["miss"])
    build = presets.PROBLEMS["reach-point"]
    patched = lambda **options: dataclasses.replace(build(**options), tolerance=tolerance)  # noqa: E731
    monkeypatch.setitem(presets.PROBLEMS, "reach-point", patched)
    rc, stdout, stderr = _control([*SHORT_RUN, "--out", str(tmp_path), "--json"])
    assert rc == 0, stderr
    report = json.loads(stdout)
    assert report["converged"] is True and report["tolerance"] == tolerance
    assert report["infeasibility"] == first["infeasibility"] and report["miss"] == first["miss"]
    assert report["spread"]["n_feasible"] >= 1
    with np.load(tmp_path / "reach-point.npz") as z:
        assert z["converged"].dtype == np.bool_ and bool(z["converged"])
    assert "error" not in stderr


def test_text_summary(short_run, tmp_path):
    """Without `--json` the summary gives the optimiser's time and the whole command's, and
    reads the cost beside the infeasibility it was traded against (the programs are the
    first run's: the same problem in the same process)."""
    first, _, _, _ = short_run
    rc, stdout, _ = _control([*SHORT_RUN, "--method", "rkmk4", "--out", str(tmp_path)])
    assert rc == NOT_CONVERGED
    head = re.fullmatch(
        r"reach-point: RKMK4, dt = 0\.25, 4 iterations, 2 start\(s\): optimised in "
        r"(\d+\.\d) s \(building included\), (\d+\.\d) s in all",
        stdout.splitlines()[0],
    )
    assert head and float(head.group(2)) >= float(head.group(1)), stdout
    cost = re.fullmatch(
        r"cost (\S+) -> (\S+) while the infeasibility went (\S+) -> (\S+)",
        stdout.splitlines()[1],
    )
    assert cost, stdout
    # the line prints the cost to 6 significant digits (`.6g`: half a unit in the 6th, 5e-6
    # relative) and the infeasibility to 4 (`.3e`: 5e-4 relative)
    assert float(cost.group(2)) == pytest.approx(first["cost_final"], rel=1e-5)
    assert float(cost.group(4)) == pytest.approx(first["infeasibility"], rel=1e-3)
    assert float(cost.group(3)) > float(cost.group(4))  # four iterations moved towards it


def test_help_states_exit_statuses():
    """`jaxrigid control --help` names the exit statuses, `NOT_CONVERGED` among them."""
    rc, stdout, _ = _control(["--help"])
    text = " ".join(stdout.split())
    assert rc == 0
    assert f"{NOT_CONVERGED} it is not (not converged" in text
    assert "2 bad input" in text and "0 the target constraint is met" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reach-moon"], "unknown control problem 'reach-moon'; valid problems: reach-point"),
        (["reach-point", "--method", "gauss6"], "valid methods: RKMK2, RKMK4, RKMK8, DLA"),
        (["reach-point", "--dt", "0.3"], "dt must divide T = 5.0"),
        (["reach-point", "--dt", "-1"], "--dt must be a positive finite number, got -1.0"),
        (["reach-point", "--dt", "0"], "--dt must be a positive finite number, got 0.0"),
        (["reach-point", "--dt", "nan"], "--dt must be a positive finite number, got nan"),
        (["reach-point", "--dt", "inf"], "--dt must be a positive finite number, got inf"),
        (["reach-point", "--starts", "0"], "--starts must be a positive integer"),
        (["reach-point", "--iterations", "0"], "--iterations must be a positive integer"),
    ],
)
def test_bad_input(args, message, tmp_path):
    """Bad input: exit status 2, nothing on stdout, one line `jaxrigid: error: ...` saying
    what would be valid; no compilation happens first (these return at once)."""
    rc, stdout, stderr = _control([*args, "--out", str(tmp_path), "--json"])
    assert rc == 2 and stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxrigid: error: ")
    assert message in lines[0]


def test_bad_option_type(tmp_path):
    """An option that is not a number: argparse's usage error (status 2)."""
    rc, stdout, stderr = _control(["reach-point", "--iterations", "many"])
    assert rc == 2 and stdout == "" and "invalid int value: 'many'" in stderr


@pytest.mark.slow  # a full optimisation from the command line (≈ 1 min); the methods test stays
def test_dynamic_mode(tmp_path):
    """`--mode dynamic`: rail forces on free masses. The report names the mode and
    re-simulates with DLA-midpoint (the unreduced model's implicit method); the npz holds the
    forces `u (n_t, 2)`, the simulated θ, θ̇ starting at rest at −π/2, and θ̈ from the
    equations of motion, which the central differences of the saved θ̇ match (error
    h²/6·|θ⁗| at h = 0.05: under 1% of max |θ̈| here)."""
    args = ["reach-point", "--mode", "dynamic", "--iterations", "3", "--dt", "0.05"]
    rc, stdout, stderr = _control([*args, "--out", str(tmp_path), "--json"])
    assert rc == 0, stderr
    report = json.loads(stdout)
    assert KEYS <= set(report) and report["mode"] == "dynamic"
    assert report["method"] == "RKMK4"
    assert report["resimulation"] == {"method": "DLA-midpoint", "dt": 0.0125}
    with np.load(tmp_path / "reach-point.npz") as z:
        for key in ("theta", "theta_dot", "theta_ddot", "u"):
            assert z[key].shape == (101, 2), key
        np.testing.assert_allclose(z["theta"][0], [-np.pi / 2] * 2, atol=1e-12)
        np.testing.assert_allclose(z["theta_dot"][0], 0.0, atol=1e-12)
        differences = (z["theta_dot"][2:] - z["theta_dot"][:-2]) / 0.1
        scale = np.max(np.abs(z["theta_ddot"]))
        assert scale > 0
        np.testing.assert_allclose(differences, z["theta_ddot"][1:-1], rtol=0, atol=1e-2 * scale)
        np.testing.assert_allclose(z["x"][-1], report["final_x"], rtol=1e-12)
    assert (tmp_path / "reach-point.png").read_bytes()[:4] == b"\x89PNG"


def test_dynamic_mode_methods(tmp_path):
    """The reduced model's DLA does not take dynamic masses: refused, naming those that do."""
    args = ["reach-point", "--mode", "dynamic", "--method", "DLA", "--out", str(tmp_path)]
    rc, stdout, stderr = _control(args)
    assert rc == 2 and stdout == ""
    assert "valid methods: RKMK2, RKMK4, RKMK8, DLA-midpoint" in stderr
