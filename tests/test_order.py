"""Measured order of every rigid-body method against an independent DOP853 reference.

Krysl §5 shows second order for all methods on the torque-free body and the tops. Here the
order is the least-squares slope of log error against log Δt over four halvings of Δt, with
the reference from scipy's DOP853 at rtol = atol = 1e-13 (its error, < 1e-11, is below the
smallest error measured, ≥ 1e-8, by three orders of magnitude).
"""

import numpy as np
import pytest
from helpers import (
    ALL_METHODS,
    TORQUED_METHODS,
    integrate,
    method,
    problem,
    reference_at,
    state_error,
)

from jaxrigid.diagnostics import measured_order

# (case, t_end, coarsest Δt) per order: the horizon is long enough for the torque and the
# nonlinearity to act, short enough that the finest run is 2000–3200 steps. First-order
# methods on the fast top (spin 50) leave their asymptotic regime above Δt ≈ 1e-3, so they get
# a shorter horizon and smaller steps.
PROBLEMS = {
    1: [("krysl-torque-free", 10.0, 0.04), ("krysl-fast-top", 0.2, 0.0005)],
    2: [("krysl-torque-free", 10.0, 0.04), ("krysl-fast-top", 1.0, 0.004)],
}
# Sixth-order methods (MKRK-gauss6) reach the reference's own error (≈ 3e-13) within four
# halvings from any step still in their asymptotic regime; tests/test_mkrk_high_order.py
# measures their order over three step sizes chosen for order 6.
CASES = [
    (name, *p)
    for name in ALL_METHODS
    if method(name).order <= 4
    for p in PROBLEMS[min(method(name).order, 2)]
    if name in TORQUED_METHODS or p[0] == "krysl-torque-free"
]


@pytest.mark.parametrize("name,case_name,t_end,dt0", CASES)
def test_measured_order(name, case_name, t_end, dt0):
    integrator = method(name)
    model, state0 = problem(case_name)
    ref = reference_at(case_name, t_end)
    dts = [dt0 / 2**k for k in range(4)]
    n0 = round(t_end / dt0)
    errors = []
    for k, dt in enumerate(dts):
        final = integrate(integrator, model, state0, dt, n0 * 2**k, chunk=n0)
        errors.append(state_error(final, ref))
    errors = np.array(errors)
    for col, what in enumerate(("Pi", "R")):
        order = measured_order(dts, errors[:, col])
        # The window of ±0.1 around the theoretical order is what four halvings in the
        # asymptotic regime resolve; errors here stay ≥ 1e-9, far above the reference's.
        assert abs(order - integrator.order) <= 0.1, (what, order, errors[:, col])
