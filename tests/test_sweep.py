"""Parameter sweeps (issue 15, first slice): axes, chunking, the store, resume after SIGKILL,
checks before any work, and the command.

Bitwise equalities (`np.array_equal`) are the claims here, not tolerances: every chunk runs the
same compiled program on the same members' inputs, so where a member lands, how the sweep was
chunked or interrupted cannot change a single bit of its result.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.cases import get_case
from jaxrigid.cli import main
from jaxrigid.integrators import get_method
from jaxrigid.observers import Reductions
from jaxrigid.simulation import simulate
from jaxrigid.sweep import (
    Circle,
    Grid,
    Keep,
    LatinHypercube,
    RandomSample,
    Sweep,
    SweepStoreError,
    Table,
    Values,
    describe,
    load,
    load_spec,
    run,
    to_xarray,
)
from jaxrigid.sweep import store as store_module
from jaxrigid.sweep.axes import axis_of, member_values

AXES = (Grid("Omega1", -0.5, 0.5, 7), Values("Omega3", (0.0, 0.05, 0.1, -0.2, 0.3)))


def small(**kw) -> Sweep:
    """35 members of the torque-free body, 100 steps."""
    return Sweep("krysl-torque-free", axes=AXES, t_end=1.0, **kw)


# --- axes -----------------------------------------------------------------------------


def test_axes_values():
    np.testing.assert_array_equal(
        Grid("a", -1.0, 2.0, 7).coordinates()["a"], np.linspace(-1.0, 2.0, 7)
    )
    np.testing.assert_allclose(
        Grid("a", 1e-3, 1.0, 4, log=True).coordinates()["a"], np.geomspace(1e-3, 1.0, 4), 1e-15
    )
    # a Latin hypercube puts exactly one point in each of the num strata of every parameter
    lhs = LatinHypercube({"a": (0.0, 1.0), "b": (-2.0, 2.0)}, 50, seed=3).coordinates()
    for name, (lo, hi) in (("a", (0.0, 1.0)), ("b", (-2.0, 2.0))):
        strata = np.floor((lhs[name] - lo) / (hi - lo) * 50).astype(int)
        assert sorted(strata) == list(range(50))
    r1 = RandomSample({"a": (0.0, 1.0)}, 10, seed=1).coordinates()["a"]
    r2 = RandomSample({"a": (0.0, 1.0)}, 10, seed=1).coordinates()["a"]
    np.testing.assert_array_equal(r1, r2)
    assert not np.array_equal(r1, RandomSample({"a": (0.0, 1.0)}, 10, seed=2).coordinates()["a"])
    # row-major over the axes: the last axis varies fastest, as numpy's meshgrid(indexing="ij")
    t = Table({"p": [1.0, 2.0], "q": [3.0, 4.0]})
    got = member_values((Grid("a", 0, 1, 3), t), np.arange(6))
    A, P = np.meshgrid([0.0, 0.5, 1.0], [1.0, 2.0], indexing="ij")
    np.testing.assert_array_equal(got["a"], A.ravel())
    np.testing.assert_array_equal(got["p"], P.ravel())
    circle = Circle(("x", "y"), 2.0, 0.0, 1.0, 5, dim_name="phi")
    for axis in (
        Grid("a", 0, 1, 3),
        Values("b", (1.0, 2.0)),
        t,
        LatinHypercube({"c": (0, 1)}, 4),
        circle,
    ):
        assert axis_of(axis.describe()).describe() == axis.describe()


@pytest.mark.parametrize(
    "entry, message",
    [
        (dict(kind="grid", parameter="a", start=0, stop=1, num=0), "num must be a positive"),
        (dict(kind="values", parameter="a", values=[]), "empty list"),
        (dict(kind="grid", parameter="a", start=0, stop=float("nan"), num=3), "finite"),
        (dict(kind="cube", parameter="a"), "kind must be one of"),
        (dict(kind="grid", parameter="a", start=0, num=3), "bad or missing keys"),
        (dict(kind="lhs", ranges={"a": (1.0, 0.0)}, num=3), "low ≤ high"),
    ],
)
def test_bad_axes(entry, message):
    with pytest.raises(ValueError, match=message):
        axis_of(entry)


# --- running --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "ref"
    run(small(chunk_size=35), out, progress=False)
    return load(out)


def test_members_equal_their_own_runs(reference):
    """Each member equals the case built from its parameters and simulated alone, to
    round-off: the sweep builds its members inside its compiled program, the test eagerly,
    and the batched and single programs fuse differently, so the two may start an ulp apart;
    100 steps of the (non-chaotic over t = 1) free body keep that within 1e-14 relative."""
    case, integrator = get_case("krysl-torque-free"), get_method("IMIDM")
    for i, j in [(0, 0), (3, 2), (6, 4)]:
        params = case.resolve({"Omega1": AXES[0].coordinates()["Omega1"][i]})
        params["Omega3"] = AXES[1].values_[j]
        model, state0 = case.build(params)
        sol = simulate(integrator, model, state0, 0.01, 100, save_every=100)
        close = dict(rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(reference["final/Pi"][i, j], sol.final_state.Pi, **close)
        np.testing.assert_allclose(reference["final/R"][i, j], sol.final_state.R, **close)
        H = [model.invariants(t, s)["H"] for t, s in ((0.0, state0), (1.0, sol.final_state))]
        # a difference of two H's: equal to a few ulps of H
        np.testing.assert_allclose(
            reference["drift_final/H"][i, j], jnp.abs(H[1] - H[0]), rtol=0, atol=8e-16 * H[0]
        )
    assert reference["finished"].all() and (reference["outcome/result"] == 0).all()
    assert (reference["drift_max/H"] >= reference["drift_final/H"]).all()
    np.testing.assert_array_equal(reference["param/Omega1"][:, 0], AXES[0].coordinates()["Omega1"])


@pytest.mark.xla_defaults
@pytest.mark.parametrize("chunk", [1, 8, 34])
def test_chunking_is_invisible(reference, chunk, tmp_path):
    """Chunks of at most 8 or 34 members (made equal: 5 of 7, 2 of 18 with one member of
    padding) equal one chunk of 35 bit for bit. A one-member chunk is compiled as scalar code
    (XLA drops the unit axis) and may differ in the last bit (measured: 1 ulp), so it is
    held to round-off."""
    run(small(chunk_size=chunk), tmp_path / "s", progress=False)
    assert describe(tmp_path / "s")["chunk_size"] == {1: 1, 8: 7, 34: 18}[chunk]
    got = load(tmp_path / "s")
    assert got.keys() == reference.keys()
    for k in reference:
        if chunk > 1:
            np.testing.assert_array_equal(got[k], reference[k], err_msg=k)
        else:
            np.testing.assert_allclose(got[k], reference[k], rtol=0, atol=1e-15, err_msg=k)


def test_xarray_and_keep(tmp_path):
    keep = Keep(final_state=False, outcome=False)
    run(small(chunk_size=16, keep=keep), tmp_path / "s", progress=False)
    data = load(tmp_path / "s")
    assert not any(k.startswith(("final/", "outcome/")) for k in data)
    ds = to_xarray(tmp_path / "s")
    assert ds["drift_max_H"].dims == ("Omega1", "Omega3")
    np.testing.assert_array_equal(ds["Omega1"].values, AXES[0].coordinates()["Omega1"])


REDUCE = Keep(reductions={"Pi[1]": ["first_zero", "min", "mean"], "K": "max"}, stride=25)


@pytest.mark.xla_defaults
def test_reductions_and_trajectory_equal_the_members_own_runs(reference, tmp_path):
    """Reductions over every step and the state every 25 steps equal each member's own run
    (`observers.Reductions`, `save_every`) to round-off (as in
    test_members_equal_their_own_runs), and do not change the other kept quantities."""
    run(small(chunk_size=8, keep=REDUCE), tmp_path / "s", progress=False)
    got = load(tmp_path / "s")
    for k in reference:  # the same program otherwise: bit for bit
        np.testing.assert_array_equal(got[k], reference[k], err_msg=k)
    np.testing.assert_allclose(got["trajectory_t"], [0.0, 0.25, 0.5, 0.75, 1.0], rtol=1e-15)
    assert got["trajectory/Pi"].shape == (7, 5, 5, 3)
    np.testing.assert_array_equal(got["trajectory/Pi"][:, :, -1], got["final/Pi"])
    case, integrator = get_case("krysl-torque-free"), get_method("IMIDM")
    reductions = Reductions(("Pi[1]", "K"))
    for i, j in [(0, 0), (3, 2), (6, 4)]:
        params = case.resolve({"Omega1": AXES[0].coordinates()["Omega1"][i]})
        params["Omega3"] = AXES[1].values_[j]
        model, state0 = case.build(params)
        sol = simulate(integrator, model, state0, 0.01, 100, save_every=25, observer=reductions)
        close = dict(rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(got["trajectory/Pi"][i, j], sol.states.Pi, **close)
        np.testing.assert_allclose(got["trajectory/R"][i, j], sol.states.R, **close)
        want = reductions.results(sol.observations)
        for (name, r), key in [
            (("Pi[1]", "first_zero"), "reductions/Pi_1/first_zero"),
            (("Pi[1]", "min"), "reductions/Pi_1/min"),
            (("Pi[1]", "mean"), "reductions/Pi_1/mean"),
            (("K", "max"), "reductions/K/max"),
        ]:
            np.testing.assert_allclose(got[key][i, j], want[(name, r)], **close, err_msg=key)
    assert "reductions/K/min" not in got  # only what was asked
    ds = to_xarray(tmp_path / "s")
    assert ds["trajectory_Pi"].dims == ("Omega1", "Omega3", "t", "trajectory_Pi_0")
    np.testing.assert_allclose(ds["t"].values, got["trajectory_t"])


@pytest.mark.parametrize(
    "keep, message",
    [
        (Keep(reductions={"Omega[1]": ["min"]}), r"unknown observable 'Omega\[1\]'.*R, Pi"),
        (Keep(reductions={"Pi": ["min"]}), "give one index per axis"),
        (Keep(stride=30), "stride 30 does not divide the 100 steps"),
    ],
)
def test_bad_keep_fails_before_any_work(keep, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        run(small(keep=keep), tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


def test_bad_keep_entries_are_named():
    with pytest.raises(ValueError, match=r"'Pi\[1\]'.*unknown: \['median'\]"):
        Keep(reductions={"Pi[1]": ["median"]})
    with pytest.raises(ValueError, match="stride must be an integer"):
        Keep(stride=-1)
    spec = small(keep=REDUCE).describe()
    assert Sweep.from_dict(spec) == small(keep=REDUCE)  # the store's description round-trips


def test_swept_step_and_circle_axis_equal_the_members_own_runs(tmp_path):
    """An axis over the step dt (each member runs n_steps = 40 steps of its own dt) and a
    circle axis (Omega1 = r cos φ, Omega3 = r sin φ): each member equals its own run, to
    round-off as in test_members_equal_their_own_runs."""
    circle = Circle(("Omega1", "Omega3"), 0.3, 0.0, np.pi, 4, dim_name="phi")
    sweep = Sweep(
        "krysl-torque-free",
        axes=(Values("dt", (0.01, 0.025, 0.05)), circle),
        n_steps=40,
        keep=Keep(stride=20),
        chunk_size=5,
    )
    run(sweep, tmp_path / "s", progress=False)
    got = load(tmp_path / "s")
    np.testing.assert_allclose(
        got["trajectory_t"][:, 0], [[0.0, 0.2, 0.4], [0.0, 0.5, 1.0], [0.0, 1.0, 2.0]], rtol=1e-15
    )
    case, integrator = get_case("krysl-torque-free"), get_method("IMIDM")
    phi = np.linspace(0.0, np.pi, 4)
    for i, dt in enumerate((0.01, 0.025, 0.05)):
        for j in range(4):
            params = case.resolve({"Omega1": 0.3 * np.cos(phi[j]), "Omega3": 0.3 * np.sin(phi[j])})
            assert got["param/Omega1"][i, j] == params["Omega1"]
            assert got["param/Omega3"][i, j] == params["Omega3"]
            model, state0 = case.build(params)
            sol = simulate(integrator, model, state0, dt, 40, save_every=20)
            close = dict(rtol=1e-14, atol=1e-15)
            np.testing.assert_allclose(got["trajectory/Pi"][i, j], sol.states.Pi, **close)
            np.testing.assert_allclose(got["final/Pi"][i, j], sol.final_state.Pi, **close)
    ds = to_xarray(tmp_path / "s")
    np.testing.assert_allclose(ds["phi"].values, phi, rtol=1e-15)
    assert ds["trajectory_t"].dims == ("dt", "phi", "t")


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(n_steps=None), "sweeps the step dt: give n_steps"),
        (dict(n_steps=10, dt=0.01), "sweeps the step dt: give n_steps .* and no fixed dt"),
    ],
)
def test_a_swept_step_needs_n_steps(kw, message, tmp_path):
    sweep = Sweep("krysl-torque-free", axes=(Values("dt", (0.01, 0.02)),), **kw)
    with pytest.raises(ValueError, match=message):
        run(sweep, tmp_path / "s", progress=False)


def test_n_steps_instead_of_t_end():
    from jaxrigid.sweep import plan

    p = plan(Sweep("krysl-torque-free", axes=AXES, n_steps=30, dt=0.02))
    assert (p.n_steps, p.dt) == (30, 0.02) and abs(p.t_end - 0.6) < 1e-15
    with pytest.raises(ValueError, match="t_end or n_steps, not both"):
        Sweep("krysl-torque-free", axes=AXES, n_steps=30, t_end=1.0)
    with pytest.raises(ValueError, match="n_steps must be a positive integer"):
        Sweep("krysl-torque-free", axes=AXES, n_steps=0)
    # a boolean is an int to Python: refused, not taken as one step or a chunk of one
    with pytest.raises(ValueError, match="n_steps must be a positive integer, got True"):
        Sweep("krysl-torque-free", axes=AXES, n_steps=True)
    with pytest.raises(ValueError, match="chunk_size must be a positive integer, got True"):
        Sweep("krysl-torque-free", axes=AXES, n_steps=30, chunk_size=True)
    with pytest.raises(ValueError, match="two parameters"):
        Circle(("a",), 1.0, 0.0, 1.0, 3)


def test_lyapunov_exponent_equals_finite_differences_of_two_runs(tmp_path):
    """The finite-time Lyapunov exponent (1/T) log |δ(T)| from the tangent (jax.jvp) equals
    the one from two runs started ε = 1e-7 apart along the same unit vector in Π, for a
    chaotic and a regular member of examples/heavy-top-chaos.toml. The difference quotient
    is off by O(ε |δ(T)|) relatively (|δ(T)| ≤ 10 here) plus round-off 1e-16/ε: under 1e-5
    in |δ|, so under 1e-5/T = 1e-6 in the exponent at T = 10."""
    spec = load_spec("examples/heavy-top-chaos.toml")
    tilts = Table({"Gamma1": [0.0, 0.6], "Gamma3": [1.0, 0.8]})  # unit vectors
    sweep = dataclasses.replace(spec, axes=(tilts, Values("M3", (0.3, 4.0))), t_end=10.0)
    run(sweep, tmp_path / "s", progress=False)
    got = load(tmp_path / "s")["lyapunov/Pi"]
    case, integrator = get_case("dmv-heavy-top"), get_method("DMV-body")
    eps, direction = 1e-7, np.ones(3) / np.sqrt(3)
    for i, (gamma1, gamma3) in enumerate(((0.0, 1.0), (0.6, 0.8))):
        for j, m3 in enumerate((0.3, 4.0)):
            params = case.resolve({**sweep.set, "Gamma1": gamma1, "Gamma3": gamma3, "M3": m3})
            model, state0 = case.build(params)
            moved = state0._replace(Pi=state0.Pi + eps * direction)
            a, b = (
                simulate(integrator, model, s, 0.05, 200, save_every=200).final_state
                for s in (state0, moved)
            )
            gap = np.sqrt(np.sum((b.R - a.R) ** 2) + np.sum((b.Pi - a.Pi) ** 2)) / eps
            assert abs(got[i, j] - np.log(gap) / 10.0) < 1e-6, (i, j, got[i, j])


def test_lyapunov_needs_a_state_field(tmp_path):
    with pytest.raises(ValueError, match=r"lyapunov = 'Omega' is not a field .* R, Pi"):
        run(small(keep=Keep(lyapunov="Omega")), tmp_path / "s", progress=False)


def test_float32_sweep_of_a_case_with_float64_constants(tmp_path):
    """A dmv case's build makes `R0 = jnp.eye(3)` in the default (float64) dtype; a float32
    sweep casts every floating leaf to float32 (simulate refuses mixed dtypes), and agrees
    with the float64 sweep to float32's resolution: 50 steps of O(1) values, each rounding
    ≈ 6e-8, well under 1e-5."""
    axes = (Grid("M1", -0.5, 0.5, 3), Values("M3", (1.0, 0.8)))
    runs = {}
    for dtype in ("float32", "float64"):
        sweep = Sweep("dmv-free-body-asymmetric", axes=axes, n_steps=50, dtype=dtype)
        run(sweep, tmp_path / dtype, progress=False)
        runs[dtype] = load(tmp_path / dtype)
    assert runs["float32"]["final/Pi"].dtype == np.float32
    for k in ("final/Pi", "final/R"):
        np.testing.assert_allclose(runs["float32"][k], runs["float64"][k], rtol=0, atol=1e-5)


_SHARDED = textwrap.dedent(
    """
    import sys, jax
    jax.config.update("jax_enable_x64", True)
    from jaxrigid.sweep import Grid, Sweep, Values, run
    assert len(jax.local_devices()) == 4
    axes = (Grid("Omega1", -0.5, 0.5, 7), Values("Omega3", (0.0, 0.05, 0.1, -0.2, 0.3)))
    sweep = Sweep("krysl-torque-free", axes=axes, t_end=1.0, chunk_size=int(sys.argv[2]))
    run(sweep, sys.argv[1], devices=4, progress=False)
    """
)


@pytest.mark.parametrize("chunk", [8, 36])
def test_sharded_over_four_devices_equals_one_device(reference, chunk, tmp_path):
    """The members' axis sharded over 4 forced host devices (`jax.sharding`, a 1-D mesh).
    Each device compiles the chunk for its own share of members (2 or 9), which may round
    differently from one device's 35 (measured: 1 ulp in 9 of 35 members), so equal to
    round-off."""
    env = dict(
        os.environ,
        PYTHONPATH=os.getcwd(),
        # the suite's own XLA flags (conftest.py) kept: both sides build their programs alike
        XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4",
    )
    out = tmp_path / "s"
    subprocess.run([sys.executable, "-c", _SHARDED, str(out), str(chunk)], env=env, check=True)
    got = load(out)
    assert got["finished"].all()
    for k in reference:
        np.testing.assert_allclose(got[k], reference[k], rtol=0, atol=1e-15, err_msg=k)


# --- resume ---------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys, jax
    jax.config.update("jax_enable_x64", True)
    from jaxrigid.sweep import load_spec, run
    run(load_spec(sys.argv[1]), sys.argv[2], resume=True, progress=False)
    """
)

_SPEC = """
case = "krysl-torque-free"
t_end = 2.0
chunk_size = 4
[set]
Omega2 = 1.0
[[axes]]
kind = "grid"
parameter = "Omega1"
start = -0.1
stop = 0.1
num = 9
[[axes]]
kind = "lhs"
ranges = {{ Omega3 = [-0.1, 0.1], I33 = [1.5, 1.8] }}
num = {num}
seed = 7
"""


def test_resume_after_sigkill_equals_an_uninterrupted_run(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(_SPEC.format(num=8))
    whole = tmp_path / "whole"
    run(load_spec(spec), whole, progress=False)
    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(spec), str(out)], env=env)
    done = out / "done"

    def markers():  # not a marker's temporary file (`2.tmp`), which a kill may leave behind
        return sorted(p for p in done.glob("*") if p.name.isdigit())

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(markers()) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = markers()
    assert 3 <= len(finished) < 18, "killed too late to test resuming"
    stamps = {p.name: p.stat().st_mtime_ns for p in finished}
    data = out / "results.zarr" / "final" / "Pi" / "c"
    chunk_files = {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()}
    run(load_spec(spec), out, resume=True, progress=False)
    a, b = load(whole), load(out)
    for k in a:
        np.testing.assert_array_equal(b[k], a[k], err_msg=k)
    # finished chunks were not rewritten (neither their markers nor their data)
    assert {p.name: p.stat().st_mtime_ns for p in finished} == stamps
    first = out / "results.zarr" / "final" / "Pi" / "c" / "0" / "0"
    assert first.stat().st_mtime_ns == chunk_files[first]


def test_full_disk_leaves_finished_chunks_readable(tmp_path, monkeypatch):
    sweep, out = small(chunk_size=7), tmp_path / "s"
    original = store_module.Store._write_rows

    def failing(self, name, start, value):  # the disk fills up during chunk 2's writes
        if start == 14 and name.startswith("final/"):
            raise OSError(28, "No space left on device")
        return original(self, name, start, value)

    monkeypatch.setattr(store_module.Store, "_write_rows", failing)
    with pytest.raises(SweepStoreError, match="No space left.*finished chunks are intact"):
        run(sweep, out, progress=False)
    monkeypatch.undo()
    partial = load(out)
    assert partial["finished"].ravel().tolist() == [True] * 14 + [False] * 21
    run(sweep, out, resume=True, progress=False)
    assert load(out)["finished"].all()


def test_unwritable_directory(tmp_path):
    """A store under a path that cannot be a directory (here: under a file; a read-only
    directory does not stop root, who runs CI) fails at once, naming the path."""
    (tmp_path / "file").write_text("")
    with pytest.raises(SweepStoreError, match="cannot create the sweep store"):
        run(small(chunk_size=8), tmp_path / "file" / "s", progress=False)


# --- checks before any work -----------------------------------------------------------


@pytest.mark.parametrize(
    "sweep, message",
    [
        (Sweep("krysl-torque-free", axes=(Grid("Omega9", 0, 1, 3),)), "Omega9.*does not have"),
        (Sweep("no-such-case", axes=(Grid("a", 0, 1, 3),)), "case"),
        (
            Sweep("nontwisting-case1", axes=(Values("q2_every", (0.0, 1.0)),)),
            "sweeps 'q2_every', a structural parameter",
        ),
        (
            Sweep("krysl-torque-free", axes=(Grid("Omega1", 0, 1, 3),), method="RATTLE"),
            "method",
        ),
        (
            Sweep("krysl-torque-free", axes=(Grid("Omega1", 0, 1, 3),), set={"Omega1": 1.0}),
            "both",
        ),
        # the member with I11 = −0.4 has no positive-definite inertia; named with its value
        (
            Sweep("krysl-torque-free", axes=(Grid("I11", 1.0, -0.4, 3),), t_end=1.0),
            r"sweep member 2 \{'I11': -0.4\}: inertia must be positive definite",
        ),
        # 2.9 > 1.098 + 1.66: no rigid body has these moments (checked for member 3 first)
        (
            Sweep("krysl-torque-free", axes=(Grid("I33", 1.0, 4.0, 7),), t_end=1.0),
            r"sweep member 3 \{'I33': 2.5\}: inertia's principal moments break",
        ),
    ],
)
def test_bad_sweeps_fail_before_any_work(sweep, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        run(sweep, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


def test_spec_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('case = "krysl-torque-free"\nspeed = 3\n')
    with pytest.raises(ValueError, match="unknown key.*speed"):
        load_spec(bad)
    bad.write_text('case = "krysl-torque-free"\n')
    with pytest.raises(ValueError, match="no \\[\\[axes\\]\\]"):
        load_spec(bad)
    bad.write_text("case = \n")
    with pytest.raises(ValueError, match="not valid TOML"):
        load_spec(bad)


def test_existing_store_needs_resume_and_the_same_sweep(tmp_path):
    out = tmp_path / "s"
    run(small(chunk_size=35), out, progress=False)
    with pytest.raises(SweepStoreError, match="resume"):
        run(small(chunk_size=35), out, progress=False)
    message = r"different sweep: dt: 'unset' in the store, 0.02 asked$"
    with pytest.raises(ValueError, match=message):
        run(small(chunk_size=35, dt=0.02), out, resume=True, progress=False)
    run(small(chunk_size=35), out, resume=True, progress=False)  # finished: nothing to do


def test_command(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(_SPEC.format(num=2))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o")]) == 0
    assert "18 members of krysl-torque-free" in capsys.readouterr().out
    assert load(tmp_path / "o")["finished"].shape == (9, 2)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o")]) == 1
    assert "--resume" in capsys.readouterr().err
    spec.write_text(_SPEC.format(num=0))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "p")]) == 2
    assert "num must be a positive integer" in capsys.readouterr().err


def test_example_specs_are_valid():
    from jaxrigid.sweep import plan

    for path in sorted(__import__("pathlib").Path("examples").glob("*.toml")):
        p = plan(load_spec(path))
        assert p.sweep.n_members >= 1 and p.n_steps >= 1, path


def test_automatic_chunks_are_balanced():
    """As few chunks as the size limit allows, of equal size: padding under one member per
    chunk (and per device), never a mostly empty last chunk."""
    from jaxrigid.sweep.run import _balanced

    for n, limit, k in [(20000, 16384, 1), (20000, 20000, 2), (35, 8, 4), (10**6, 2**20, 1)]:
        size = _balanced(n, limit, k)
        chunks = -(-n // size)
        assert size % k == 0 and chunks == -(-n // min(limit, n))
        assert chunks * size - n < chunks * k


def test_a_second_sweep_compiles_nothing(reference, tmp_path):
    """The chunk program and the check pass are kept per case, method, step, keep and dtype:
    a sweep over other values of the same setup reuses them."""
    run_module = sys.modules["jaxrigid.sweep.program"]  # where the compiled programs are kept
    before = dict(run_module._PROGRAMS)
    other = Sweep("krysl-torque-free", axes=(Grid("Omega2", 0.5, 1.5, 35),), t_end=1.0)
    run(dataclasses.replace(other, chunk_size=35), tmp_path / "s", progress=False)
    assert run_module._PROGRAMS == before
