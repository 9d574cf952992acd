"""The potential of a chain of `N + 2` rigid bodies of point particles (Chaurasia 2012, §3.2.3,
§3.3.6, §3.5.1): pair potentials between all particles of neighbouring bodies only,

    V = Σ_{j=1}^{N+1} V_{j−1,j},   V_{j−1,j} = Σ_k Σ_l V(r_{j−1,j}^{k,l})           (3.12), (3.30)

with `r_{j−1,j}^{k,l}` the distance between particle `k` of body `j−1` and particle `l` of body
`j` (3.11), (3.29). Lennard-Jones `V(r) = 4ε((σ/r)¹² − (σ/r)⁶)` by default (§3.5.1); any
scalar `V(r)` (a `jnp` function, applied elementwise) is accepted.

**Convention.** `R_j` maps body to space, as everywhere in jaxrigid: particle `k` of body `j` is
at `r_j + R_j r_jᵏ`. This is also what the thesis's kinetic side assumes (`P = Ṙ[J]` (3.3),
`Ṙ = P[J]⁻¹` (3.10d), the body angular velocity `ω = 2G(q)q̇` of §3.3.1), but its potential
sections (3.11), (3.13), (3.29) place the particle at `r_j + R_jᵀ r_jᵏ`: there the thesis's
`R_j` is our `R_jᵀ` (and its quaternion our conjugate `q̄`). The unit quaternion `q = (w, v)`
enters through the quadratic form `R(q) = (w² − v·v) 1 + 2 v vᵀ + 2 w v̂`, equal to (3.14) on
`|q| = 1`; its derivatives are the matrices printed after (3.29) (which are half of them).

Forces and torques are autodiff gradients of the total potential (`gradients`,
`quaternion_gradients`); everything is vectorised over bodies and particle pairs, and `vmap`
batches chains.

**Blocks of bodies.** On the CPU a long chain's potential is summed in blocks of
`bodies_per_block` neighbour pairs (`lax.map` over blocks, each block rematerialised in the
reverse pass by `jax.checkpoint`), so that the `(pairs, n_p, n_p, 3)` intermediates of one block
stay in cache instead of the whole chain's going through memory. Without blocks, the CPU
backend of jax 0.10 (its YNNPACK reduce fusion) stores the pair differences, distances and even
scalar broadcasts at full size: once a long chain's intermediates no longer fit in the cache,
the time per pair term jumps, while with blocks it stays flat (bench/README.md,
`chain_scaling.py`, "Why the disc chains scaled superlinearly, and the fix"). A block sums the
same terms with the same arithmetic; the order of the sums over pairs differs (round-off,
~10⁻¹⁵ relative). Short chains (fewer than two blocks, or fewer
than `MIN_BLOCKED_PAIR_TERMS` particle pairs in all) and other backends (unmeasured there: a
GPU would run the blocks one after another) take the one-shot path, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from .._checks import Check, is_concrete
from ..lie import so3
from .base import finite, rotation_checks
from .particle_body import ParticleBody

__all__ = [
    "MIN_BLOCKED_PAIR_TERMS",
    "PAIRS_PER_BLOCK",
    "LennardJones",
    "ParticleChain",
    "block_size",
    "quaternion_matrix",
]


def _lennard_jones_checks(potential) -> list[Check]:
    """`potential.checks()` (a module-level function: a key of `_checks.raise_at_once`)."""
    return potential.checks()


class LennardJones(eqx.Module):
    """`V(r) = 4ε((σ/r)¹² − (σ/r)⁶)` (§3.5.1); `epsilon`, `sigma` are sweepable arrays.

    **Values** (`checks`: refused at construction when concrete, and by the chain models'
    `parameter_checks`, so by `simulate`, when traced or swept): `σ > 0` and finite (at
    `σ = 0` the potential vanishes and the overlap guard `min_distance = σ/2` with it; `σ < 0`
    is `|σ|` in `V` but a negative guard); `ε ≥ 0` and finite. `ε = 0` is accepted: `V ≡ 0`, a
    chain of free bodies, a legitimate limit. `ε < 0` is refused: it turns the repulsive core
    into an attractive singularity (`V → −∞` as `r → 0`, neighbours fall into each other), no
    Lennard-Jones potential; the thesis takes `ε > 0` (a well of depth `ε`; §3.5: `ε = 5`).
    """

    epsilon: jax.Array = eqx.field(default_factory=lambda: jnp.asarray(1.0))
    sigma: jax.Array = eqx.field(default_factory=lambda: jnp.asarray(1.0))

    def __check_init__(self):
        if is_concrete(self):  # bad values at once, not only at `simulate`
            _checks.raise_at_once(_lennard_jones_checks, self)  # also inside a caller's `jit`

    def __call__(self, r):
        s6 = (self.sigma / r) ** 6
        return 4 * self.epsilon * (s6 * s6 - s6)

    def core_distance(self):
        """`σ/2`, the closest two particles may start (there `V = 4ε(4096 − 64) ≈ 1.6·10⁴ ε`):
        a chain's default `min_distance`."""
        return 0.5 * self.sigma

    def checks(self) -> list[Check]:
        """`σ > 0`, `ε ≥ 0`, both finite: flags over any sweep axes of `sigma`, `epsilon`."""
        sigma, epsilon = jnp.asarray(self.sigma), jnp.asarray(self.epsilon)
        return [
            Check(
                ~(jnp.isfinite(sigma) & (sigma > 0)),
                "LennardJones: sigma (σ) must be positive and finite (at σ = 0 the potential "
                "vanishes)",
                sigma,
            ),
            Check(
                ~(jnp.isfinite(epsilon) & (epsilon >= 0)),
                "LennardJones: epsilon (ε) must be non-negative and finite (ε < 0 makes the "
                "repulsive core an attractive singularity; ε = 0 is a potential-free chain)",
                epsilon,
            ),
        ]


def quaternion_matrix(q):
    """`R(q) = (w² − v·v) 1 + 2 v vᵀ + 2 w v̂` for `q = (w, v) (..., 4)`: the rotation
    `x ↦ q x q̄` for a unit `q` (3.14), extended off the unit sphere as a quadratic form (the
    extension whose derivatives the thesis prints after (3.29))."""
    w, v = q[..., 0], q[..., 1:]
    eye = jnp.broadcast_to(jnp.eye(3, dtype=q.dtype), (*q.shape[:-1], 3, 3))
    vv = jnp.sum(v * v, axis=-1)
    return (
        (w * w - vv)[..., None, None] * eye
        + 2 * v[..., :, None] * v[..., None, :]
        + 2 * w[..., None, None] * so3.hat(v)
    )


class ParticleChain(eqx.Module):
    """`N + 2` copies of one `body` (bodies `0 … N+1`), neighbours interacting through
    `pair_potential` (§3.2.3, §3.3.6).

    **Fields:** `body` a `ParticleBody`; `pair_potential` a scalar `V(r)` applied elementwise
    to distances (default `LennardJones()`; an `equinox.Module`'s array fields are sweepable,
    a plain function is static); `min_distance` (static) the closest two particles of
    neighbouring bodies may start: `None` means the potential's `core_distance()` where it
    declares one (`σ/2` for Lennard-Jones) and `0` (only coincident particles) otherwise;
    `bodies_per_block` (static) the neighbour pairs summed per block of `potential` (module
    docstring): `None` picks `block_size(n_p)` (about 1280 particle pairs a block) on the CPU
    for chains of at least `MIN_BLOCKED_PAIR_TERMS` particle pairs and no blocks elsewhere, `0`
    never blocks (the whole chain at once), `B > 0` blocks any chain of at least `2B` pairs.

    A configuration is `r (N+2, 3)` centres of mass and `R (N+2, 3, 3)` attitudes (body →
    space), or unit quaternions `q (N+2, 4)`; batch chains with `jax.vmap`.
    """

    body: ParticleBody
    pair_potential: Callable = eqx.field(default_factory=LennardJones)
    min_distance: float | None = eqx.field(default=None, static=True)
    bodies_per_block: int | None = eqx.field(default=None, static=True)

    def __check_init__(self):
        if not callable(self.pair_potential):
            raise TypeError(f"pair_potential must be a callable V(r), got {self.pair_potential!r}")
        b = self.bodies_per_block
        if b is not None and (not isinstance(b, (int, np.integer)) or b < 0):
            raise ValueError(f"bodies_per_block must be None or an integer ≥ 0, got {b!r}")

    def resolved_bodies_per_block(self, n_bodies: int | None = None) -> int:
        """Neighbour pairs per block of `potential` for a chain of `n_bodies` (`0`: no
        blocks; `n_bodies=None`: the block size a long chain gets)."""
        b = self.bodies_per_block
        if b is None:
            n_p = self.body.n_p
            b = block_size(n_p) if jax.default_backend() == "cpu" else 0
            if n_bodies is not None and (n_bodies - 1) * n_p * n_p < MIN_BLOCKED_PAIR_TERMS:
                b = 0
        if n_bodies is not None and n_bodies - 1 < 2 * b:
            b = 0
        return int(b)

    def positions(self, r, R):
        """Particle positions `r_j + R_j r_jᵏ (N+2, n_p, 3)`."""
        _check_shapes(r, R, 3)
        return self.body.positions(r, R)

    def distances(self, r, R):
        """`r_{j−1,j}^{k,l} (N+1, n_p, n_p)`: particle `k` of body `j−1` to particle `l` of
        body `j`, for `j = 1 … N+1` (3.11)."""
        x = self.positions(r, R)
        d = x[:-1, :, None, :] - x[1:, None, :, :]
        return jnp.sqrt(jnp.sum(d * d, axis=-1))

    def pair_energies(self, r, R):
        """`V_{j−1,j} (N+1,)` for `j = 1 … N+1` (3.12)."""
        return jnp.sum(self.pair_potential(self.distances(r, R)), axis=(-2, -1))

    def potential(self, r, R):
        """Total potential `V = Σ_j V_{j−1,j}` (the potential part of (3.8)); summed in blocks
        of `bodies_per_block` neighbour pairs when the chain has at least two blocks."""
        _check_shapes(r, R, 3)
        block = self.resolved_bodies_per_block(jnp.shape(r)[0])
        if block == 0:
            return jnp.sum(self.pair_energies(r, R))
        return self._blocked_potential(r, R, block)

    def _blocked_potential(self, r, R, block: int):
        """`Σ` over `n_blocks` blocks of `block` pairs (`lax.map`, checkpointed), then the
        remaining `< block` pairs at once. Block `b` holds pairs `bB … bB+B−1`, i.e. bodies
        `bB … bB+B`: its own `B` bodies (a reshape) and the next block's first (a strided
        slice), so nothing of size `(pairs, n_p, n_p)` is ever built for the whole chain."""
        n_pairs = jnp.shape(r)[0] - 1
        n_blocks = n_pairs // block
        m = n_blocks * block
        own = (r[:m].reshape(n_blocks, block, 3), R[:m].reshape(n_blocks, block, 3, 3))
        nxt = (r[block : m + 1 : block], R[block : m + 1 : block])

        def block_energy(args):
            r_own, R_own, r_next, R_next = args
            rb = jnp.concatenate([r_own, r_next[None]], axis=0)
            Rb = jnp.concatenate([R_own, R_next[None]], axis=0)
            return jnp.sum(self._pair_terms(rb, Rb))

        energies = jax.lax.map(jax.checkpoint(block_energy, prevent_cse=False), (*own, *nxt))
        return jnp.sum(energies) + jnp.sum(self._pair_terms(r[m:], R[m:]))

    def _pair_terms(self, r, R):
        """`V(r_{j−1,j}^{k,l}) (n−1, n_p, n_p)` for consecutive bodies `r (n, 3)`, `R (n, 3, 3)`."""
        x = self.body.positions(r, R)
        d = x[:-1, :, None, :] - x[1:, None, :, :]
        return self.pair_potential(jnp.sqrt(jnp.sum(d * d, axis=-1)))

    def gradients(self, r, R):
        """`(∂V/∂r_j (N+2, 3), ∂V/∂R_j (N+2, 3, 3))` by autodiff: the potential parts of
        (3.13a) and (3.13c) (transposed there: the thesis's `R_j` is our `R_jᵀ`)."""
        return jax.grad(self.potential, argnums=(0, 1))(r, R)

    def forces(self, r, R):
        """`−∂V/∂r_j (N+2, 3)`: the force on each body's centre of mass (3.13a)."""
        return -jax.grad(self.potential, argnums=0)(r, R)

    def torques(self, r, R):
        """Body-frame torques `T_j = −2 vee(skew(R_jᵀ ∂V/∂R_j)) (N+2, 3)`: `−dV/dθ` along
        `R_j exp(θ ê)` for each body axis `e` (the part of (3.13c) that the constraint
        force `2R_jΛ^j` does not absorb)."""
        G = jax.grad(self.potential, argnums=1)(r, R)
        return -2.0 * so3.vee(jnp.swapaxes(R, -1, -2) @ G)

    def quaternion_potential(self, r, q):
        """`V` at unit quaternions `q (N+2, 4)` (3.22), through `quaternion_matrix`."""
        _check_shapes(r, q, 4)
        return self.potential(r, quaternion_matrix(q))

    def quaternion_gradients(self, r, q):
        """`(∂V/∂r_j (N+2, 3), ∂V/∂q_j (N+2, 4))` by autodiff: the potential parts of
        (3.28a) and (3.28c), (3.29)–(3.30)."""
        return jax.grad(self.quaternion_potential, argnums=(0, 1))(r, q)

    # --- checks -------------------------------------------------------------------------

    def parameter_checks(self) -> list[Check]:
        """The pair potential's own value checks (`checks()`, e.g. `LennardJones`'s `σ > 0`,
        `ε ≥ 0`), where it has them; the chain models include these in theirs."""
        return list(getattr(self.pair_potential, "checks", lambda: [])())

    def resolved_min_distance(self) -> float | jax.Array:
        if self.min_distance is not None:
            return self.min_distance
        # a pair potential may declare its repulsive core; a plain function declares nothing
        core = getattr(self.pair_potential, "core_distance", None)
        return 0.0 if core is None else core()

    def configuration_checks(self, r, R) -> list[Check]:
        """Value checks of one chain's configuration (scalar flags): finite centres, rotations,
        and no two particles of neighbouring bodies closer than `min_distance` (or
        coincident); that check quotes the first overlapping pair's `j` (bodies `j−1`, `j`)."""
        _check_shapes(r, R, 3)
        ok = jnp.all(finite(r, 1)) & jnp.all(finite(R, 2))
        rot = [Check(jnp.any(c.bad), c.message, None) for c in rotation_checks(R, "R")]
        dist = self.distances(jnp.where(ok, r, 0.0), jnp.where(ok, R, jnp.eye(3, dtype=R.dtype)))
        close = _close_pairs(dist, self.resolved_min_distance())
        j = 1 + jnp.argmax(close)
        return [
            Check(~jnp.all(finite(r, 1)), "chain centres of mass r contain NaN or inf"),
            *rot,
            Check(
                ok & jnp.any(close),
                f"neighbouring bodies j−1 and j overlap: two of their particles are closer than "
                f"min_distance = {_describe(self.resolved_min_distance())} (j quoted)",
                j,
            ),
        ]

    def check_configuration(self, r, R) -> None:
        """Raise `ValueError` for a bad configuration: concrete inputs name the overlapping
        bodies and particles; traced ones raise in the graph (`configuration_checks`)."""
        if not is_concrete(r, R, self.body, self.pair_potential):
            _checks.raise_in_graph(self.configuration_checks(r, R))
            return
        checks = self.configuration_checks(r, R)
        _checks.raise_now(checks[:-1])
        dist = np.asarray(self.distances(r, R))
        close = np.asarray(_close_pairs(dist, self.resolved_min_distance()))
        if close.any():
            j, k, ell = np.unravel_index(np.argmax(close), close.shape)
            raise _checks.InvalidValueError(
                f"bodies {j} and {j + 1} of the chain overlap: particle {k} of body {j} and "
                f"particle {ell} of body {j + 1} are {dist[j, k, ell]:.6g} apart, closer than "
                f"min_distance = {_describe(self.resolved_min_distance())} "
                f"({int(close.any(axis=(1, 2)).sum())} of {close.shape[0]} neighbour pairs overlap)"
            )


PAIRS_PER_BLOCK = 1280
"""Particle pairs a block of the automatic size holds (at most; at least one neighbour pair)."""

MIN_BLOCKED_PAIR_TERMS = 8 * PAIRS_PER_BLOCK
"""Chains with fewer particle pairs in all (`(N+1) n_p²`) are not blocked automatically: their
intermediates fit in the cache anyway, and the blocks' loop costs more than it saves
(bench/README.md, `chain_scaling.py`)."""


def block_size(n_p: int, pairs_per_block: int = PAIRS_PER_BLOCK) -> int:
    """The automatic `bodies_per_block`: `⌊pairs_per_block / n_p²⌋`, at least 1 (`n_p = 4`:
    80, `n_p = 12`: 8, `n_p = 32`: 1).

    With jax 0.10.2 the CPU backend hands a reduction of 4096 or more elements to YNNPACK,
    which stores its input (`3 n_p²` per pair for the distances), so a block stays below that
    at `≤ 1365` particle pairs; smaller blocks pay the loop's overhead per block more often
    (block sizes compared in bench/README.md, `chain_scaling.py`)."""
    return max(int(pairs_per_block) // max(int(n_p) ** 2, 1), 1)


def _close_pairs(dist, min_distance):
    """`(N+1, n_p, n_p)` flags: closer than `min_distance`, or coincident."""
    return (dist < min_distance) | (dist <= 0)


def _describe(x) -> str:
    return f"{float(x):.6g}" if is_concrete(x) else "min_distance"


def _check_shapes(r, X, size: int) -> None:
    event = (3, 3) if size == 3 else (4,)
    if (
        jnp.ndim(r) != 2
        or jnp.shape(r)[-1] != 3
        or jnp.shape(X) != (jnp.shape(r)[0], *event)
        or jnp.shape(r)[0] < 2
    ):
        name = "R (N+2, 3, 3)" if size == 3 else "q (N+2, 4)"
        raise ValueError(
            f"a chain configuration needs r (N+2, 3) and {name} with N + 2 ≥ 2 bodies, got "
            f"{jnp.shape(r)} and {jnp.shape(X)} (batch chains with jax.vmap)"
        )
