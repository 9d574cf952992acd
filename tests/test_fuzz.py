"""Property-based fuzzing of the public entry points (issue 32): for any input — numbers of
every kind (NaN, ±inf, 0, huge, tiny, negative), booleans, strings, wrong shapes and dtypes —
every outcome is a clean error (one of the documented exception types, with a message) or a
checked result: no other exception, and no non-finite number in a result that reports
success.

Examples per CI run (`derandomize=True`: the same examples on every run, so the suite is
reproducible; `database=None`: nothing written): `simulate` 60, sweep specs 150,
`jaxrigid run` 16. The shapes and step counts are drawn from small sets so that the valid
examples reuse a handful of compiled programs (every new one costs seconds of build); values
are drawn freely, since new values never rebuild.
"""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import jaxrigid as jr  # noqa: E402
from jaxrigid.cli import main  # noqa: E402
from jaxrigid.integrators import get_method  # noqa: E402
from jaxrigid.lie import so3  # noqa: E402
from jaxrigid.sweep import Sweep  # noqa: E402
from jaxrigid.sweep.program import plan  # noqa: E402

CLEAN = (TypeError, ValueError, jr.StepFailedError)  # InvalidValueError is a ValueError


def fuzz(n):
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,  # capsys and a directory: reset per example
        ],
    )


def mostly(good, bad):
    """`good` four times in five: most examples pass the checks and run, so that a result,
    not only an error, is checked."""
    return st.one_of(good, good, good, good, bad)


special = st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1e300, -1e300, 1e-300])
numbers = st.one_of(special, st.floats(-1e3, 1e3), st.integers(-3, 3))
anything = st.one_of(
    numbers, st.booleans(), st.text(max_size=4), st.none(), st.complex_numbers(max_magnitude=2)
)


# --- simulate ---------------------------------------------------------------------------

METHOD = get_method("fEM")  # explicit and cheap to build; the checks are the same for all


def arrays(shape):
    """Finite values mostly, with NaN/inf sprinkled in; float64, or now and then float32 or
    an integer dtype."""
    values = st.lists(
        st.one_of(st.floats(-2, 2), special), min_size=math.prod(shape), max_size=math.prod(shape)
    )
    dtype = st.sampled_from(["float64"] * 6 + ["float32", "int32"])
    return st.builds(lambda v, d: _cast(np.asarray(v).reshape(shape), d), values, dtype)


def _cast(x, dtype):
    if dtype == "int32":  # an integer state or inertia: values that fit
        return np.nan_to_num(x, posinf=0.0, neginf=0.0).clip(-5, 5).astype(dtype)
    with np.errstate(over="ignore"):  # 1e300 in float32 is inf: also a value to refuse
        return x.astype(dtype)


rotations = st.one_of(
    st.just(np.eye(3)),
    st.builds(
        lambda w: np.asarray(so3.exp(jnp.asarray(w))),
        st.lists(st.floats(-3, 3), min_size=3, max_size=3),
    ),
)


GOOD = {
    "inertia": st.lists(st.floats(1, 1.9), min_size=3, max_size=3).map(np.diag),
    "R": rotations,
    "Pi": st.lists(st.floats(-2, 2), min_size=3, max_size=3).map(np.asarray),
    # valid, and some that stress the run (a step that overflows, times near float max)
    "dt": st.one_of(st.floats(1e-3, 0.5), st.floats(-0.5, -1e-3), st.just(1e300)),
    "t0": st.floats(-10, 10),  # times near float max: tests/test_time_checks.py
    "n_steps": st.sampled_from([1, 4]),
    "save_every": st.just(1),
}
BAD = {
    "inertia": st.one_of(arrays((3,)).map(np.diag), arrays((3, 3))),
    "R": arrays((3, 3)),
    "Pi": st.one_of(arrays((3,)), arrays((2, 3)), arrays((4,))),
    "dt": anything,
    "t0": anything,
    "n_steps": st.sampled_from([0, -2, True, 2.5, "4"]),
    "save_every": st.sampled_from([4, 0, True, 3]),
}


@st.composite
def simulate_args(draw):
    """Every argument valid in half the examples; otherwise one of them bad."""
    bad = draw(st.sampled_from(list(GOOD) + [None] * len(GOOD)))
    return {name: draw(BAD[name] if name == bad else GOOD[name]) for name in GOOD}


@fuzz(60)
@given(args=simulate_args())
def test_simulate(args):
    inertia, R, Pi, dt, t0, n_steps, save_every = args.values()
    try:
        state = jr.RigidBodyState(jnp.asarray(R), jnp.asarray(Pi))
        if state.Pi.ndim == 2:
            state = jr.RigidBodyState(jnp.broadcast_to(state.R, (2, 3, 3)), state.Pi)
        sol = jr.simulate(
            METHOD, jr.RigidBody(jnp.asarray(inertia)), state, dt, n_steps, t0=t0,
            save_every=save_every,
        )  # fmt: skip
    except CLEAN as err:  # a clean error names what is wrong (not JAX's own words)
        names = ("dt", "t0", "n_steps", "save_every", "inertia", "R0", "Pi", "state", "step 0")
        assert any(name in str(err) for name in names), err
        event(f"refused: {type(err).__name__}")
        return
    event("ran")
    ok = np.asarray(sol.result) == int(jr.RESULTS.successful)
    for leaf in (sol.final_state.R, sol.final_state.Pi):
        finite = np.isfinite(np.asarray(leaf)).reshape(ok.shape + (-1,)).all(-1)
        assert (finite | ~ok).all(), "a non-finite state reported as success"
    assert np.isfinite(np.asarray(sol.ts)).all() or not ok.all(), "non-finite times"


# --- sweep specs ------------------------------------------------------------------------

GOOD_AXES = st.sampled_from(
    [
        {"kind": "grid", "parameter": "Omega1", "start": -0.5, "stop": 0.5, "num": 3},
        {"kind": "values", "parameter": "Omega3", "values": [0.0, 0.1]},
        {"kind": "lhs", "ranges": {"Omega2": [0.5, 1.0], "I33": [1.5, 1.8]}, "num": 4, "seed": 1},
    ]
)
BAD_AXES = st.one_of(
    st.fixed_dictionaries(
        {"kind": st.just("grid"), "parameter": st.sampled_from(["Omega1", "I11", "nope", 3]),
         "start": anything, "stop": anything, "num": anything}
    ),
    st.fixed_dictionaries(
        {"kind": st.just("values"), "parameter": st.sampled_from(["Omega3", "dt"]),
         "values": st.one_of(st.lists(anything, max_size=3), anything)}
    ),
    st.fixed_dictionaries(
        {"kind": st.sampled_from(["lhs", "random", "grid2"]),
         "ranges": st.dictionaries(
             st.sampled_from(["Omega2", "I33"]), st.lists(anything, max_size=3)
         ),
         "num": anything, "seed": anything}
    ),
)  # fmt: skip
SPEC_GOOD = {
    "case": st.just("krysl-torque-free"),
    "axes": st.lists(GOOD_AXES, min_size=1, max_size=2, unique_by=lambda a: a["kind"]),
    "dt": st.one_of(st.none(), st.floats(1e-3, 0.1)),
    "t_end": st.one_of(st.none(), st.floats(0.1, 10)),
    "chunk_size": st.one_of(st.none(), st.integers(1, 64)),
    "set": st.dictionaries(st.sampled_from(["I22", "I12"]), st.floats(-0.1, 0.1), max_size=1),
}
SPEC_BAD = {
    "case": st.sampled_from(["no-such-case", 3]),
    "axes": st.lists(BAD_AXES, max_size=2),
    "dt": anything,
    "t_end": anything,
    "chunk_size": anything,
    "set": st.dictionaries(st.sampled_from(["Omega2", "I22", "zz"]), anything, max_size=2),
    "n_steps": anything,
    "dtype": st.sampled_from(["float16", 1, "float32"]),
    "method": st.sampled_from(["RATTLE", 7, "fEM"]),
}


@st.composite
def specs(draw):
    """A valid spec in half the examples; otherwise one entry bad (or an extra one)."""
    bad = draw(st.sampled_from(list(SPEC_BAD) + [None] * len(SPEC_BAD)))
    spec = {k: draw(SPEC_BAD[k] if k == bad else v) for k, v in SPEC_GOOD.items()}
    if bad in ("n_steps", "dtype", "method"):
        spec[bad] = draw(SPEC_BAD[bad])
    return {k: v for k, v in spec.items() if v is not None}


@fuzz(150)
@given(spec=specs())
def test_sweep_specs(spec):
    """`from_dict` and `plan` (all a spec's checks short of building its programs): a
    `ValueError` naming the problem, or a sweep whose numbers are finite and in range."""
    try:
        sweep = plan(Sweep.from_dict(spec)).sweep
    except ValueError as err:
        assert str(err)
        event("refused")
        return
    event("planned")
    for name in ("dt", "t_end"):
        v = getattr(sweep, name)
        assert v is None or (isinstance(v, float | int) and not isinstance(v, bool) and v > 0)
        assert v is None or math.isfinite(v)
    assert all(math.isfinite(v) and not isinstance(v, bool) for v in sweep.set.values())
    assert sweep.n_members >= 1
    for a in sweep.axes:
        for values in a.coordinates().values():
            assert np.isfinite(np.asarray(values, float)).all(), a


# --- jaxrigid run -----------------------------------------------------------------------

RUN_GOOD = {
    "--dt": st.sampled_from(["0.05", "0.02", "1e300"]),
    "--ensemble": st.sampled_from(["1", "2"]),
    "--seed": st.sampled_from(["0", "3"]),
    "--set": st.sampled_from(["Omega1=0.5", "I11=1.1"]),
    "--method": st.sampled_from(["IMIDM", "fEM"]),
}
RUN_BAD = {
    "--dt": st.sampled_from(["0", "-0.1", "nan", "inf", "abc", "true", "0.3"]),
    "--ensemble": st.sampled_from(["0", "-1", "1.5", "true"]),
    "--seed": st.sampled_from(["-1", "x"]),
    "--set": st.sampled_from(["Omega1=nan", "I11=-1", "Omega1=true", "zz=1", "I11"]),
    "--method": st.sampled_from(["RATTLE", "nope"]),
}


@st.composite
def options(draw):
    """Valid options in half the examples; otherwise one of them bad."""
    bad = draw(st.sampled_from(list(RUN_BAD) + [None] * len(RUN_BAD)))
    return {k: draw(RUN_BAD[k] if k == bad else v) for k, v in RUN_GOOD.items()}


@fuzz(16)
@given(options=options())
def test_command_run(options, capsys, tmp_path):
    """Exit 0 with finite numbers for a successful run (or a failure reported by cause), 2
    with one line for bad input, 1 for a run that could not complete; never a traceback."""
    argv = ["run", "krysl-torque-free", "--json", "--t-end", "0.2", "--out", str(tmp_path)]
    for k, v in options.items():
        argv += [k, v]
    status = main(argv)
    out, err = capsys.readouterr()
    assert status in (0, 1, 2), status
    event(f"exit {status}")
    assert "Traceback" not in err
    if status:
        # one error line; argparse's own (a malformed option) comes after its usage lines
        lines = [line for line in err.splitlines() if not line.startswith("jaxrigid: warning")]
        usage = [line for line in lines if line.startswith(("usage: ", "   "))]
        errors = [line for line in lines if line not in usage]
        assert len(errors) == 1 and errors[0].startswith("jaxrigid"), err
        assert "error" in errors[0], err
        return
    report = json.loads(out)
    failed = not report["newton"]["all_converged"]
    finite = np.isfinite(np.asarray(jax.tree_util.tree_leaves(report["final_state"]), float))
    assert finite.all() or failed, report
