"""`PoincareSection`: crossings of `q2 = 0, q1 > 0, q̇2 > 0` counted and located in the scan."""

from __future__ import annotations

import contextlib
import io
import json
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

import jaxrigid as jr
from jaxrigid import cli
from jaxrigid.cases import hamiltonian as cases
from jaxrigid.integrators import HAMILTONIAN_METHODS
from jaxrigid.integrators.base import AbstractIntegrator, explicit_info
from jaxrigid.models import hamiltonian as ham
from jaxrigid.models.hamiltonian import CanonicalState
from jaxrigid.models.structures import AbstractCanonicalSystem
from jaxrigid.observers import PoincareSection


class _ExactRotation(AbstractIntegrator):
    """The exact flow of `H = (|p|² + |q|²)/2`: a rotation of every `(qᵢ, pᵢ)` plane by `h`."""

    name: ClassVar[str] = "exact-rotation"
    order: ClassVar[int] = 99
    structures = (AbstractCanonicalSystem,)

    def step(self, model, state, solver_state, t, h):
        c, s = jnp.cos(h), jnp.sin(h)
        q, p = state
        return CanonicalState(c * q + s * p, c * p - s * q), solver_state, explicit_info(q.dtype)


def _circle(direction=1.0):
    model = ham.harmonic_oscillator(m=1.0, k=1.0)
    return model, CanonicalState(jnp.array([1.0, 0.0]), jnp.array([0.0, direction]))


def test_uniform_rotation_crossings_exact_count_and_hermite_accuracy():
    """`q = (cos t, sin t)` crosses at `t = 2πk` with `q = (1, 0)`, `p = (0, 1)`. Over
    `0 ≤ t ≤ 100` (dt = 0.01, crossings never on the grid) that is k = 1..15, the initial
    point excluded by default and included with `include_initial=True`.

    Tolerance: the cubic Hermite interpolant errs by at most `h⁴/384 · max|y⁗| = 2.6e-11`
    (h = 0.01, |y⁗| ≤ 1) per coordinate, and the root time by that over `|q̇2| = 1`; the exact
    flow adds only rounding (10⁴ rotations, ~1e-12). 1e-9 leaves a wide margin; a linear
    (secant) interpolation would err by `h²/8 = 1.25e-5` and fail it.
    """
    model, state0 = _circle()
    dt, n = 0.01, 10_000
    sol = jr.simulate(
        _ExactRotation(), model, state0, dt, n, observer=PoincareSection(max_points=32)
    )
    obs = sol.observations
    assert int(obs.count) == 15
    k = np.arange(1, 16)
    np.testing.assert_allclose(np.asarray(obs.times[:15]), 2 * np.pi * k, rtol=0, atol=1e-9)
    expected = np.tile([1.0, 0.0, 0.0, 1.0], (15, 1))
    np.testing.assert_allclose(np.asarray(obs.points[:15]), expected, rtol=0, atol=1e-9)
    assert np.isnan(np.asarray(obs.points[15:])).all()

    with_initial = jr.simulate(
        _ExactRotation(),
        model,
        state0,
        dt,
        n,
        observer=PoincareSection(max_points=32, include_initial=True),
    ).observations
    assert int(with_initial.count) == 16 and float(with_initial.times[0]) == 0.0
    np.testing.assert_array_equal(np.asarray(with_initial.times[1:16]), np.asarray(obs.times[:15]))

    # clockwise: q2 rises only where q1 < 0, so nothing crosses the half-plane q1 > 0
    model, backwards = _circle(-1.0)
    none = jr.simulate(_ExactRotation(), model, backwards, dt, n, observer=PoincareSection())
    assert int(none.observations.count) == 0

    # overflow: every crossing counted, the first max_points stored
    few = jr.simulate(
        _ExactRotation(), model, state0, dt, n, observer=PoincareSection(max_points=4)
    ).observations
    assert int(few.count) == 15
    np.testing.assert_array_equal(np.asarray(few.times), np.asarray(obs.times[:4]))


def _galactic(members=None):
    model, state0 = cases._build_galactic(cases.CASES[-1].resolve())
    if members is not None:
        state0 = cases.perturb_canonical(state0, np.random.default_rng(0), 0.05, members)
    return model, state0


def test_galactic_count_matches_saved_states_and_ensemble_equals_single_runs():
    """With every step saved, the count equals the steps where q2 goes from < 0 to ≥ 0 with
    q1 > 0 (for these orbits the sign of q1 is the same at both ends and at the root); each
    ensemble member's observations equal its single run's."""
    rk4 = HAMILTONIAN_METHODS["rk4"]()
    model, states = _galactic(3)
    section = PoincareSection(max_points=64)
    whole = jr.simulate(rk4, model, states, 0.1, 3000, observer=section)
    q = np.asarray(whole.states.q)
    steps = (q[:, :-1, 1] < 0) & (q[:, 1:, 1] >= 0) & (q[:, 1:, 0] > 0)
    counts = np.asarray(whole.observations.count)
    np.testing.assert_array_equal(counts, steps.sum(axis=1))
    assert counts.min() >= 10
    q1 = np.asarray(whole.observations.points[..., 1])  # q2 at the crossings: ≈ 0
    assert np.nanmax(np.abs(q1)) < 1e-6
    for i in range(3):
        one = jr.simulate(
            rk4, model, jax.tree_util.tree_map(lambda x: x[i], states), 0.1, 3000, observer=section
        ).observations
        assert int(one.count) == counts[i]
        np.testing.assert_allclose(
            np.asarray(one.points), np.asarray(whole.observations.points[i]), rtol=1e-12, atol=1e-12
        )


def test_chunked_continuation_equals_one_run():
    """Two calls with `observations0 = first.observations` give the one run's carry."""
    rk4 = HAMILTONIAN_METHODS["rk4"]()
    model, states = _galactic(2)
    section = PoincareSection(max_points=64)
    whole = jr.simulate(rk4, model, states, 0.1, 3000, observer=section).observations
    first = jr.simulate(rk4, model, states, 0.1, 1500, observer=section)
    second = jr.simulate(
        rk4,
        model,
        first.final_state,
        0.1,
        1500,
        t0=150.0,
        observer=section,
        observations0=first.observations,
    ).observations
    np.testing.assert_array_equal(np.asarray(second.count), np.asarray(whole.count))
    np.testing.assert_allclose(np.asarray(second.times), np.asarray(whole.times), rtol=1e-12)
    np.testing.assert_allclose(
        np.asarray(second.points), np.asarray(whole.points), rtol=1e-12, atol=1e-12
    )


def _run(args, out):
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        rc = cli.main(["run", *args, "--json", "--out", str(out)])
    assert rc == 0
    return json.loads(stdout.getvalue())


def test_cli_galactic_orbit_reports_poincare_crossings(tmp_path):
    """`jaxrigid run galactic-orbit --t-end 200` reports the count, equal to a direct
    `simulate` with the case's observer (the CLI carries it across its chunks); with an
    ensemble, one count per member; and over several chunks (rk4, dt = 0.05: 2 chunks)
    equal to one `simulate` call."""
    report = _run(["galactic-orbit", "--t-end", "200"], tmp_path)
    count = report["observables"]["poincare_crossings"]
    model, state0 = _galactic()
    direct = jr.simulate(
        HAMILTONIAN_METHODS["gauss6"](), model, state0, 0.4, 500, observer=PoincareSection()
    )
    assert isinstance(count, int) and count == int(direct.observations.count) > 0
    ensemble = _run(["galactic-orbit", "--t-end", "200", "--ensemble", "2"], tmp_path)
    counts = ensemble["observables"]["poincare_crossings"]
    assert len(counts) == 2 and counts[0] == count
    chunked = _run(
        ["galactic-orbit", "--t-end", "200", "--method", "rk4", "--dt", "0.05"], tmp_path
    )
    direct = jr.simulate(
        HAMILTONIAN_METHODS["rk4"](), model, state0, 0.05, 4000, observer=PoincareSection()
    )
    assert chunked["observables"]["poincare_crossings"] == int(direct.observations.count) > 0
