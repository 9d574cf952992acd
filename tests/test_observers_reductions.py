"""`observers.Reductions` (min, max, time average, first zero of scalar observables over every
step) and `observers.Combined`, checked against the same reductions computed with numpy from
the trajectory saved at every step, and against the harmonic oscillator's exact solution.

Equalities with the numpy reductions are to a few ulps: min and max see the same states
(bitwise); the time average and the interpolated zero add the same terms in another order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.cases import get_case
from jaxrigid.integrators import get_method
from jaxrigid.observers import Combined, InvariantDrift, Reductions, observable
from jaxrigid.simulation import simulate

EPS = np.finfo(np.float64).eps


def oscillator(**overrides):
    """q = sin 2t, p = 2 cos 2t (m = 1, k = 4): p's first zero is π/4, its time average over
    [0, T] is sin(2T)/T."""
    case = get_case("harmonic-oscillator")
    model, state0 = case.build(case.resolve(overrides))
    return get_method("stormer-verlet", case.family), model, state0


def numpy_reductions(ts, v):
    """The reductions from the values `v` at every step's time `ts`, by numpy."""
    crossing = np.nonzero((v[1:] == 0) | (np.sign(v[1:]) != np.sign(v[:-1])))[0]
    if v[0] == 0:
        first = ts[0]
    elif crossing.size:
        k = crossing[0]
        first = ts[k] + (ts[k + 1] - ts[k]) * v[k] / (v[k] - v[k + 1])
    else:
        first = np.nan
    mean = np.sum(0.5 * np.diff(ts) * (v[1:] + v[:-1])) / (ts[-1] - ts[0])
    return {"min": v.min(), "max": v.max(), "mean": mean, "first_zero": first}


@pytest.mark.parametrize("name", ["p[0]", "H", "q[0]"])
def test_reductions_equal_numpy_over_the_saved_trajectory(name):
    integrator, model, state0 = oscillator()
    n = 300  # T = 3: p crosses zero (π/4), q is zero at t = 0, H is a non-negative invariant
    full = simulate(integrator, model, state0, 0.01, n, save=lambda t, s: s)
    values = np.array(
        [
            float(observable(model, t, jax.tree_util.tree_map(lambda x: x[i], full.states), name))
            for i, t in enumerate(np.asarray(full.ts))
        ]
    )
    reductions = Reductions((name,))
    sol = simulate(integrator, model, state0, 0.01, n, save_every=n, observer=reductions)
    got = reductions.results(sol.observations)
    want = numpy_reductions(np.asarray(full.ts), values)
    scale = np.max(np.abs(values))
    for r in ("min", "max"):
        assert float(got[(name, r)]) == want[r], r  # the same states
    # the same n terms summed in another order: n ulps of the largest |v|
    assert abs(float(got[(name, "mean")]) - want["mean"]) <= n * EPS * scale
    if np.isnan(want["first_zero"]):
        assert np.isnan(float(got[(name, "first_zero")]))
    else:  # t + h·v0/(v0 − v1): a few roundings of numbers of size T
        assert abs(float(got[(name, "first_zero")]) - want["first_zero"]) <= 16 * EPS * 3.0


def test_first_zero_and_mean_converge_to_the_exact_solution_at_second_order():
    """p's first zero → π/4 and its time average over [0, 1] → sin(2)/1, both at order 2
    (Störmer–Verlet's phase error is O(h²); the linear interpolation's O(h³) at a zero of p,
    where p'' = 0; the trapezoidal rule's O(h²))."""
    errors = {"first_zero": [], "mean": []}
    hs = (0.04, 0.02, 0.01)
    for h in hs:
        integrator, model, state0 = oscillator()
        reductions = Reductions(("p[0]",))
        n = round(1.0 / h)
        sol = simulate(integrator, model, state0, h, n, save_every=n, observer=reductions)
        got = reductions.results(sol.observations)
        errors["first_zero"].append(abs(float(got[("p[0]", "first_zero")]) - np.pi / 4))
        errors["mean"].append(abs(float(got[("p[0]", "mean")]) - np.sin(2.0)))
    for what, e in errors.items():
        orders = np.log2(np.array(e[:-1]) / np.array(e[1:]))
        # asymptotic second order: within 0.15 of 2 once h ≤ 0.04 (measured 1.985–2.03)
        assert np.all(np.abs(orders - 2) < 0.15), (what, e, orders)


def test_reductions_under_vmap_jit_and_float32():
    """An ensemble of spring constants (p's first zero at π/(2√k)) run batched under jit equals
    each member run alone; float32 agrees with float64 to float32's resolution."""
    ks = jnp.array([1.0, 4.0, 9.0])
    integrator, model, state0 = oscillator()
    case = get_case("harmonic-oscillator")
    built = jax.vmap(lambda k: case.build({**case.resolve(), "k": k}))(ks)
    reductions = Reductions(("p[0]", "H"), ("max", "first_zero"))
    run = jax.jit(
        lambda m, s: (
            simulate(
                integrator, m, s, 0.01, 200, save_every=200, model_axes=0, observer=reductions
            ).observations
        )
    )
    batched = reductions.results(run(*built))
    for i, k in enumerate(np.asarray(ks)):
        _, m, s = oscillator(k=float(k))
        one = reductions.results(
            simulate(integrator, m, s, 0.01, 200, save_every=200, observer=reductions).observations
        )
        for key in one:
            np.testing.assert_array_equal(np.asarray(batched[key])[i], np.asarray(one[key]))
    # p = p0 cos(√k t) with p0 = 2: the first zero at π/(2√k), to O(h²) ≈ 1e-4
    np.testing.assert_allclose(
        np.asarray(batched[("p[0]", "first_zero")]), np.pi / (2 * np.sqrt(ks)), atol=2e-4
    )
    m32, s32 = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float32), (model, state0))
    r32 = reductions.results(
        simulate(
            integrator, m32, s32, jnp.float32(0.01), 200, save_every=200, observer=reductions
        ).observations
    )
    r64 = reductions.results(
        simulate(
            integrator, model, state0, 0.01, 200, save_every=200, observer=reductions
        ).observations
    )
    for key in r64:
        assert r32[key].dtype == jnp.float32
        # 200 steps of float32 rounding on O(1) values: well under 1e-4 (measured ~1e-6)
        np.testing.assert_allclose(float(r32[key]), float(r64[key]), atol=1e-4)


def test_combined_observers_equal_the_observers_run_alone():
    integrator, model, state0 = oscillator()
    reductions, drift = Reductions(("q[0]",)), InvariantDrift()
    both = simulate(
        integrator, model, state0, 0.01, 100, save_every=100, observer=Combined((drift, reductions))
    ).observations
    alone = [
        simulate(integrator, model, state0, 0.01, 100, save_every=100, observer=o).observations
        for o in (drift, reductions)
    ]
    for a, b in zip(jax.tree_util.tree_leaves(both), jax.tree_util.tree_leaves(alone)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize(
    "name, message",
    [
        ("nope", "unknown observable 'nope'"),
        ("p[5]", "give one index per axis"),
        ("p", "give one index per axis"),
        ("p[0,0]", "give one index per axis"),
        ("p[-1]", "unknown observable"),
    ],
)
def test_bad_observables_are_named(name, message):
    integrator, model, state0 = oscillator()
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        simulate(integrator, model, state0, 0.01, 10, observer=Reductions((name,)))


def test_bad_reductions_are_named():
    with pytest.raises(ValueError, match="unknown reduction"):
        Reductions(("H",), ("median",))
