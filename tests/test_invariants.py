"""What each method conserves in torque-free motion (Krysl §3.5, §3.7, §4), to round-off,
and — so that the test can fail — that it does not conserve what the paper says it does not.

10⁴ steps of Δt = 0.05 on the torque-free body. "Round-off" is a relative drift ≤ 1e-12: each
step's rounding error is ~1e-16 and the drift of a conserved quantity is a random walk of them
(√10⁴ · 1e-16 = 1e-14), leaving a factor 100 for Newton's stopping tolerance (≈ 2e-12 on the
update, whose effect on the solution is its square). "Not conserved" is a drift ≥ 1e-7: the
O(Δt²) = 2.5e-3 truncation errors of the second-order methods put that drift near
1e-4..1e-3; for the fourth-order MKRK variants (Δt⁴ ≈ 6e-6 times small constants) the bar is
1e-11, still ten times the round-off bound. A sixth-order method's truncation here is below
round-off (MKRK-gauss6: K drifts by 1.5e-14), so only its conservation claims are checked;
tests/test_mkrk_high_order.py shows its energy drift at Δt = 0.5.
"""

import jax
import jax.numpy as jnp
import pytest
from helpers import ALL_METHODS, method, one_step, problem

import jaxrigid as jr
from jaxrigid.diagnostics import invariants_along
from jaxrigid.integrators import ForwardEuler

DT, N = 0.05, 10_000
ROUND_OFF = 1e-12
NOT_KEPT = {1: 1e-7, 2: 1e-7, 4: 1e-11}


def _drifts(name):
    model, state0 = problem("krysl-torque-free")
    sol = jr.simulate(method(name), model, state0, DT, N, save_every=10)
    assert bool(sol.outcome.all_converged)
    inv = invariants_along(model, sol.ts, sol.states)
    pi = jnp.stack([inv["pi1"], inv["pi2"], inv["pi3"]], axis=-1)
    pi_drift = jnp.max(jnp.linalg.norm(pi - pi[:1], axis=-1)) / jnp.linalg.norm(pi[0])
    K = inv["K"]
    # TRAP's 'midpoint' energy (§3.5): K after a forward-Euler half step from each station.
    half = jax.vmap(lambda s: one_step(ForwardEuler(), model, s, 0.0, DT / 2)[0])
    K_mid = model.kinetic_energy(half(sol.states).Pi)
    return {
        "K": float(jnp.max(jnp.abs(K - K[0])) / K[0]),
        "pi": float(pi_drift),
        "RtR_error": float(jnp.max(inv["RtR_error"])),
        "K_midpoint": float(jnp.max(jnp.abs(K_mid - K_mid[0])) / K_mid[0]),
    }


@pytest.mark.parametrize("name", ALL_METHODS)
def test_conservation_claims(name):
    integrator = method(name)
    drifts = _drifts(name)
    for quantity, drift in drifts.items():
        if quantity in integrator.preserves:
            assert drift <= ROUND_OFF, (quantity, drift)
        elif quantity != "RtR_error" and integrator.order in NOT_KEPT:
            assert drift >= NOT_KEPT[integrator.order], (quantity, drift)


def test_every_method_keeps_orthogonality():
    assert all("RtR_error" in method(n).preserves for n in ALL_METHODS)


@pytest.mark.parametrize(
    "name,expected",
    [
        ("IMID", {"K"}),
        ("TRAP", {"K_midpoint"}),
        ("TRAPM", {"pi"}),
        ("IMIDM", {"pi"}),
        ("BBTRAPWD", {"pi"}),
        ("SWC1", {"K", "pi"}),
        ("BBTRAP", {"K", "pi"}),
        ("AKW", {"K", "pi"}),
    ],
)
def test_declared_properties_match_the_paper(name, expected):
    """Krysl §3.5 (IMID, TRAP), §3.7 (TRAPM, IMIDM), §4 (SWC1, AKW, BBTRAP, BBTRAPWD)."""
    assert method(name).preserves - {"RtR_error"} == expected
