"""The branch check of the implicit steps (`integrators.base.solve_on_branch`) and the first
contraction Newton reports for it (`Newton.solve_with_curvature`).

A step's root must be the one continuous in Δt. The check compares it with the predictor; where
the start's rate vanishes the predictor says nothing, and the Kantorovich condition at the start,
with the curvature Newton saw, decides.
Before that second test, a body at rest or spinning about a principal axis under a torque that
grows from zero, and a sleigh pushed from rest, failed their first step as `off_branch`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import jaxrigid as jr
from jaxrigid.integrators.base import solve_on_branch
from jaxrigid.models.nonholonomic import LagrangeDAlembertState, LagrangeDAlembertSystem
from jaxrigid.newton import Newton
from jaxrigid.results import RESULTS

EPS = float(np.finfo(np.float64).eps)


def _parabola(x):
    return x**2 - 1.0  # roots ±1


@jax.jit
def _curvatures(guess):
    """κ of full Newton, of one update, and of the chord iteration, on x² = 1."""
    full = Newton().solve_with_curvature(_parabola, guess)[2]
    one = Newton(max_steps=1).solve_with_curvature(_parabola, guess)[2]
    chord = Newton(chord=True).solve_with_curvature(_parabola, guess)[2]
    return full, one, chord


def _by_hand(x, slope=None):
    """κ = max |Δxₖ|/|Δxₖ₋₁|² over the updates that miss Newton's stopping rule, iterated
    in numpy (`slope`: the chord's fixed derivative), at most Newton's default 20 updates."""
    tol = EPS**0.75
    sizes, small = [], False
    while not small and len(sizes) < 20:
        dx = -(x**2 - 1) / (2 * x if slope is None else slope)
        x += dx
        small = abs(dx) <= tol + tol * abs(x)
        sizes.append((abs(dx), small))
    pairs = [b / a**2 for (a, _), (b, met) in zip(sizes, sizes[1:]) if not met]
    return max(pairs, default=0.0)


def test_newton_reports_its_curvature():
    """κ from the iterates written out by hand; for full Newton it is half the Kantorovich
    constant βγ = |1/(2x)|·2 = 1 at the root x = 1 (to 1e-4: the last pair's quadratic
    estimate is off by its update's size, 5e-6 here). From the root itself the first update
    meets the tolerance, and with one update allowed there is no pair: κ = 0."""
    full, one, chord = _curvatures(jnp.array([1.5]))
    # the same arithmetic in another order: a few ulps
    np.testing.assert_allclose(float(full), _by_hand(1.5), rtol=1e-12)
    np.testing.assert_allclose(float(chord), _by_hand(1.5, slope=3.0), rtol=1e-12)
    assert abs(float(full) - 0.5) < 1e-4
    assert float(one) == 0.0
    assert float(chord) > 1e3  # linear contraction: |Δxₖ|/|Δxₖ₋₁|² grows as they shrink
    full, one, chord = _curvatures(jnp.array([1.0]))
    assert float(full) == float(one) == float(chord) == 0.0


@jax.jit
def _branch_results(guess, start):
    return solve_on_branch(Newton(), _parabola, guess, start)[1].result


@pytest.mark.parametrize(
    ("guess", "start", "expected"),
    [
        # the predictor says nothing (guess = start); Newton's curvature κ = 1/2 puts the
        # start 0.9 inside the root's Kantorovich region: 2κ|x* − start| = 0.1 ≤ 1/2
        (0.9, 0.9, RESULTS.successful),
        # from 0.1 it is not (2κ|x* − start| = 0.9): Newton overshoots to 5.05 and walks
        # back; the root it reached is reported
        (0.1, 0.1, RESULTS.off_branch),
        # the predictor says it: the root 1 is nearer to 0.9 than 0.9 is to the start 0.5
        (0.9, 0.5, RESULTS.successful),
        # and here it does not, nor is the start inside the Kantorovich region: reported
        (0.1, 0.05, RESULTS.off_branch),
    ],
)
def test_a_root_reached_from_the_predictor_passes_and_one_reached_by_wandering_does_not(
    guess, start, expected
):
    result = _branch_results(jnp.array([guess]), jnp.array([start]))
    assert RESULTS(int(result)) == expected


def _first_by_hand(x, slope=None):
    """`(|x − x₁|, |x₁ − x₀|)` of Newton (or the chord with `slope`) on x² = 1 from `x`,
    iterated in numpy to Newton's stopping rule, at most its default 20 updates (the chord,
    contracting by 1/3, ends there)."""
    tol = EPS**0.75
    x0, x1, small, k = x, None, False, 0
    while not small and k < 20:
        k += 1
        dx = -(x**2 - 1) / (2 * x if slope is None else slope)
        x += dx
        x1 = x if x1 is None else x1
        small = abs(dx) <= tol + tol * abs(x)
    return abs(x - x1), abs(x1 - x0)


@jax.jit
def _first_iterates(guess):
    """The first iterate's distances of full Newton, the chord, and the loop-free two-update
    chord, with the root and κ of full Newton with and without them."""
    full = Newton().solve_with_curvature(_parabola, guess, first_iterate=True)
    chord = Newton(chord=True).solve_with_curvature(_parabola, guess, first_iterate=True)
    unrolled = Newton(chord=True, max_steps=2, peel=2)
    two = unrolled.solve_with_curvature(_parabola, guess, first_iterate=True)
    plain = Newton().solve_with_curvature(_parabola, guess)
    return full, chord[3], two[3], plain


def test_newton_reports_its_first_iterate():
    """From 1.5 on x² = 1: the first iterate's distances to the root and to the start, as
    iterated by hand (a few ulps: the same arithmetic), for full Newton, the chord and the
    loop-free chord of two updates (its second iterate is its root). Asking for them leaves
    the root, the info and κ as they were, to the bit."""
    full, chord, two, plain = _first_iterates(jnp.array([1.5]))
    np.testing.assert_allclose(np.asarray(full[3]).ravel(), _first_by_hand(1.5), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(chord).ravel(), _first_by_hand(1.5, 3.0), rtol=1e-12)
    x1 = 1.5 - 1.25 / 3.0
    x2 = x1 - (x1**2 - 1) / 3.0
    np.testing.assert_allclose(np.asarray(two).ravel(), [x1 - x2, 1.5 - x1], rtol=1e-12)
    assert all(
        bool(jnp.all(a == b)) for a, b in zip(jax.tree.leaves(full[:3]), jax.tree.leaves(plain))
    )


@jax.jit
def _from_start_results(start):
    return solve_on_branch(Newton(), _parabola, None, start)[1].result


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        # Newton from 0.9: x₁ = 1.0056, then the root 1, 0.0056 from x₁ against half of
        # |x₁ − 0.9| = 0.106
        (0.9, RESULTS.successful),
        # from 0.1 Newton jumps to x₁ = 5.05 and walks back to 1: 4.05 from x₁ is more than
        # half of 4.95, nor is 0.1 in the Kantorovich region (2κ|x* − start| = 0.9)
        (0.1, RESULTS.off_branch),
        # from 0.3: x₁ = 1.817, 0.817 back against half of 1.517; 2κ|x* − start| = 0.7
        (0.3, RESULTS.off_branch),
    ],
)
def test_without_a_predictor_newtons_first_iterate_is_one(start, expected):
    """`solve_on_branch(newton, residual, None, start)` (DLA-midpoint's form): Newton from
    the start, its first iterate the predictor, held to half the first update."""
    result = _from_start_results(jnp.array([start]))
    assert RESULTS(int(result)) == expected


def _ramp(t, R, Pi):
    """A torque growing from zero: τ = 3t e₂ (body frame), in the state's dtype."""
    return 3.0 * t * jnp.array([0.0, 1.0, 0.0], Pi.dtype)


INERTIA = np.array([1.0, 2.0, 3.0])
# at rest, and spinning about the principal axis e₃: Π̇ = Π × Ω + τ(0) = 0 at t = 0
STARTS = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 3.0]])


def _reference(pi0):
    """Π and R at t = 1 by DOP853 on Π̇ = Π × Ω + τ, Ṙ = R Ω̂ (rtol 1e-12)."""

    def rhs(t, y):
        R, Pi = y[:9].reshape(3, 3), y[9:]
        w = Pi / INERTIA
        hat = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
        return np.concatenate([(R @ hat).ravel(), np.cross(Pi, w) + [0.0, 3.0 * t, 0.0]])

    y = solve_ivp(
        rhs, (0, 1), np.concatenate([np.eye(3).ravel(), pi0]), "DOP853", rtol=1e-12, atol=1e-14
    ).y[:, -1]
    return y[:9].reshape(3, 3), y[9:]


@pytest.mark.parametrize("name", ["IMIDM", "IMID"])
def test_a_torque_growing_from_zero_is_not_a_step_failure(name):
    """IMID and IMIDM guess `Π(t + Δt/2)` by a half Euler step, `Π + (Δt/2)(Π × Ω + τ(0))`:
    at rest, or on a principal axis, that is the start itself. Every step now converges on
    the branch, and the error against DOP853 at t = 1 falls by 4 when Δt halves (order 2:
    the ratio measured from Δt = 0.1 and 0.05, within 3–5)."""
    model = jr.RigidBody(jnp.diag(jnp.asarray(INERTIA)), torque=_ramp)
    states = jr.RigidBodyState(R=jnp.broadcast_to(jnp.eye(3), (2, 3, 3)), Pi=jnp.asarray(STARTS))
    refs = [_reference(p) for p in STARTS]
    errors, finals = [], []
    for dt in (0.1, 0.05):
        sol = jr.simulate(jr.integrators.get_method(name), model, states, dt, round(1 / dt))
        assert bool(jnp.all(sol.outcome.all_converged)), sol.outcome.result
        final = sol.final_state
        finals.append(final)
        errors.append(
            [
                max(np.abs(np.asarray(final.R[i]) - R).max(), np.abs(final.Pi[i] - Pi).max())
                for i, (R, Pi) in enumerate(refs)
            ]
        )
    ratio = np.asarray(errors[0]) / np.asarray(errors[1])
    assert np.all((3 < ratio) & (ratio < 5)), (errors, ratio)
    # float32: the same steps pass, and end where float64's do to float32's round-off (one
    # eps = 1.2e-7 of |Π| ≤ 3.3 per step, 10 steps: 4e-6; measured 5.2e-7)
    f32 = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), (model, states))
    sol = jr.simulate(jr.integrators.get_method(name), *f32, jnp.float32(0.1), 10)
    assert sol.final_state.Pi.dtype == jnp.float32
    assert bool(jnp.all(sol.outcome.all_converged)), sol.outcome.result
    np.testing.assert_allclose(sol.final_state.Pi, finals[0].Pi, rtol=0, atol=4e-6)


def _sleigh_lagrangian(q, qdot, t, p):
    """The Chaplygin sleigh of docs/nonholonomic.md (centre of mass `a` ahead of the blade),
    its centre's velocity written out."""
    v = qdot[:2] + p["a"] * qdot[2] * jnp.stack([-jnp.sin(q[2]), jnp.cos(q[2])])
    return 0.5 * p["m"] * v @ v + 0.5 * p["I"] * qdot[2] ** 2


def _knife_edge(q, qdot, t, p):
    return jnp.stack([-jnp.sin(q[2]) * qdot[0] + jnp.cos(q[2]) * qdot[1]])


def _push(q, qdot, t, p):
    """F = 3t along the blade, at the blade."""
    return 3.0 * t * jnp.stack([jnp.cos(q[2]), jnp.sin(q[2]), jnp.zeros_like(t)])


def test_a_sleigh_pushed_from_rest_is_not_a_step_failure():
    """The sleigh at rest (m = 1, I = 0.2, a = 0.5), pushed along its blade by F = 3t: a
    Taylor predictor `(q̇₀ + (h/2) q̈₀, (h/2) λ₀)` would be the start `(0, 0)` (the midpoint
    DLA method's predictor is now Newton's first iterate from the start, design note 57). The
    motion is straight (the push's line passes through the centre of mass, the blade needs
    no force): speed `v = 3t²/2`, distance `s = t³/2`. The midpoint rule integrates the
    linear force exactly, so the speed is exact to round-off (1e-14: a few ulps of v = 1.5
    times the steps); the distance has the method's O(h²) error (ratio 4 measured from
    h = 0.1, 0.05, within 3.5–4.5); the heading does not move (to round-off)."""
    params = {"m": jnp.asarray(1.0), "I": jnp.asarray(0.2), "a": jnp.asarray(0.5)}
    system = LagrangeDAlembertSystem(_sleigh_lagrangian, _knife_edge, params=params, force=_push)
    state0 = LagrangeDAlembertState(jnp.array([0.0, 0.0, 0.3]), jnp.zeros(3))
    heading = np.array([np.cos(0.3), np.sin(0.3)])
    errors = []
    for h in (0.1, 0.05):
        sol = jr.simulate(jr.MidpointDLA(), system, state0, h, round(1 / h))
        assert bool(sol.outcome.all_converged), sol.outcome.result
        q, v = np.asarray(sol.final_state.q), np.asarray(sol.final_state.qdot)
        assert abs(v[:2] @ heading - 1.5) < 1e-14 and abs(v[2]) < 1e-14
        assert abs(q[2] - 0.3) < 1e-15
        errors.append(abs(q[:2] @ heading - 0.5))
    assert 3.5 < errors[0] / errors[1] < 4.5, errors
