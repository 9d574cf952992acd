"""Cost terms of `jaxrigid.control.costs` (issue 14) on trajectories whose integrals are known
in closed form, and the contact force that `rollout` records against the model's own.

- Trapezoid tracking of a straight path against `∫` in closed form (the rule is exact for a
  linear integrand; the squared error of a linear path is quadratic: the error is the
  trapezoid rule's `h²/12 ∫f''`, computed here exactly).
- Obstacles: zero outside the discs (with margin), positive inside, finite gradient at a
  disc's centre; the clearance.
- Contact limits: zero for a feasible contact force, the squared hinges otherwise.
- Composition: `a·A + b·B` = `a A + b B`, flattened; `parts`.
- Terminal terms: residuals and their squared norms.
- `rollout(..., contact=True)` = `model.contact_force` at the saved states.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.control.costs import (
    CirclePath,
    ContactLimits,
    DiscObstacles,
    Effort,
    FinalAttitude,
    FinalPosition,
    FinalRest,
    GeronoPath,
    RailBarrier,
    Tracking,
    Trajectory,
    WeightedSum,
    needs_contact,
    rollout,
)
from jaxrigid.control.parametrisations import BSplineControl
from jaxrigid.integrators.rkmk import RKMK4
from jaxrigid.models.rolling_ball import two_circles_ball


def _line(n=11, T=2.0, v=(0.5, 0.25)):
    ts = jnp.linspace(0.0, T, n)
    x = jnp.stack([v[0] * ts, v[1] * ts, jnp.ones_like(ts)], axis=-1)
    q = jnp.tile(jnp.asarray([1.0, 0.0, 0.0, 0.0]), (n, 1))
    Om = jnp.zeros((n, 3)).at[-1].set(jnp.asarray([0.1, -0.2, 0.3]))
    return Trajectory(ts, q, Om, x)


CONTROL = BSplineControl.zeros(2.0, 4, jnp.asarray([-1.0, -1.0]))


def test_tracking_trapezoid_against_closed_form():
    """Path `x*(t) = 0`, trajectory `x = vt`: `∫₀ᵀ |v|²t² dt = |v|²T³/3`; the trapezoid rule
    on n points errs by exactly `|v|²T h²/6` (`h²/12 ∫ f''`, `f'' = 2|v|²`), so the test
    checks `T³/3 + T h²/6` to 1e-14."""
    traj = _line()
    zero = Tracking(lambda t: jnp.zeros((2,)) * t)
    v2, T, h = 0.5**2 + 0.25**2, 2.0, 0.2
    np.testing.assert_allclose(zero(traj, CONTROL), v2 * (T**3 / 3 + T * h**2 / 6), rtol=1e-14)
    np.testing.assert_allclose(zero.errors(traj), np.sqrt(v2) * np.asarray(traj.ts), rtol=1e-14)


def test_paths_start_at_origin_and_close():
    """The circle of radius 1 centred at (0, 1) and the Gerono eight start at the origin
    and return to it after one period (to round-off, 1e-15)."""
    circle = CirclePath(jnp.asarray([0.0, 1.0]), jnp.asarray(1.0), jnp.asarray(10.0))
    eight = GeronoPath(jnp.asarray(1.0), jnp.asarray(1.0), jnp.asarray(12.0))
    for path, T in ((circle, 10.0), (eight, 12.0)):
        np.testing.assert_allclose(path(0.0), [0.0, 0.0], atol=1e-15)
        np.testing.assert_allclose(path(T), [0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(circle(5.0), [0.0, 2.0], atol=1e-15)


def test_obstacles():
    """A disc the line never comes near: zero cost, clearance = distance − radius. A disc
    on the line: positive cost, negative clearance. A disc centred exactly on a saved point:
    finite gradient (the NaN-free distance)."""
    traj = _line()
    far = DiscObstacles(jnp.asarray([[0.0, 5.0]]), jnp.asarray([1.0]))
    assert far(traj, CONTROL) == 0.0
    d = np.hypot(np.asarray(traj.x[:, 0]), np.asarray(traj.x[:, 1]) - 5.0)
    np.testing.assert_allclose(far.clearance(traj), d - 1.0, rtol=1e-14)
    on = DiscObstacles(jnp.asarray([[0.5, 0.25]]), jnp.asarray([0.2]), jnp.asarray(0.05))
    assert on(traj, CONTROL) > 0 and jnp.min(on.clearance(traj)) < 0
    g = jax.grad(lambda x: on(traj._replace(x=x), CONTROL))(traj.x)
    assert np.all(np.isfinite(g))


def test_contact_limits():
    """`F = (0.3, 0.4, 1)`: |F_t| = 0.5. μ = 0.6 and N ≥ 0: zero; μ = 0.4: hinge
    `(0.5 − 0.4)² = 0.01` over `[0, 2]`; N = −1: `(0 − N)² + (0.5 + μ)²`."""
    traj = _line(n=5)
    F = jnp.tile(jnp.asarray([0.3, 0.4, 1.0]), (5, 1))
    assert ContactLimits(jnp.asarray(0.6))(traj._replace(contact_force=F), CONTROL) == 0.0
    np.testing.assert_allclose(
        ContactLimits(jnp.asarray(0.4))(traj._replace(contact_force=F), CONTROL),
        0.01 * 2.0,
        rtol=1e-13,
    )
    Fneg = F.at[:, 2].set(-1.0)
    np.testing.assert_allclose(
        ContactLimits(jnp.asarray(0.4))(traj._replace(contact_force=Fneg), CONTROL),
        (1.0 + 0.9**2) * 2.0,
        rtol=1e-13,
    )
    with pytest.raises(ValueError, match="contact_force"):
        ContactLimits(jnp.asarray(0.4))(traj, CONTROL)


def test_rail_barrier_and_effort():
    """At `c = 0` the masses rest at θ = −1: inside [−2, 0] the barrier is 0; with the
    bounds [−0.5, 0] it is `∫₀² 2·0.5² dt = 1` (the quadrature integrates a constant
    exactly); the effort of rest is 0."""
    traj = _line()
    assert RailBarrier(jnp.asarray([-2.0, -2.0]), jnp.zeros(2))(traj, CONTROL) == 0.0
    np.testing.assert_allclose(
        RailBarrier(jnp.asarray([-0.5, -0.5]), jnp.zeros(2))(traj, CONTROL), 1.0, rtol=1e-14
    )
    assert Effort()(traj, CONTROL) == 0.0


def test_terminal_terms_and_composition():
    """Residuals at the last saved state; a cost is the residual's squared norm; weighted
    sums flatten and add; `needs_contact` finds a contact term inside a sum."""
    traj = _line()
    fp = FinalPosition(jnp.asarray([1.0, 0.0]))
    np.testing.assert_allclose(fp.residual(traj, CONTROL), [0.0, 0.5])
    assert FinalAttitude(jnp.asarray([-1.0, 0.0, 0.0, 0.0]))(traj, CONTROL) == 0.0
    np.testing.assert_allclose(FinalRest()(traj, CONTROL), 0.01 + 0.04 + 0.09, rtol=1e-15)
    total = 2.0 * fp + 3.0 * (FinalRest() + Effort())
    assert isinstance(total, WeightedSum) and len(total.terms) == 3
    np.testing.assert_allclose(total(traj, CONTROL), 2 * 0.25 + 3 * 0.14, rtol=1e-15)
    assert set(total.parts(traj, CONTROL)) == {"FinalPosition", "FinalRest", "Effort"}
    assert not needs_contact(total)
    assert needs_contact(total + ContactLimits(jnp.asarray(1.0)))
    with pytest.raises(ValueError, match=r"target must have shape \(2,\)"):
        FinalPosition(jnp.zeros(3))


def test_rollout_contact_force_is_the_models():
    """`rollout(contact=True)` records `model.contact_force(t, state)` at the saved times
    (the same function on the same states: 1e-13 relative), and the saved states are
    `simulate`'s."""
    model, state0 = two_circles_ball()
    traj = rollout(RKMK4(), model, state0, 0.05, 20, save_every=5, contact=True)
    assert traj.ts.shape == (5,) and traj.x.shape == (5, 3)
    for k in (0, 4):
        s = type(state0)(traj.q[k], traj.Omega[k], traj.x[k])
        np.testing.assert_allclose(
            traj.contact_force[k], model.contact_force(traj.ts[k], s), rtol=1e-13
        )
