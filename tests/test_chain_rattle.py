"""The chain of rigid bodies in rotation-matrix form (Chaurasia 2012, §3.2, §3.2.4, App. B)
integrated by `RATTLE`, on §3.5's chain: 8 tetrahedra between two end bodies (N + 2 = 10,
a = 1, m = 1), Lennard-Jones ε = 5, σ = 1, rᵢ(0) = (2i, 0, 0), F = (3, 0, 0) for c1-c2, random
initial velocities (|v| ~ 0.3) and spins (|ω| ~ 1). Measured order against an independent
DOP853 reference, bounded energy error and its h² scaling, constraints, held bodies, momenta of
the free chain, ensembles, float32, gradients, and the refusals of bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import jaxrigid as jr
from jaxrigid.diagnostics import invariants_along, measured_order
from jaxrigid.integrators import RATTLE
from jaxrigid.lie import so3
from jaxrigid.models.chain_boundary import ChainBoundary
from jaxrigid.models.chain_matrix import ChainMatrixState, RigidBodyChain, from_velocities
from jaxrigid.models.particle_body import ParticleBody, tetrahedron
from jaxrigid.models.particle_chain import LennardJones, ParticleChain
from jaxrigid.newton import default_tolerance

EPS = np.finfo(np.float64).eps
N_BODIES = 10
CHAIN = ParticleChain(tetrahedron(1.0, 1.0), LennardJones(jnp.asarray(5.0), jnp.asarray(1.0)))
FORCES = {"c1-c1": None, "c1-c2": jnp.array([3.0, 0.0, 0.0]), "c1-c3": None, "free": None}


def boundary(kind):
    force = FORCES[kind]
    return ChainBoundary(kind) if force is None else ChainBoundary(kind, force)


def start(kind, seed=0, v_scale=0.3, w_scale=1.0, chain=CHAIN, n=N_BODIES):
    """§3.5's straight chain with random velocities and body angular velocities."""
    model = RigidBodyChain(chain, boundary(kind))
    r = jnp.stack([2.0 * jnp.arange(n), jnp.zeros(n), jnp.zeros(n)], axis=-1)
    R = jnp.broadcast_to(jnp.eye(3), (n, 3, 3))
    kv, kw = jax.random.split(jax.random.PRNGKey(seed))
    v = v_scale * jax.random.normal(kv, (n, 3))
    w = w_scale * jax.random.normal(kw, (n, 3))
    return model, from_velocities(chain, model.boundary, r, R, v, w)


CHUNK, SAVE_EVERY = 1000, 5  # every run: chunks of one compiled length (one per boundary)


def run(model, state0, dt, n_steps, save_every=None, integrator=RATTLE()):
    sol = jr.simulate(integrator, model, state0, dt, n_steps, save_every=save_every or n_steps)
    assert bool(np.all(sol.outcome.all_converged)), sol.outcome
    return sol


def chunked(model, state0, dt, n_chunks):
    """`n_chunks · CHUNK` steps: (every 5th state from the start, the final state)."""
    state, saved = state0, []
    for k in range(n_chunks):
        sol = run(model, state, dt, CHUNK, SAVE_EVERY)
        saved.append(jax.tree_util.tree_map(lambda x: x[1:] if k else x, sol.states))
        state = sol.final_state
    return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *saved), state


energies = eqx.filter_jit(jax.vmap(RigidBodyChain.energy, in_axes=(None, 0)))


def energy_errors(model, state0, dt, n_chunks):
    """`H − H₀` at every 5th step of `n_chunks · CHUNK` steps."""
    states, _ = chunked(model, state0, dt, n_chunks)
    E = np.asarray(energies(model, states))
    return E - E[0]


# --- the model --------------------------------------------------------------------------


def test_energy_and_angular_momentum_equal_the_particles():
    """The chain's kinetic energy (3.5) and angular momentum `Σ r×p + vee(PRᵀ − RPᵀ)` equal
    `Σ ½mᵏ|ẋᵏ|²` and `Σ mᵏ xᵏ×ẋᵏ` over all particles, `xᵏ = r + R rᵏ`, `ẋᵏ = ṙ + R ω̂ rᵏ`
    (random attitudes: the spin formula and `P = R ω̂ J` are convention-sensitive)."""
    model, state = start("free", seed=3)
    R = so3.exp(jax.random.normal(jax.random.PRNGKey(4), (N_BODIES, 3)))
    w = jax.random.normal(jax.random.PRNGKey(5), (N_BODIES, 3))
    v = state.p / model.mass
    state = from_velocities(CHAIN, model.boundary, state.r, R, v, w)
    body = CHAIN.body
    x = body.positions(state.r, R)  # (N+2, n_p, 3)
    xdot = v[:, None, :] + jnp.einsum("jab,jbc,kc->jka", R, so3.hat(w), body.r)
    K_particles = 0.5 * jnp.sum(body.m[None, :, None] * xdot * xdot)
    L_particles = jnp.sum(body.m[None, :, None] * jnp.cross(x, xdot), axis=(0, 1))
    inv = model.invariants(0.0, state)
    V = model.potential(state.r, R)
    # 1e-13: sums of ~40 particles' products of O(10) numbers, a few eps each
    np.testing.assert_allclose(inv["energy"] - V, K_particles, rtol=1e-13)
    L = np.array([inv[f"angular_momentum{i}"] for i in (1, 2, 3)])
    np.testing.assert_allclose(L, L_particles, rtol=0, atol=1e-13 * np.abs(L_particles).max())
    assert set(inv) == {
        "energy",
        *(f"momentum{i}" for i in (1, 2, 3)),
        *(f"angular_momentum{i}" for i in (1, 2, 3)),
        "RtR_error",
        "tangency_error",
    }
    # the state from velocities is on the constraint manifold: P = Rω̂J is tangent
    assert float(inv["tangency_error"]) < 10 * EPS * float(jnp.max(jnp.abs(w)))


# --- accuracy ---------------------------------------------------------------------------


def reference_final(model, state0, t_end):
    """(r, R) at `t_end` by DOP853 (rtol = atol = 1e-12) on the unconstrained ODE in
    (r, p, R, P): `Ṙ = PJ⁻¹`, `Ṗ = −∂V/∂R − RS` with the exact multiplier `S` of the hidden
    constraint `d²(RᵀR)/dt² = 0`, `SD + DS = 2ṘᵀṘ − RᵀGD − DGᵀR` (`D = J⁻¹` diagonal,
    `G = ∂V/∂R`, so `S_ij = M_ij/(d_i + d_j)`); held coordinates masked. Shares only the
    potential's gradient (checked in test_chain_particles.py) with RATTLE."""
    n = state0.r.shape[0]
    tm = np.asarray(model.boundary.translation_mask(n))[:, None]
    rm = np.asarray(model.boundary.rotation_mask(n))[:, None, None]
    d = np.asarray(model.inverse_mass_diagonal)
    m = float(model.mass)
    grads = jax.jit(lambda r, R: model.gradients(r, R))
    sizes = [n * 3, n * 3, n * 9, n * 9]

    def unpack(y):
        r, p, R, P = np.split(y, np.cumsum(sizes)[:-1])
        return r.reshape(n, 3), p.reshape(n, 3), R.reshape(n, 3, 3), P.reshape(n, 3, 3)

    def rhs(t, y):
        r, p, R, P = unpack(y)
        gr, G = (np.asarray(g) for g in grads(jnp.asarray(r), jnp.asarray(R)))
        Rdot = P * d[None, None, :]
        RtGD = np.swapaxes(R, -1, -2) @ G * d[None, None, :]
        M = 2 * np.swapaxes(Rdot, -1, -2) @ Rdot - RtGD - np.swapaxes(RtGD, -1, -2)
        S = M / (d[:, None] + d[None, :])[None]
        Pdot = -G - R @ S
        parts = (tm * p / m, -tm * gr, rm * Rdot, rm * Pdot)
        return np.concatenate([x.ravel() for x in parts])

    y0 = np.concatenate([np.asarray(x).ravel() for x in state0])
    sol = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", rtol=1e-12, atol=1e-12)
    assert sol.success
    r, _, R, _ = unpack(sol.y[:, -1])
    return r, R


def test_order_two_against_reference():
    """c1-c2 (held, forced and free bodies): the error in (r, R) at t = 1 for h = 10⁻³ …
    2.5·10⁻⁴ against DOP853 (hω ≤ 0.15 for the stiffest Lennard-Jones mode, ω ≈ 150 near 0.9σ;
    measured slopes 2.0006, 2.0002)."""
    model, state0 = start("c1-c2")
    t_end, n0 = 1.0, CHUNK
    r_ref, R_ref = reference_final(model, state0, t_end)
    errors, dts = [], []
    for k in range(3):
        dt = t_end / (n0 * 2**k)
        _, state = chunked(model, state0, dt, 2**k)
        errors.append(max(np.abs(state.r - r_ref).max(), np.abs(state.R - R_ref).max()))
        dts.append(dt)
    order = measured_order(dts, errors)
    # ±0.1: slope over two halvings in the asymptotic regime; the reference's error (~1e-11)
    # is far below the smallest (3e-5)
    assert abs(order - 2.0) <= 0.1, (order, errors)


@pytest.mark.parametrize("kind", ["c1-c1", "c1-c2"])
def test_energy_error_bounded_without_drift(kind):
    """t = 50 (about 2·10³ periods of the stiffest mode) at h = 0.0025: |H − H₀| over the last
    tenth of the run is no larger than over the first (measured ratios 0.5), and its mean
    there (the drift) is within the fluctuation. A non-symplectic second-order method drifts
    linearly; RATTLE's error is bounded (backward error analysis: a modified Hamiltonian)."""
    model, state0 = start(kind)
    e = energy_errors(model, state0, 0.0025, 20)  # t = 50
    tenth = e.size // 10
    first, last = np.abs(e[:tenth]).max(), np.abs(e[-tenth:]).max()
    # factor 1.5: the largest excursions come from the closest encounters of particles, which
    # differ between windows (a linear drift would grow by 10 from the first tenth to the last)
    assert last <= 1.5 * first, (first, last)
    assert abs(e[-tenth:].mean() - e[:tenth].mean()) <= first, (first, e[-tenth:].mean())
    # and small: the energy scale is |H₀| ≈ 15–70, the potential's wells 5 per pair
    assert np.abs(e).max() < 0.1


@pytest.mark.parametrize("kind", ["c1-c1", "c1-c2"])
def test_energy_error_bounded_over_1e5_steps(kind):
    """10⁵ steps of h = 0.0025 (t = 250; Figures 3.5–3.6 show 10⁵ steps): the largest
    |H − H₀| over each fifth of the run stays within 1.5 times the first fifth's (a linear
    drift would give 5 in the last) and below 0.1 (the energy scale |H₀| ≈ 15–70)."""
    model, state0 = start(kind)
    e = np.abs(energy_errors(model, state0, 0.0025, 100))
    fifths = np.array([x.max() for x in np.array_split(e, 5)])
    assert np.all(fifths <= 1.5 * fifths[0]), fifths
    assert fifths.max() < 0.1, fifths


@pytest.mark.parametrize("kind", ["c1-c1", "c1-c2"])
def test_energy_error_scales_as_h_squared(kind):
    """max |H − H₀| over t ∈ [0, 2] for h = 5·10⁻⁴ and h/2 (hω ≤ 0.08): ratio 4 (measured 4.11
    and 3.98; at h ≥ 10⁻³ close encounters make it 3.6–5.1)."""
    model, state0 = start(kind)
    coarse = np.abs(energy_errors(model, state0, 5e-4, 4)).max()
    fine = np.abs(energy_errors(model, state0, 2.5e-4, 8)).max()
    # ±0.25 in the exponent: the maxima of an oscillating error, sampled every step
    assert abs(np.log2(coarse / fine) - 2.0) <= 0.25, (coarse, fine)


# --- structure --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs():
    """2000 steps of h = 0.0025 (t = 5) for every boundary, every 5th state, and the
    invariants there."""
    out = {}
    for kind in FORCES:
        model, state0 = start(kind)
        states, _ = chunked(model, state0, 0.0025, 2)
        ts = jnp.zeros(states.r.shape[0])
        out[kind] = (model, state0, states, invariants_along(model, ts, states))
    return out


@pytest.mark.parametrize("kind", list(FORCES))
def test_constraints_kept(runs, kind):
    """Every body's ‖RᵀR − 1‖ stays below the Newton tolerance (its last update is below
    eps^(3/4), so the residual left is its square: round-off, not accumulated), and the
    tangency (3.7) at round-off relative to 1 + |ω| (closed-form projection)."""
    model, _, states, inv = runs[kind]
    assert inv["RtR_error"].max() < default_tolerance(jnp.float64)
    # 20 eps: a few roundings of the 3×3 products per step (measured ~1e-15 at |ω| ~ 1)
    assert inv["RtR_error"].max() < 20 * EPS
    omega = jnp.linalg.norm(model.body_angular_velocity(states), axis=-1)
    assert inv["tangency_error"].max() < 20 * EPS * (1 + float(omega.max()))


@pytest.mark.parametrize("kind", ["c1-c1", "c1-c2", "c1-c3"])
def test_held_bodies_fixed_bit_for_bit(runs, kind):
    """Held coordinates (§3.2.4) stay exactly where they started, their momenta exactly zero;
    the others move."""
    model, state0, states, _ = runs[kind]
    n = state0.r.shape[0]
    tm = np.asarray(model.boundary.translation_mask(n)) > 0
    rm = np.asarray(model.boundary.rotation_mask(n)) > 0
    r, p, R, P = (np.asarray(x) for x in states)  # (n_save, N+2, ...)
    np.testing.assert_array_equal(r[:, ~tm], np.broadcast_to(state0.r[~tm], r[:, ~tm].shape))
    np.testing.assert_array_equal(R[:, ~rm], np.broadcast_to(state0.R[~rm], R[:, ~rm].shape))
    assert not p[:, ~tm].any() and not P[:, ~rm].any()
    assert np.all(np.abs(r[-1, tm] - r[0, tm]).max(axis=-1) > 0)
    assert np.all(np.abs(R[-1, rm] - R[0, rm]).max(axis=(-2, -1)) > 0)


def test_free_chain_conserves_momenta(runs):
    """Free chain: RATTLE is symplectic and equivariant under translations and rotations, so
    total momentum and angular momentum are conserved to round-off: a few eps of their
    scale per step, accumulating as a random walk (tolerance 10 eps·scale·√n_steps; measured
    1e-13 of |L| ~ 45 after 2000 steps). With c1-c2 they change (the clamp and F act)."""
    _, _, states, inv = runs["free"]
    n_steps = 2000
    r, p = np.asarray(states.r), np.asarray(states.p)
    scale_p = np.abs(p).sum(axis=(-2, -1)).max()
    scale_L = (np.linalg.norm(r, axis=-1) * np.linalg.norm(p, axis=-1)).sum(axis=-1).max() + 10
    for i in (1, 2, 3):
        drift_p = np.abs(inv[f"momentum{i}"] - inv[f"momentum{i}"][0]).max()
        drift_L = np.abs(inv[f"angular_momentum{i}"] - inv[f"angular_momentum{i}"][0]).max()
        assert drift_p < 10 * EPS * scale_p * np.sqrt(n_steps), (i, drift_p)
        assert drift_L < 10 * EPS * scale_L * np.sqrt(n_steps), (i, drift_L)
    forced = runs["c1-c2"][3]
    assert np.abs(forced["momentum1"] - forced["momentum1"][0]).max() > 1e-2


def test_symmetric_method_is_reversible():
    """1000 steps by h, then 1000 by −h: the start again (RATTLE is symmetric), to round-off
    amplified by the chain's sensitivity over t = 2.5 and back (measured 3e-9 in p; a
    non-symmetric second-order method would miss by O(h²) ≈ 1e-5 or more)."""
    model, state0 = start("c1-c2")
    _, forward = chunked(model, state0, 0.0025, 1)
    _, back = chunked(model, forward, -0.0025, 1)
    for a, b in zip(back, state0):
        np.testing.assert_allclose(a, b, rtol=0, atol=3e-8)


# --- ensembles, precision, gradients ---------------------------------------------------


def test_ensemble_equals_members():
    """Three members with different initial velocities, batched, equal the unbatched runs."""
    model, _ = start("c1-c2")
    members = [start("c1-c2", seed=s)[1] for s in (0, 1, 2)]
    batch = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *members)
    batched = run(model, batch, 0.0025, CHUNK, SAVE_EVERY).final_state
    for i, member in enumerate(members):
        _, alone = chunked(model, member, 0.0025, 1)
        for a, b in zip(batched, alone):
            # 1e-11: vmap may fuse and reorder the same operations; 1000 steps of a chaotic
            # chain amplify rounding differences
            np.testing.assert_allclose(a[i], b, rtol=0, atol=1e-11)


def test_float32_runs_finite_and_close():
    """In float32 (Newton tolerance eps^(3/4) = 6.5e-6) 1000 steps of h = 2.5·10⁻⁴ stay
    finite, converged, orthonormal to float32 round-off, within 10⁻³ (relative to each
    field's largest entry) of the float64 run (measured 2·10⁻⁴: rounding of 1.2·10⁻⁷ and the
    Newton tolerance accumulated over 1000 steps), and the energy error is float64's plus
    float32 rounding accumulated (measured 6·10⁻⁴ against 7·10⁻⁵)."""
    model, state0 = start("c1-c2")

    def cast(tree, dtype=jnp.float32):
        return jax.tree_util.tree_map(
            lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree
        )

    final32 = run(cast(model), cast(state0), 2.5e-4, CHUNK, SAVE_EVERY).final_state
    _, final64 = chunked(model, state0, 2.5e-4, 1)
    assert all(x.dtype == jnp.float32 for x in final32)
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in final32)
    eps32 = float(np.finfo(np.float32).eps)
    assert float(so3.orthogonality_error(final32.R).max()) < 50 * eps32
    for a, b in zip(final32, final64):
        scale = np.abs(b).max()
        np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=0, atol=1e-3 * scale)
    E0, E32, E64 = (float(model.energy(s)) for s in (state0, cast(final32, jnp.float64), final64))
    assert abs(E32 - E0) < abs(E64 - E0) + 1e-4 * abs(E0), (E0, E32, E64)


def test_gradient_matches_finite_differences():
    """d(x-coordinate of body 5 at t = 0.25)/d(initial velocity v₃ᵧ) through 1000 steps
    (reverse mode through Newton's implicit-function derivative and the checkpointed scan)
    equals central differences with step 10⁻⁴ (measured agreement 8·10⁻¹⁰ relative; the
    truncation is O(10⁻⁸ f‴), the rounding ~10⁻¹⁵/10⁻⁴). Over t = 2.5 the chain's
    sensitivity (~300) makes differences of any step inaccurate, so the horizon is short."""
    model, state0 = start("c1-c2")

    def final_x(u):
        s = state0._replace(p=state0.p.at[3, 1].set(model.mass * u))
        return run(model, s, 2.5e-4, CHUNK, SAVE_EVERY).final_state.r[5, 0]

    u0 = float(state0.p[3, 1] / model.mass)
    eps = 1e-4
    fd = (float(final_x(u0 + eps)) - float(final_x(u0 - eps))) / (2 * eps)
    grad = float(jax.grad(final_x)(u0))
    assert abs(grad - fd) <= 1e-6 * abs(fd), (grad, fd)
    assert abs(fd) > 1e-3  # a derivative that is there to get wrong


# --- bad input --------------------------------------------------------------------------


def test_coplanar_body_refused():
    """A disc of zero thickness has a singular J: the matrix form refuses it, naming the
    quaternion form."""
    # disc(8)'s ring of particles without its thickness (both faces in one plane)
    angles = 2 * np.pi * np.arange(8) / 8
    ring = 0.05 * np.stack([np.cos(angles), np.sin(angles), np.zeros(8)], axis=-1)
    flat_disc = ParticleBody.from_particles(jnp.ones(8), ring)
    flat = ParticleChain(flat_disc, LennardJones(jnp.asarray(5.0), jnp.asarray(1.0)))
    model, state0 = start("c1-c1", chain=flat, n=4)
    with pytest.raises(ValueError, match="coplanar.*quaternion form"):
        jr.simulate(RATTLE(), model, state0, 0.001, 1)


def test_bad_states_refused():
    model, state0 = start("c1-c1")
    integrator = RATTLE()

    def sim(state):
        return jr.simulate(integrator, model, state, 0.001, 1)

    with pytest.raises(ValueError, match="overlap"):
        sim(state0._replace(r=state0.r * 0.3))
    with pytest.raises(ValueError, match="held body's momentum must be zero"):
        sim(state0._replace(p=state0.p.at[-1, 0].set(1.0)))
    with pytest.raises(ValueError, match="NaN"):
        sim(state0._replace(p=state0.p.at[4, 0].set(jnp.nan)))
    with pytest.raises(ValueError, match="NaN"):
        sim(state0._replace(R=state0.R.at[4, 0, 0].set(jnp.nan)))
    with pytest.raises(ValueError, match="not tangent"):
        turns = model.boundary.rotation_mask(N_BODIES)[:, None, None]
        sim(state0._replace(P=state0.P + 0.1 * turns * state0.R))  # held bodies kept at 0
    with pytest.raises(ValueError, match="N\\+2"):
        sim(state0._replace(p=state0.p[:-1]))
    # the member is named in an ensemble
    batch = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), state0)
    with pytest.raises(ValueError, match="member 1"):
        sim(batch._replace(p=batch.p.at[1, 0, 2].set(0.5)))
    assert isinstance(state0, ChainMatrixState)
