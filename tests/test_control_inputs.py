"""Issue 32 for the optimiser: bad `dt`, starts and tolerances refused when the problem (or
the starts) are built, naming the argument and the value; `converged` on the optimiser's
result, the verdict on its constraint tolerance (`jaxrigid control`'s is in
`test_cli_control.py`). Cheap: the refusals come before anything is simulated, and the
optimiser runs on a toy objective of two unknowns (tiny programs)."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.control import presets
from jaxrigid.control.optimise import (
    DEFAULT_TOLERANCE,
    AugmentedLagrangian,
    multi_start,
    optimise,
)
from jaxrigid.control.presets import PROBLEMS, get_problem, initial_guesses

BAD_STEPS = [
    (0, ValueError, r"dt must be a positive finite number, got 0$"),
    (0.0, ValueError, r"dt must be a positive finite number, got 0\.0$"),
    (-0.05, ValueError, r"dt must be a positive finite number, got -0\.05$"),
    (float("nan"), ValueError, r"dt must be a positive finite number, got nan$"),
    (float("inf"), ValueError, r"dt must be a positive finite number, got inf$"),
    (np.float64(-1.0), ValueError, r"dt must be a positive finite number, got "),
    (True, TypeError, r"dt must be a number, got True \(bool\)$"),
    ("0.05", TypeError, r"dt must be a number, got '0\.05' \(str\)$"),
    ([0.05], TypeError, r"dt must be a number, got \[0\.05\] \(list\)$"),
]


@pytest.fixture
def nothing_built(monkeypatch):
    """A problem builder that gets past its checks fails the test: the refusals come before
    the ball, its control or any program is built."""

    def built(*args, **kwargs):
        raise AssertionError("two_circles_start was called before the arguments were checked")

    monkeypatch.setattr(presets, "two_circles_start", built)


@pytest.mark.parametrize(("dt", "error", "message"), BAD_STEPS)
@pytest.mark.parametrize("mode", ["prescribed", "dynamic"])
def test_get_problem_refuses_a_bad_step(dt, error, message, mode, nothing_built):
    """reach-point with `dt` 0, negative, NaN, inf (`ValueError`: before, a
    ZeroDivisionError, "cannot convert float NaN to integer" or "dt must divide T"), a
    boolean, a string or a list (`TypeError`), in both modes, before anything is built."""
    with pytest.raises(error, match=message):
        get_problem("reach-point", dt=dt, mode=mode)


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_every_problem_checks_its_step(name, nothing_built):
    """Every named problem refuses `dt = 0` and `dt = True` the same way."""
    with pytest.raises(ValueError, match=r"dt must be a positive finite number, got 0$"):
        get_problem(name, dt=0)
    with pytest.raises(TypeError, match=r"dt must be a number, got True \(bool\)$"):
        get_problem(name, dt=True)


def test_valid_steps_still_build():
    """A NumPy float and an integer are real numbers: `dt = np.float64(0.25)` builds the
    same problem as 0.25, `dt = 1` one of 5 steps; a step that does not divide T is still
    refused as before."""
    a = get_problem("reach-point", dt=np.float64(0.25))
    assert type(a.dt) is float and a.dt == 0.25 and a.n_steps == 20
    assert get_problem("reach-point", dt=1).n_steps == 5
    with pytest.raises(ValueError, match=r"dt must divide T = 5\.0, got 0\.3$"):
        get_problem("reach-point", dt=0.3)


@pytest.fixture(scope="module")
def coarse():
    return get_problem("reach-point", dt=0.25)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"dt": float("inf")}, ValueError, r"dt must be a positive finite number, got inf$"),
        ({"dt": -0.25}, ValueError, r"dt must be a positive finite number, got -0\.25$"),
        ({"n_steps": 0}, ValueError, r"ControlProblem: n_steps must be ≥ 1, got 0$"),
        ({"n_steps": True}, TypeError, r"ControlProblem: n_steps must be an integer, got True$"),
        ({"n_steps": 20.0}, TypeError, r"n_steps must be an integer, got 20\.0$"),
        ({"save_every": 0}, ValueError, r"ControlProblem: save_every must be ≥ 1, got 0$"),
        ({"tolerance": float("nan")}, ValueError, r"tolerance must be ≥ 0, got nan$"),
        ({"tolerance": -1e-3}, ValueError, r"tolerance must be ≥ 0, got -0\.001$"),
    ],
)
def test_control_problem_checks_its_fields(coarse, change, error, message):
    """`ControlProblem` itself (built directly or replaced) checks `dt` as `get_problem`
    does (an infinite step used to pass), and `n_steps`, `save_every`, `tolerance`."""
    with pytest.raises(error, match=message):
        dataclasses.replace(coarse, **change)


@pytest.mark.parametrize(
    ("k", "error", "message"),
    [
        (0, ValueError, r"k \(the number of starts\) must be ≥ 1, got 0$"),
        (-2, ValueError, r"k \(the number of starts\) must be ≥ 1, got -2$"),
        (True, TypeError, r"k \(the number of starts\) must be an integer, got True$"),
        (2.0, TypeError, r"k \(the number of starts\) must be an integer, got 2\.0$"),
        ("2", TypeError, r"k \(the number of starts\) must be an integer, got '2'$"),
    ],
)
def test_initial_guesses_refuses_bad_counts(coarse, k, error, message):
    """`initial_guesses(problem, 0)` said "negative dimensions are not allowed"; a boolean
    would have been one start."""
    with pytest.raises(error, match=message):
        initial_guesses(coarse, k)


def test_initial_guesses_refuses_bad_scales(coarse):
    with pytest.raises(ValueError, match=r"scale must be a finite number ≥ 0, got nan$"):
        initial_guesses(coarse, 2, scale=float("nan"))
    with pytest.raises(ValueError, match=r"scale must be a finite number ≥ 0, got -1\.0$"):
        initial_guesses(coarse, 2, scale=-1.0)
    assert initial_guesses(coarse, np.int64(1)).shape == (1, *coarse.coefficient_shape)


# ----------------------------------------------------------------------------------------
# `converged` on a toy objective: f = |p|², c = (p₀ − 1) (feasible: c = 0 at p = (1, 0)) or
# (p₀ − 1, p₀ + 1) (infeasible: |c| ≥ √2, least at p₀ = 0)


class Toy(eqx.Module):
    infeasible: bool = eqx.field(static=True)
    tolerance: float = eqx.field(static=True, default=DEFAULT_TOLERANCE)

    def __call__(self, p):
        c = p[:1] - 1.0
        if self.infeasible:
            c = jnp.concatenate([c, p[:1] + 1.0])
        return jnp.sum(p * p), c


SETTINGS = AugmentedLagrangian(n_outer=6, n_inner=15)
P0 = jnp.asarray([0.3, -0.2])


@pytest.fixture(scope="module")
def toy_results():
    return {infeasible: optimise(Toy(infeasible), P0, SETTINGS) for infeasible in (False, True)}


def test_converged_when_the_constraint_holds(toy_results):
    """The feasible toy ends at p = (1, 0) with |c| within 1e-3: `converged` is a true bool."""
    res = toy_results[False]
    assert res.converged.dtype == jnp.bool_ and res.converged.shape == ()
    assert bool(res.converged) and float(res.residual_norm) <= 1e-3
    np.testing.assert_allclose(res.coefficients, [1.0, 0.0], atol=1e-3)


def test_not_converged_when_the_constraint_cannot_hold(toy_results):
    """The infeasible toy cannot get |c| below √2: `converged` false, the residual stated."""
    res = toy_results[True]
    assert not bool(res.converged)
    assert float(res.residual_norm) >= np.sqrt(2) - 1e-9


def test_tolerance_from_the_objective_or_the_call(toy_results):
    """The default tolerance is the objective's own (`ControlProblem.tolerance`): the same
    infeasible result (|c| ≈ √2) converges against a tolerance of 2, as it does with
    `tolerance=2` given, and not with 1. A NaN or negative tolerance is refused."""
    res = toy_results[True]
    assert np.sqrt(2) - 1e-9 <= float(res.residual_norm) < 1.5
    assert bool(optimise(Toy(True, tolerance=2.0), P0, SETTINGS).converged)
    assert bool(optimise(Toy(True), P0, SETTINGS, tolerance=2.0).converged)
    assert not bool(optimise(Toy(True, tolerance=2.0), P0, SETTINGS, tolerance=1.0).converged)
    with pytest.raises(ValueError, match=r"tolerance must be a number ≥ 0 \(or inf\), got nan"):
        optimise(Toy(True), P0, SETTINGS, tolerance=float("nan"))
    with pytest.raises(ValueError, match=r"tolerance must be a number ≥ 0 \(or inf\), got -1"):
        multi_start(Toy(True), P0[None], SETTINGS, tolerance=-1)


def test_multi_start_counts_converged_starts():
    """`multi_start`: one `converged` per start; `n_feasible` counts them; the best start
    converged when any did, and is not converged when none could."""
    p0s = jnp.stack([P0, -P0, 2 * P0])
    feasible = multi_start(Toy(False), p0s, SETTINGS)
    assert feasible.all.converged.shape == (3,) and bool(jnp.all(feasible.all.converged))
    assert int(feasible.spread["n_feasible"]) == 3 and bool(feasible.best.converged)
    infeasible = multi_start(Toy(True), p0s, SETTINGS)
    assert not bool(jnp.any(infeasible.all.converged))
    assert int(infeasible.spread["n_feasible"]) == 0 and not bool(infeasible.best.converged)
