"""Issue 32, "no silently wrong number": parameters outside a model's range are refused.

- The chain's Lennard-Jones `σ > 0` and `ε ≥ 0` (finite): `σ = 0` (the potential vanishes),
  `σ < 0` and `ε < 0` (an attractive singularity) are refused at construction, by the chain
  models' `parameter_checks` when traced (naming the swept member), and by the command.
  `ε = 0`, a chain of free bodies, is accepted.
- A rolling ball's control must keep a segment rail's `θ` inside `[0, 1]` (a magnet cannot
  leave its tube): `SinusoidControl.theta_bounds` = `offset ± |amplitude|` against
  `SegmentRail.theta_range`, concrete, under `jit` and swept; periodic rails take any `θ`.

Cheap: one small compiled program of checks each; nothing is integrated.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

from jaxrigid import _checks, cli
from jaxrigid.cases import CASES
from jaxrigid.models.particle_chain import LennardJones
from jaxrigid.models.rolling_ball.controls import (
    ConstantControl,
    PiecewiseCubicControl,
    SinusoidControl,
    ZeroControl,
)
from jaxrigid.models.rolling_ball.rails import CircleRail, FunctionRail, SegmentRail, rail_checks
from jaxrigid.sweep import Sweep, Values, run

jax.config.update("jax_enable_x64", True)

SIGMA = r"LennardJones: sigma \(σ\) must be positive and finite"
EPSILON = r"LennardJones: epsilon \(ε\) must be non-negative and finite"
REACH = r"rail 0 \(SegmentRail\) allows θ in \[0, 1\] only .* control \(SinusoidControl\)"


# --- the chain's Lennard-Jones σ and ε ---------------------------------------------------------


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(sigma=0.0), SIGMA + r".*\(got 0\)"),
        (dict(sigma=-1.0), SIGMA + r".*\(got -1\)"),
        (dict(sigma=float("nan")), SIGMA),
        (dict(epsilon=-5.0), EPSILON + r".*\(got -5\)"),
        (dict(epsilon=float("inf")), EPSILON),
    ],
)
def test_bad_lennard_jones_is_refused_at_construction(kw, message):
    with pytest.raises(ValueError, match=message):
        LennardJones(**{"epsilon": 5.0, "sigma": 1.0, **kw})


def test_potential_free_chain_is_accepted():
    """`ε = 0`: `V ≡ 0`, a legitimate chain of free bodies."""
    lj = LennardJones(0.0, 1.0)
    assert float(lj(jnp.asarray(0.7))) == 0.0
    assert not any(bool(jnp.any(c.bad)) for c in lj.checks())


def test_lennard_jones_of_constants_inside_jit():
    """Constants inside a caller's `jit` are checked at once too (not a tracer's `bool`)."""
    v = jax.jit(lambda r: LennardJones(5.0, 1.0)(r) + LennardJones()(r))(jnp.asarray(1.0))
    assert float(v) == 0.0
    with pytest.raises(ValueError, match=SIGMA):
        jax.jit(lambda r: LennardJones(5.0, 0.0)(r))(jnp.asarray(1.0))


def test_chain_case_refuses_bad_sigma():
    case = CASES["chain-tetrahedra-c1c1"]
    with pytest.raises(ValueError, match=SIGMA):
        case.build(case.resolve({"sigma": 0.0}))


@pytest.fixture(scope="module")
def chain_model():
    case = CASES["chain-tetrahedra-c1c2"]
    return case.build(case.resolve())[0]


def test_chain_checks_name_the_swept_member(chain_model):
    """A swept `ε` (as a sweep builds it: arrays with a leading axis) through the chain
    model's `parameter_checks`, which `simulate` applies: member 1 named."""
    swept = eqx.tree_at(
        lambda m: m.chain.pair_potential.epsilon, chain_model, jnp.asarray([5.0, -5.0, 5.0])
    )
    with pytest.raises(ValueError, match=EPSILON + r".*\[ensemble member 1; 1 of 3"):
        _checks.apply(swept.parameter_checks())


def test_chain_checks_under_jit(chain_model):
    """Traced `σ`: the check runs in the compiled program and raises with the message."""

    @jax.jit
    def check(sigma):
        model = eqx.tree_at(lambda m: m.chain.pair_potential.sigma, chain_model, sigma)
        _checks.apply(model.parameter_checks())
        return sigma

    jax.block_until_ready(check(jnp.asarray(1.0)))
    with pytest.raises(Exception, match=SIGMA):
        jax.block_until_ready(check(jnp.asarray(0.0)))


# --- a control's reach against its rail's range ---------------------------------------------

LINEAR = CASES["rolling-ball-linear-rail"]


@pytest.mark.parametrize("amplitude", [3.0, -1.5])
def test_linear_rail_refuses_a_control_leaving_the_tube(amplitude):
    """`θ = 0.5 + 0.5 amplitude sin(...)`: amplitude 3 reaches θ ∈ [−1, 2] (the mass would
    sit 1.8 from the centre of a ball of radius 1, outside it)."""
    with pytest.raises(ValueError, match=REACH):
        LINEAR.build(LINEAR.resolve({"amplitude": amplitude}))
    with pytest.raises(ValueError, match=r"reaches θ in \[-1, 2\] \(furthest out quoted\)"):
        LINEAR.build(LINEAR.resolve({"amplitude": 3.0}))


@pytest.mark.parametrize("amplitude", [0.8, 1.0])
def test_linear_rail_accepts_a_control_inside_the_tube(amplitude):
    model, _ = LINEAR.build(LINEAR.resolve({"amplitude": amplitude}))
    assert not any(bool(jnp.any(c.bad)) for c in model.parameter_checks())


@pytest.fixture(scope="module")
def ball():
    return LINEAR.build(LINEAR.resolve())[0]


def test_reach_is_checked_under_jit(ball):
    """A traced amplitude (as `grad` or an optimiser sees it): refused in the program."""

    @jax.jit
    def check(amplitude):
        model = eqx.tree_at(lambda m: m.control.amplitude, ball, amplitude)
        _checks.apply(model.parameter_checks())
        return amplitude

    jax.block_until_ready(check(jnp.asarray([0.4])))
    with pytest.raises(Exception, match=REACH + r" reaches θ outside it"):
        jax.block_until_ready(check(jnp.asarray([0.6])))


def test_reach_names_the_swept_member(ball):
    """Amplitudes swept over members (leading axis): the bad member is named, its
    furthest-out θ quoted."""
    amplitudes = jnp.asarray([[0.4], [0.75], [0.2]])
    swept = eqx.tree_at(
        lambda m: m.control, ball, eqx.tree_at(lambda c: c.amplitude, ball.control, amplitudes)
    )
    with pytest.raises(ValueError, match=REACH + r".*\(got -0\.25\) \[ensemble member 1; 1 of 3"):
        _checks.apply(swept.parameter_checks())


def test_sweep_names_the_member_leaving_the_tube(tmp_path):
    """A sweep over the case's amplitude: member 1 (amplitude 3) refused before any work."""
    sweep = Sweep(LINEAR.name, axes=(Values("amplitude", (0.5, 3.0)),), t_end=0.2, chunk_size=2)
    with pytest.raises(ValueError, match=r"sweep member 1 \{'amplitude': 3.0\}: .*" + REACH):
        run(sweep, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    "name, setting, expected",
    [
        (LINEAR.name, "amplitude=3", "RollingBall: rail 0 (SegmentRail) allows θ in [0, 1] only"),
        (LINEAR.name, "amplitude=3", "reaches θ in [-1, 2]"),
        ("chain-tetrahedra-c1c2", "sigma=0", "LennardJones: sigma (σ) must be positive"),
        ("chain-tetrahedra-c1c2", "epsilon=-1", "LennardJones: epsilon (ε) must be non-negative"),
    ],
)
def test_command_refuses_before_building(name, setting, expected, capsys, tmp_path):
    """`jaxrigid run rolling-ball-linear-rail --set amplitude=3`: exit 2, one line; the
    model's construction refuses it, before any program is built (likewise a chain's σ, ε)."""
    assert cli.main(["run", name, "--set", setting, "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and len(lines) == 1
    assert lines[0].startswith(f"jaxrigid: error: case {name}: ")
    assert expected in lines[0]


def _segment():
    return SegmentRail(jnp.asarray([-0.5, 0.0, 0.0]), jnp.asarray([0.5, 0.0, 0.0]))


def _circle():
    return CircleRail(
        jnp.zeros(3), jnp.asarray(0.5), jnp.asarray([1.0, 0, 0]), jnp.asarray([0, 0, 1.0])
    )


def _failed(checks):
    return [c.message for c in checks if bool(jnp.any(c.bad))]


def test_reach_by_rail_and_control():
    """Periodic rails (a circle; a `FunctionRail` by default) take any θ; a segment and a
    `FunctionRail(periodic=False)` refuse a reach outside their range; constant and zero
    controls are bounded by their values; a spline is not bounded (not checked)."""
    far = SinusoidControl(*(jnp.asarray([v]) for v in (-1.57, 3.0, 1.0, 0.0)))
    assert _failed(rail_checks((_circle(),), far, 1.0)) == []
    fn = lambda th, p: p * jnp.stack([jnp.cos(th), jnp.sin(th), 0.0 * th])  # noqa: E731
    assert _failed(rail_checks((FunctionRail(fn, jnp.asarray(0.5)),), far, 1.0)) == []
    arc = FunctionRail(fn, jnp.asarray(0.5), interval=(0.0, 1.0), periodic=False)
    assert len(_failed(rail_checks((arc,), far, 1.0))) == 1
    assert ZeroControl(1).theta_bounds()[0].shape == (1,)
    still = SinusoidControl(*(jnp.asarray([v]) for v in (0.5, 3.0, 0.0, 0.1)))  # θ = 0.8
    assert _failed(rail_checks((_segment(),), still, 1.0)) == []
    for control, bad in [
        (ConstantControl(jnp.asarray([1.2])), 1),
        (ConstantControl(jnp.asarray([0.3])), 0),
        (ZeroControl(1), 0),
        (PiecewiseCubicControl(jnp.asarray(0.0), jnp.asarray(1.0), jnp.full((3, 1), 5.0)), 0),
    ]:
        assert len(_failed(rail_checks((_segment(),), control, 1.0))) == bad, control


def test_the_unreduced_ball_checks_its_rails_as_the_reduced_one(ball):
    """`RollingBallUnreduced` (the DLA integrators' and dynamic masses' model) refuses a
    control leaving its segment and a rail leaving the ball, as the reduced ball does (it
    accepted both: its checks did not look at the rails)."""
    from jaxrigid.models.rolling_ball.rails import CircleRail
    from jaxrigid.models.rolling_ball.unreduced import RollingBallUnreduced

    assert not any(
        bool(jnp.any(c.bad))
        for dynamic in (False, True)
        for c in RollingBallUnreduced.from_rolling_ball(ball, dynamic).parameter_checks()
    )
    wide = eqx.tree_at(lambda m: m.control.amplitude, ball, jnp.asarray([3.0]))
    with pytest.raises(ValueError, match="RollingBallUnreduced: " + REACH):
        _checks.apply(RollingBallUnreduced.from_rolling_ball(wide).parameter_checks())
    e1, e3 = jnp.asarray([1.0, 0, 0]), jnp.asarray([0, 0, 1.0])
    outside = eqx.tree_at(lambda m: m.rails, ball, (CircleRail(jnp.zeros(3), 1.2, e1, e3),))
    for dynamic in (False, True):  # dynamic: no control to check, the rail still is
        model = RollingBallUnreduced.from_rolling_ball(outside, dynamic)
        with pytest.raises(ValueError, match=r"rail 0 \(CircleRail\) leaves the ball.*got 1\.2"):
            _checks.apply(model.parameter_checks())
