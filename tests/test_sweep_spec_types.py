"""Types before values in sweep specs (issue 32): a boolean (`dt = true` ran with Δt = 1) or
a string (`dt = "0.01"`, a traceback before) where a number is meant is refused naming the
key — `dt`, `t_end`, `set`, every axis kind's numbers — and the command reports it as one
line with exit status 2. Numbers of either kind (`1`, `0.5`) are accepted. Pure Python: no
program is built."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid import cli
from jaxrigid.sweep.axes import Values
from jaxrigid.sweep.spec import Sweep

GRID = {"kind": "grid", "parameter": "Omega1", "start": 0.1, "stop": 1.0, "num": 3}


def _spec(**changes):
    spec = {"case": "krysl-torque-free", "axes": [GRID]}
    spec.update(changes)
    return spec


def _axis(**entry):
    return _spec(axes=[entry])


@pytest.mark.parametrize(
    "spec,message",
    [
        (_spec(dt=True), r"^dt must be a number, got True \(bool\)$"),
        (_spec(dt="0.01"), r"^dt must be a number, got '0.01' \(str\)$"),
        (_spec(t_end="10"), r"^t_end must be a number, got '10' \(str\)$"),
        (_spec(set={"I11": True}), r"^set\.I11 must be a number, got True \(bool\)$"),
        (_spec(set={"I11": "0.5"}), r"^set\.I11 must be a number, got '0.5' \(str\)$"),
        (_spec(chunk_size=True), r"^chunk_size must be a positive integer, got True$"),
        (
            _axis(kind="grid", parameter="Omega1", start=True, stop=1.0, num=3),
            r"^axis 'Omega1': a value must be a number, got True \(bool\)$",
        ),
        (
            _axis(kind="values", parameter="Omega1", values=[0.1, True]),
            r"^axis 'Omega1': each value must be a number, got True \(bool\)$",
        ),
        (
            _axis(kind="values", parameter="Omega1", values=["0.1"]),
            r"^axis 'Omega1': each value must be a number, got '0.1' \(str\)$",
        ),
        (
            _axis(kind="random", ranges={"Omega1": [0.0, "1"]}, num=3),
            r"^random axis: parameter 'Omega1' must be a number, got '1' \(str\)$",
        ),
        (
            _axis(kind="table", columns={"Omega1": [0.1, False]}),
            r"^table axis: each entry of column 'Omega1' must be a number, got False \(bool\)$",
        ),
        (
            _axis(
                kind="circle", parameters=["Omega1", "Omega3"], radius=True, start=0, stop=1, num=4
            ),  # fmt: skip
            r"^axis 'angle': a value must be a number, got True \(bool\)$",
        ),
    ],
)
def test_a_value_that_is_not_a_number_is_refused_naming_its_key(spec, message):
    with pytest.raises(ValueError, match=message):
        Sweep.from_dict(spec)


def test_numbers_of_either_kind_are_accepted():
    sweep = Sweep.from_dict(
        _spec(
            dt=1,
            set={"I11": 1},
            axes=[{"kind": "values", "parameter": "Omega1", "values": [0.1, 2]}],
        )  # fmt: skip
    )
    assert sweep.dt == 1 and sweep.set == {"I11": 1.0}
    assert sweep.axes[0].values_ == (0.1, 2.0)
    # from Python: NumPy and JAX scalars and arrays of numbers too, not of booleans
    sweep = Sweep(
        "krysl-torque-free", (Values("Omega1", jnp.linspace(0.0, 1.0, 3)),), dt=np.float32(0.5)
    )
    assert sweep.axes[0].values_ == (0.0, 0.5, 1.0) and sweep.dt == 0.5
    message = r"^axis 'Omega1': each value must be a number, got an array of bool$"
    with pytest.raises(ValueError, match=message):
        Values("Omega1", jnp.array([True, False]))


def test_the_command_reports_a_boolean_step_as_one_line_with_exit_2(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'case = "krysl-torque-free"\ndt = true\n\n[[axes]]\nkind = "grid"\n'
        'parameter = "Omega1"\nstart = 0.1\nstop = 1.0\nnum = 3\n'
    )
    assert cli.main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"jaxrigid: error: {spec}: dt must be a number, got True (bool)"]
