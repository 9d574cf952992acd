"""The `jaxrigid` command (DESIGN.md, "The `jaxrigid` command"), run in-process."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxrigid import cli, integrators, runs
from jaxrigid.cases import CASES
from jaxrigid.runs import planning

TF = "krysl-torque-free"
KEYS = {
    "case",
    "method",
    "dt",
    "t_end",
    "n_steps",
    "ensemble",
    "parameters",
    "final_state",
    "invariants",
    "observables",
    "newton",
    "compile_seconds",
    "run_seconds",
}


def _run(args, out):
    """`main(["run", *args, "--json", "--out", out])`: (exit status, JSON, stderr)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli.main(["run", *args, "--json", "--out", str(out)])
    text = stdout.getvalue()
    return rc, (json.loads(text) if rc == 0 else text), stderr.getvalue()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    out = tmp_path_factory.mktemp("base")
    rc, report, _ = _run([TF, "--t-end", "1", "--dt", "0.01"], out)
    assert rc == 0
    return report, out


def test_cases_lists_the_krysl_cases(capsys):
    assert cli.main(["cases"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = {line.split()[0] for line in lines}
    assert {TF, "krysl-slow-top", "krysl-fast-top", "krysl-coulomb-wall"} <= names
    assert len(lines) == len(names)


def test_case_detail_shows_parameters(capsys):
    assert cli.main(["cases", "KRYSL-fast-top"]) == 0
    text = capsys.readouterr().out
    for word in ("Ω0 = (0, 0, 50)", "Krysl", "IMIDM", "0.001", "mgl", "Omega3", "psi1", "I11"):
        assert word in text
    assert "body inertia, entry 11" in text


def test_methods_lists_integrators_and_cases(capsys):
    assert cli.main(["methods"]) == 0
    text = capsys.readouterr().out
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}
    assert {"IMIDM", "TRAPM", "SWC1", "MKRK-gauss4"} <= set(lines)
    assert "implicit" in lines["IMIDM"] and "explicit" in lines["fE"]
    assert TF in text and "krysl-coulomb-wall" in text


def test_run_json_report_and_files(base):
    report, out = base
    assert set(report) == KEYS
    assert report["case"] == TF and report["method"] == "IMIDM"
    assert report["n_steps"] == 100 and report["t_end"] == pytest.approx(1.0)
    assert report["ensemble"] is None and report["parameters"]["I11"] == 0.9144
    assert np.shape(report["final_state"]["R"]) == (3, 3)
    assert np.shape(report["final_state"]["Pi"]) == (3,)
    assert set(report["invariants"]["K"]) == {"initial", "final", "max_abs_drift"}
    assert set(report["newton"]) == {"max_iterations", "max_residual", "all_converged"}
    assert report["newton"]["all_converged"] is True
    assert report["compile_seconds"] >= 0 and report["run_seconds"] >= 0
    for name in (f"{TF}.npz", f"{TF}_invariants.csv", f"{TF}.png"):
        assert (out / name).stat().st_size > 0
    with np.load(out / f"{TF}.npz") as z:
        assert z["t"].shape == (101,) and z["R"].shape == (101, 3, 3)
        assert z["Pi"].shape == (101, 3)
        np.testing.assert_allclose(z["Pi"][-1], report["final_state"]["Pi"], rtol=0, atol=0)
    lines = (out / f"{TF}_invariants.csv").read_text().splitlines()
    comments = [line for line in lines if line.startswith("#")]  # then the header, the rows
    assert lines[0].startswith("#")
    assert lines[len(comments)].split(",") == ["t", *report["invariants"]]
    assert len(lines) == len(comments) + 1 + 101


def test_imidm_conserves_spatial_momentum(base):
    # Torque-free IMIDM updates R_n = R_{n-1} exp(Ψ) and Π_n = exp(−Ψ) Π_{n-1} with the same
    # Ψ, so π = RΠ is unchanged by every step up to round-off.
    report, _ = base
    for name in ("pi1", "pi2", "pi3"):
        assert report["invariants"][name]["max_abs_drift"] < 1e-12


def test_set_overrides_a_parameter(base, tmp_path):
    rc, report, _ = _run([TF, "--t-end", "1", "--dt", "0.01", "--set", "I11=1.0"], tmp_path)
    assert rc == 0 and report["parameters"]["I11"] == 1.0
    diff = np.subtract(report["final_state"]["Pi"], base[0]["final_state"]["Pi"])
    assert np.max(np.abs(diff)) > 1e-4
    assert report["invariants"]["K"]["initial"] != base[0]["invariants"]["K"]["initial"]


def test_lower_case_method_name(base, tmp_path):
    rc, report, _ = _run([TF, "--t-end", "1", "--dt", "0.01", "--method", "imidm"], tmp_path)
    assert rc == 0 and report["method"] == "IMIDM"
    assert report["final_state"] == base[0]["final_state"]


def test_chunked_ensemble(base, tmp_path, monkeypatch):
    # Four chunks of 25 steps, saving every 5th state: one compilation for both the chunking
    # and the ensemble (the test's time budget).
    monkeypatch.setattr(planning, "CHUNK_STEPS", 25)
    monkeypatch.setattr(planning, "MAX_SAVES", 20)
    assert cli.plan_chunks(100) == [(25, 5)] * 4
    args = [TF, "--t-end", "1", "--dt", "0.01", "--ensemble", "3", "--seed", "1"]
    # The command runs with JAX's default rank promotion ("allow"); conftest's "raise" trips
    # on so3.orthogonality_error of a batched R (`(n, 3, 3) - eye(3)`) in simulate's checks.
    with jax.numpy_rank_promotion("allow"):
        rc, report, _ = _run(args, tmp_path)
    assert rc == 0 and report["ensemble"] == 3 and report["n_steps"] == 100
    Pi = np.asarray(report["final_state"]["Pi"])
    assert Pi.shape == (3, 3) and np.shape(report["final_state"]["R"]) == (3, 3, 3)
    # member 0 is the unperturbed case
    np.testing.assert_allclose(Pi[0], base[0]["final_state"]["Pi"], rtol=0, atol=1e-12)
    assert np.max(np.abs(Pi[1] - Pi[0])) > 1e-6
    assert len(report["invariants"]["pi1"]["max_abs_drift"]) == 3
    with np.load(tmp_path / f"{TF}.npz") as z, np.load(base[1] / f"{TF}.npz") as ref:
        assert z["R"].shape == (3, 21, 3, 3) and z["Pi"].shape == (3, 21, 3)
        np.testing.assert_allclose(z["t"], ref["t"][::5], rtol=0, atol=1e-14)
        np.testing.assert_allclose(z["Pi"][0], ref["Pi"][::5], rtol=0, atol=1e-12)
    header = (tmp_path / f"{TF}_invariants.csv").read_text().splitlines()[0]
    assert "member 0 of 3" in header


def _fake_family(monkeypatch):
    monkeypatch.setitem(integrators.METHODS_BY_FAMILY, "other", {"FAKE": lambda: None})


@pytest.mark.parametrize(
    "args, valid",
    [
        (["run", "nope"], "krysl-torque-free"),
        (["cases", "nope"], "krysl-coulomb-wall"),
        (["run", TF, "--method", "nope"], "IMIDM"),
        (["run", TF, "--method", "fake"], "IMIDM"),  # a method of another family
        (["run", TF, "--dt", "0"], "positive"),
        (["run", TF, "--dt", "nan"], "positive"),
        (["run", TF, "--t-end", "-1"], "positive"),
        (["run", TF, "--ensemble", "0"], "positive"),
        (["run", TF, "--set", "nope=1"], "Omega1"),
        (["run", TF, "--set", "I11=abc"], "number"),
        (["run", TF, "--set", "I11"], "NAME=VALUE"),
        (["run", TF, "--set", "I11=-1"], "positive definite"),
        (["run", TF, "--t-end", "1", "--dt", "0.3"], "--t-end 1 is not a whole number of "),
        (["run", TF, "--t-end", "1", "--dt", "0.3"], "; nearest valid: 0.9 or 1.2"),
        (["run", TF, "--t-end", "0.001", "--dt", "0.01"], "shorter than one step of --dt 0.01"),
        (["run", TF, "--t-end", "0.001"], "nearest valid: 0.01"),  # the case's dt
        (["run", "kepler", "--dt", "0.03"], "default --t-end 200 of case kepler is not"),
        (["run", "kepler", "--dt", "0.03"], "nearest valid: 199.98 or 200.01"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, valid, capsys, tmp_path, monkeypatch):
    _fake_family(monkeypatch)
    if args[0] == "run":
        args = args + ["--out", str(tmp_path)]
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxrigid: error: ")
    assert valid in lines[0]


COULOMB_FAILS = ["krysl-coulomb-wall", "--set", "coulomb=-1", "--set", "wall=0.001"]


def test_newton_failure_is_reported_not_raised(tmp_path):
    rc, report, err = _run([*COULOMB_FAILS, "--t-end", "10"], tmp_path)
    assert rc == 0 and report["n_steps"] == 20 and report["dt"] == 0.5
    assert set(report["newton"]) == {"max_iterations", "max_residual", "all_converged"}
    assert report["newton"]["all_converged"] is False
    assert report["newton"]["max_iterations"] > 1
    # the potential turns the body about e3 only: K, π₁, π₂ and |π| vary (their range)
    assert set(report["observables"]) == {"u_min", "u_max", "K", "pi1", "pi2", "pi_norm"}
    assert set(report["invariants"]) == {"H", "pi3", "RtR_error"}
    assert "warning: some steps failed (first at step 3, t = 1.5: off_branch;" in err


def test_summary_names_the_failure_cause(tmp_path, capsys):
    """Step 3 of this run lands Newton on a root that is not continuous in dt (the wall's
    stiff torque): the summary names the cause and its advice."""
    from jaxrigid.results import RESULTS

    assert cli.main(["run", *COULOMB_FAILS, "--t-end", "10", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Newton: SOME FAILED" in out
    assert "first failed step: 3 (t = 1.5), off_branch" in out
    assert RESULTS.off_branch.advice in out


def test_human_summary(base, tmp_path, capsys):
    assert cli.main(["run", TF, "--t-end", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "IMIDM" in out and "100 steps" in out and "wrote" in out


def test_module_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrigid", "cases"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert TF in proc.stdout


def test_hamiltonian_case_runs_with_its_own_state_names(tmp_path):
    """A case of another family: final_state is named after its state (q, p), and Gauss4
    keeps Kepler's angular momentum L to round-off (a quadratic invariant; 1e-13 over 40
    steps of rounding)."""
    rc, report, _ = _run(["kepler", "--method", "gauss4", "--t-end", "2"], tmp_path)
    assert rc == 0 and set(report["final_state"]) == {"q", "p"}
    assert report["invariants"]["L"]["max_abs_drift"] < 1e-13
    assert (tmp_path / "kepler.png").stat().st_size > 0


def test_torque_free_only_method_is_refused_for_a_torqued_case(tmp_path, capsys):
    rc = cli.main(["run", "krysl-coulomb-wall", "--method", "DMV-body", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "torque-free" in err[0] and "IMIDM" in err[0] and "DMV-body" not in err[0].split(":")[-1]


@pytest.fixture(scope="module")
def built():
    """`{case: [(model, state0) of each form]}` from the defaults (building checks values
    eagerly, which compiles small programs: once for the module)."""
    return {n: [form(c.resolve()) for form in c.forms()] for n, c in CASES.items()}


def test_the_methods_of_a_case_are_those_that_integrate_its_model(built):
    """Each case's valid methods (named in the error for an unknown one) are the registered
    methods whose `integrates` takes the case's model, in registry order, and include its
    default method."""
    from jaxrigid.cli import lookups
    from jaxrigid.cli.errors import UsageError

    for case in CASES.values():
        # every form's model (the chain's quaternions and rotation matrices), registry order
        models = [model for model, _ in built[case.name]]
        names = [c.name for c in integrators.REGISTRY if any(c().integrates(m) for m in models)]
        expected = list(dict.fromkeys(names))
        if len(models) == 1:
            assert expected == integrators.methods_for(models[0])
        assert list(lookups.applicable_methods(case)) == expected == case.methods()
        assert case.default_method in expected
        valid = re.escape("valid methods: " + ", ".join(expected)) + "$"
        with pytest.raises(UsageError, match=valid):
            lookups.find_method("nope", case)


def _printed_applicability(text: str) -> dict[tuple[str, str], list[str]]:
    """`{(family, method): case names}` as `jaxrigid methods` prints them: the family's
    `apply to` list, or the row's own `[only: ...]`."""
    names = lambda s: [] if s == "no built-in case" else s.split(", ")  # noqa: E731
    table, family, cases = {}, None, []
    for line in text.splitlines():
        header = re.fullmatch(r"(\w+) methods \(apply to: (.*)\):", line)
        if header:
            family, cases = header[1], names(header[2])
        elif line.startswith("composition schemes"):
            break
        elif family and line.startswith("  "):
            only = re.search(r" \[only: (.*)\]$", line)
            table[family, line.split()[0]] = names(only[1]) if only else cases
    return table


def test_methods_builds_no_model_and_prints_what_the_built_models_say(built, monkeypatch, capsys):
    """`jaxrigid methods` builds no model and lowers or compiles no XLA program (it asks
    `integrates` of the stand-ins the cases' forms state, `builds`), and prints what the
    built models say: every registered method answers alike for each form's stand-in and its
    built model, and each printed row lists exactly the cases one of whose built models has a
    structure of the row's family and is integrated by the method (Gauss6 is listed with the
    canonical systems and with the chains, each with its own)."""
    from jaxrigid.cases import base

    built = {n: [model for model, _ in forms] for n, forms in built.items()}
    methods = [factory() for factory in integrators.REGISTRY]
    for name, case in CASES.items():
        assert all(hasattr(form, "sketch") for form in case.forms()), name
        for sketch, model in zip(case.sketches(), built[name], strict=True):
            for method in methods:
                assert method.integrates(sketch) == method.integrates(model), (name, method)

    events = []
    counted = ("/jax/core/compile/jaxpr_to_mlir_module_duration",)
    counted += ("/jax/core/compile/backend_compile_duration",)

    def listen(event, duration, **kwargs):
        if event in counted:
            events.append(event)

    def no_build(self):
        raise AssertionError(f"case {self.name} built its models")

    monkeypatch.setattr(base.Case, "models", no_build)
    jax.clear_caches()  # a program compiled earlier in this process would be reused unseen
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        assert cli.main(["methods"]) == 0
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert events == []

    def listed(family, cls):  # the cases with a model of the family that `cls` integrates
        structures = integrators.family_structures(family)
        return [
            n
            for n, models in built.items()
            if any(isinstance(m, structures) and cls().integrates(m) for m in models)
        ]

    expected = {
        (family, name): listed(family, cls)
        for family, family_methods in integrators.METHODS_BY_FAMILY.items()
        for name, cls in family_methods.items()
    }
    assert _printed_applicability(capsys.readouterr().out) == expected


def test_applicability_is_asked_of_the_method(monkeypatch, capsys):
    """Which cases a method applies to, and the command's words when it does not, follow its
    one hook `requires`: DMV-body made to refuse the heavy top (its other facts unchanged) is
    refused for the heavy-top cases in the hook's words and listed for the free-body cases
    only."""
    from jaxrigid.cli import lookups
    from jaxrigid.cli.errors import UsageError
    from jaxrigid.integrators.dmv import DMVBody

    def free_body_only(self, model):
        narrowed = getattr(model, "has_torque", False)  # the coupled bodies have no torque
        return "it integrates the free body only (narrowed)" if narrowed else None

    monkeypatch.setattr(DMVBody, "requires", free_body_only)
    free = ["krysl-torque-free", "dmv-free-body-symmetric", "dmv-free-body-asymmetric"]
    coupled = ["dmv-coupled-right-angle", "dmv-coupled-aligned"]
    with pytest.raises(
        UsageError,
        match=r"DMV-body does not apply to case dmv-heavy-top \(it integrates the free body "
        r"only \(narrowed\)\)",
    ):
        lookups.find_method("dmv-body", CASES["dmv-heavy-top"])
    assert lookups.find_method("dmv-body", CASES[free[0]])[0] == "DMV-body"
    assert cli.main(["methods"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "DMV-body " in line]
    # the one DMV-body, in its two families, each with its own cases: the free bodies (no
    # heavy top), and every coupled case (the family's own list, no `[only: ...]`)
    assert len(rows) == 2
    assert rows[0].endswith(f"[only: {', '.join(free)}]"), rows
    assert f"coupled_bodies methods (apply to: {', '.join(coupled)}):" in out
    assert "[only:" not in rows[1], rows
    # what it keeps on each family's models: the energy on a body, not on coupled bodies
    assert "keeps K,RtR_error,pi " in rows[0] and "keeps RtR_error,pi " in rows[1], rows


def test_dmv_runs_on_krysl_heavy_tops(tmp_path):
    """Krysl's tops are heavy tops (uniform gravity), so the DMV methods apply to them."""
    rc, report, _ = _run(["krysl-fast-top", "--method", "DMV-spatial", "--t-end", "0.1"], tmp_path)
    assert rc == 0 and report["method"] == "DMV-spatial"
    assert report["newton"]["all_converged"]


def test_decimal_t_end_runs_to_it(tmp_path):
    rc, report, _ = _run([TF, "--t-end", "0.3", "--dt", "0.1"], tmp_path)
    assert rc == 0 and report["n_steps"] == 3 and report["t_end"] == 0.3


def test_chunks_continue_the_solver_state(tmp_path, monkeypatch):
    """The command integrates its chunk plan by `runs.run_chunks`, each chunk continuing the
    last one's state and solver state (MKRK-gauss4's stage slopes, Newton's warm start):
    before, every chunk restarted the solver state. Its saved states, final state and Newton
    counts are the library run's bit for bit (the same programs), and that run is one
    `simulate` call continued (tests/test_runs.py)."""
    monkeypatch.setattr(planning, "CHUNK_STEPS", 20)
    monkeypatch.setattr(planning, "MAX_SAVES", 10)
    plan = cli.plan_chunks(60)
    assert len(plan) > 1
    case, integrator = "krysl-slow-top", integrators.get_method("MKRK-gauss4")
    model, state0 = CASES[case].build_for(integrator)(CASES[case].resolve())
    with jax.numpy_rank_promotion("allow"):  # the command's setting (test_chunked_ensemble)
        args = [case, "--method", "MKRK-gauss4", "--t-end", "0.6", "--dt", "0.01"]
        rc, report, _ = _run(args, tmp_path)
        assert rc == 0 and report["n_steps"] == 60
        run = runs.run_chunks(integrator, model, state0, 0.01, plan)
    np.testing.assert_array_equal(report["final_state"]["Pi"], run.final_state.Pi)
    assert report["newton"]["max_iterations"] == np.max(run.outcome.max_iterations)
    with np.load(tmp_path / f"{case}.npz") as z:
        np.testing.assert_array_equal(z["t"], run.ts)
        np.testing.assert_array_equal(z["Pi"], run.states.Pi)


TOP = {"K", "pi1", "pi2", "pi_norm"}  # what gravity or a one-axis potential changes
CHAIN = {f"{n}{i}" for n in ("momentum", "angular_momentum") for i in (1, 2, 3)}
DRIVEN = {"energy"}
# the invariants each case does not conserve: its exact flow changes them (a potential's
# torque, a load, a driving, a held body)
VARYING = {
    "krysl-slow-top": TOP,
    "krysl-fast-top": TOP,
    "krysl-coulomb-wall": TOP,
    "dmv-heavy-top": TOP,
    "nontwisting-case2": {"K", "Pi1", "Pi2", "Pi3"},
    "nontwisting-case3": {"K", "Pi1", "Pi2", "Pi3"},
    "symmetric-top-rattle": {"K", "pi1", "pi2"},
    "rolling-ball-pendulum": DRIVEN,
    "rolling-ball-two-circles": DRIVEN,
    "rolling-ball-linear-rail": DRIVEN,
    "rolling-ball-figure-eight": DRIVEN,
    "rolling-disk": DRIVEN,
    "chain-tetrahedra-c1c1": CHAIN,
    "chain-tetrahedra-c1c2": CHAIN,
    "chain-tetrahedra-c1c3": CHAIN,
}  # every other case conserves all of its model's invariants


def _invariant_names(model, state) -> set[str]:
    """The names of `model.invariants` (abstractly evaluated: nothing compiled)."""
    return set(jax.eval_shape(lambda s: model.invariants(0.0, s), state))


def test_every_case_conserves_what_its_physics_does(built):
    """The split of every form of every case (`conserved_quantities`, issue 34): the names
    conserved are invariants of its model, and the others are what a torque, a load, a
    driving or a held body changes (`VARYING`)."""
    for name, forms in built.items():
        for model, state in forms:
            names = _invariant_names(model, state)
            kept = model.conserved_quantities()
            kept = names if kept is None else kept
            assert kept <= names, name
            assert names - kept == VARYING.get(name, set()), name
