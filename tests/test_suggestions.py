"""'Did you mean …' for misspelt names (issue 34), the version and the package's typing marker.
Fast: the names are resolved before any model is integrated or any program is compiled."""

from __future__ import annotations

import importlib.resources
import re
import tomllib
from pathlib import Path

import pytest

import jaxrigid
from jaxrigid import cli
from jaxrigid._suggest import close_names, did_you_mean
from jaxrigid.cases import CASES, get_case
from jaxrigid.control.presets import default_settings, get_problem
from jaxrigid.integrators import IMIDM, compose, get_method
from jaxrigid.observers import Reductions
from jaxrigid.sweep.spec import Sweep

TF = "krysl-torque-free"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _error(args, capsys, tmp_path) -> str:
    """`main(args)`'s one stderr line, asserting exit status 2 and nothing on stdout."""
    if args[0] in ("run", "control"):
        args = [*args, "--out", str(tmp_path)]
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return [line for line in captured.err.splitlines() if "error:" in line][-1]


def test_did_you_mean_names_up_to_three_nearest():
    assert did_you_mean("imdm", ["IMIDM", "IMID", "TRAP"]) == "; did you mean 'IMIDM' or 'IMID'?"
    # nearest first; equally near ones (Omega2, Omega3) in the order given
    names = ["I11", "Omega1", "Omega3", "Omega2", "Omega"]
    assert close_names("Omgea1", names) == ["Omega1", "Omega", "Omega3"]
    assert close_names("Omgea1", sorted(names)) == ["Omega1", "Omega", "Omega2"]
    assert did_you_mean("--ensembel", ["--ensemble", "--seed"]) == "; did you mean '--ensemble'?"
    assert did_you_mean("zzz", CASES) == ""
    assert did_you_mean("x", []) == ""


@pytest.mark.parametrize(
    ("args", "existing", "suggestion"),
    [
        (["run", "krysl-torqe-free"], "unknown case 'krysl-torqe-free'; valid cases: ", TF),
        (["cases", "krysl-torqe-free"], "valid cases: krysl-torque-free", TF),
        (["run", TF, "--method", "IMDM"], "unknown method 'IMDM' for case", "IMIDM"),
        (["run", TF, "--method", "IMIDM:yoshida"], "unknown composition scheme", "yoshida6"),
        (["run", TF, "--set", "Omgea1=0.1"], "has no parameter 'Omgea1'; valid: I11", "Omega1"),
        (["control", "reach-piont"], "valid problems: reach-point", "reach-point"),
        (["run", TF, "--ensembel", "3"], "unrecognized arguments: --ensembel 3", "--ensemble"),
        (["--no-compilaton-cache", "cases"], "unrecognized", "--no-compilation-cache"),
        (["methdos"], "invalid choice: 'methdos' (choose from", "methods"),
        (["control", "reach-point", "--mode", "dynamc"], "invalid choice: 'dynamc'", "dynamic"),
    ],
)
def test_the_command_suggests_the_nearest_name(args, existing, suggestion, capsys, tmp_path):
    """The message keeps its text and list of valid names, and ends with the suggestion."""
    line = _error(args, capsys, tmp_path)
    # argparse names the subcommand of an option's error: "jaxrigid control: error: ..."
    assert re.match(r"jaxrigid( control)?: error: ", line) and existing in line
    assert f"; did you mean '{suggestion}'" in line and line.endswith("?")


@pytest.mark.parametrize(
    "args",
    [
        ["run", "zzzz"],
        ["run", TF, "--method", "zzzz"],
        ["run", TF, "--set", "zzzz=1"],
        ["control", "zzzz"],
        ["run", TF, "--zzzz"],
        ["run", TF, "--no-compilation-cache"],  # a top-level option after the command
    ],
)
def test_nothing_close_no_suggestion(args, capsys, tmp_path):
    line = _error(args, capsys, tmp_path)
    assert "did you mean" not in line


def test_the_library_suggests_the_nearest_name():
    """The library's own lookups (the sweep, scripts) say it too."""
    cases = [
        (lambda: get_case("krysl-torqe-free"), "valid cases: .*did you mean 'krysl-torque-free'"),
        (lambda: CASES[TF].resolve({"Omgea1": 0.1}), "valid: I11.*did you mean 'Omega1'"),
        (lambda: get_method("IMDM"), "valid: .*did you mean 'IMIDM' or 'IMID'\\?$"),
        (lambda: compose(IMIDM(), "yoshida"), "did you mean 'yoshida6'"),
        (lambda: get_problem("reach-piont"), "known: reach-point, .*did you mean 'reach-point'"),
        (lambda: default_settings("reach-piont"), "did you mean 'reach-point'"),
        (lambda: Reductions(names=("H",), reductions=("mena",)), "did you mean 'mean'"),
        (lambda: Sweep.from_dict({"case": TF, "methd": "IMIDM"}), "did you mean 'method'"),
        (
            lambda: Sweep.from_dict({"case": TF, "axes": [{}], "keep": {"invariant": True}}),
            r"\[keep\].*did you mean 'invariants'",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    with pytest.raises(ValueError) as err:
        get_case("zzzz")
    assert "did you mean" not in str(err.value)


def test_version_is_one_string(capsys):
    """`jaxrigid --version` prints `jaxrigid.__version__`, which the package's metadata is
    built from (pyproject's dynamic version)."""
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"jaxrigid {jaxrigid.__version__}"
    project = tomllib.loads(PYPROJECT.read_text())
    assert "version" in project["project"]["dynamic"]
    assert "version" not in project["project"]
    setuptools = project["tool"]["setuptools"]
    assert setuptools["dynamic"]["version"] == {"attr": "jaxrigid.__version__"}
    assert "py.typed" in setuptools["package-data"]["jaxrigid"]


def test_the_package_is_marked_typed():
    assert importlib.resources.files("jaxrigid").joinpath("py.typed").is_file()
