"""Issue 16 (part 1): the force evaluation of a chain of rigid bodies made of point particles
(Chaurasia 2012 ch. 3, §3.5 "Computation time", Figures 3.7–3.8) against chain length and
particles per body; ensembles of short chains; the same energy with JAX-MD; one step of the
chain integrators.

**The problem.** `N + 2` bodies (`N` the thesis's interior bodies), Lennard-Jones between all
particles of neighbouring bodies, `ε = 10⁻⁶`, `σ = 1` (§3.5's timing study), float64. Bodies:
the thesis's timing disc (`disc(n_p)`: radius `a = 0.05`, thickness `a/10`, `n_p/2` particles
on each face), centres `1.12 σ` apart on the x axis (≈ the Lennard-Jones minimum `2^{1/6} σ`;
the thesis does not give the spacing), and §3.5's tetrahedron (`tetrahedron()`, `a = 1`),
centres `2.2` apart; each centre jittered by `0.01·N(0, 1)`, attitudes `exp(ξ̂)` with `ξ`
uniform in `[−π, π]³` (`jax.random.PRNGKey(0)`: the first bodies are the same for every N).

**1. Force evaluation** (`forces`, `particles`): `V` and `(∂V/∂r, ∂V/∂R)` of
`ParticleChain.potential`/`.gradients` in one jitted program (what a step's force evaluation
costs), AOT-compiled (`compile_seconds`, `memory_analysis()` temporaries), one warm-up call,
then 3–15 repeats (about `budget` seconds) of one variant, then of the other (not round robin:
see `timed`), each call ended by `block_until_ready`; `seconds` is the best call (all kept in
`seconds_all`, their median in `median_seconds`, the best process-CPU seconds in
`cpu_seconds`). Variants: `blocked` (the default `ParticleChain`: sums in blocks of
`bodies_per_block` neighbour pairs, `lax.map` + `jax.checkpoint`; chains under
`MIN_BLOCKED_PAIR_TERMS` particle pairs are evaluated at once, `bodies_per_block` 0 in the
record) and `unblocked` (`bodies_per_block=0`, the whole chain at once: the code before the
blocks), with their largest relative difference and whether they are bitwise equal. Against
N = 10 … 10⁵ for tetrahedra and 12-particle discs, and against n_p = 6 … 32 at N = 8 and 10⁴
(discs). Fitted exponents: least squares on log–log of the best call (and of the median, and
of CPU seconds), in N over N ≥ 10³ (target ≤ 1.05), in n_p over all n_p.
Particle-steps/s = (N + 2)·n_p / seconds; pair terms/s = (N + 1)·n_p² / seconds.

**2. Ensembles** (`ensemble`): 10⁴ chains of 10 bodies (N = 8; tetrahedra and 12-particle
discs), chain `i` the problem above with `PRNGKey(i)`: `jax.vmap` of the same evaluation over
chains, and `lax.map(..., batch_size=b)` (vmapped batches of `b` chains in a loop, the same
cache argument as the blocks). Chains/s.

**3. JAX-MD** (`jaxmd`): the same particles (`chain.positions`, flattened) in a periodic box
padded so that nothing wraps, `jax_md.energy.lennard_jones_neighbor_list` (format
`OrderedSparse`, JAX-MD's default: each pair once), `ε`, `σ` passed as strongly typed float64
arrays (JAX-MD computes `f32(4)·ε`: float32 for a Python or weak-typed `ε`), `r_onset` above
the largest neighbour-pair distance so that its smooth cutoff is exactly 1 on every pair,
`r_cutoff = r_onset + 0.1σ`, and a `custom_mask_function` keeping only pairs of particles on
neighbouring bodies: the pair set is exactly jaxrigid's, so `V` agrees to round-off; `∂V/∂x`
summed over each body's particles is `∂V/∂r`, and `Σ_k ∂V/∂x_k r_kᵀ` is `∂V/∂R` (checked).
Timed: `jax.jit(jax.value_and_grad(energy_fn))(x, neighbors)` with the list built beforehand,
and jaxrigid's blocked evaluation of the same chain, one after the other. The list comes from
JAX-MD's cell list (`neighbor_fn.allocate`, seconds recorded, its pairs checked equal to the
neighbouring bodies') up to `--jaxmd-allocate-max` particles; above that (the cell-list
allocation for 1.2·10⁶ particles asked for 31 GB) the same pairs are written into the
`OrderedSparse` list directly (receiver < sender).

**4. Integrator steps** (`steps`, a hook): one full step of `simulate` (jit, `save_every =
n_steps`, time of 4 steps / 4) for `RATTLE` (rows `ChainRATTLE`) on `RigidBodyChain` and
`Gauss6` (rows `ChainGauss6`) on `QuaternionChain`, boundary `c1-c2` with force
`(STEP_FORCE, 0, 0)`, discs `n_p = 12`, from rest, h = .01, N + 2 = 10 … 10⁴ (10⁵ with
`--steps-max`); skipped with the import error when the modules are missing.
`make_step_models` is the one place to adapt to their API.

`--threads 1` runs XLA on one thread, pinned to one core (set before JAX starts): on a shared
machine its CPU seconds scale with the work, not with the neighbours' load.

Writes `chain_scaling_cpu[_threads1][_quick].json` (`--sections steps` alone:
`chain_scaling_steps_cpu…json`); the sections run are recorded in it.

    python bench/chain_scaling.py                         # sections 1–3, ≈ 3 min on 2 cores
    python bench/chain_scaling.py --sections steps        # the integrator hook
    python bench/chain_scaling.py --quick --out /tmp/b    # ≈ 1 min
"""

from __future__ import annotations

import os
import sys


def _pin_one_thread(argv):
    """`--threads 1`: XLA single-threaded and the process on one core, before JAX starts."""
    for i, a in enumerate(argv):
        value = a.split("=", 1)[1] if a.startswith("--threads=") else None
        if a == "--threads" and i + 1 < len(argv):
            value = argv[i + 1]
        if value == "1":
            flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()
            if hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


_pin_one_thread(sys.argv[1:])

import importlib  # noqa: E402
import importlib.metadata  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
from _common import (  # noqa: E402
    aot_compile,
    device_tag,
    enable_x64_for,
    load_average,
    log,
    loglog_slope,
    memory_bytes,
    parser,
    time_interleaved,
    write_results,
)

enable_x64_for("float64")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrigid.lie import so3  # noqa: E402
from jaxrigid.models.particle_body import disc, tetrahedron  # noqa: E402
from jaxrigid.models.particle_chain import LennardJones, ParticleChain, block_size  # noqa: E402

EPSILON, SIGMA = 1e-6, 1.0  # §3.5 "Computation time"
SPACING = {"disc": 1.12, "tetrahedron": 2.2}
JITTER = 0.01
STEP_DT = 0.01  # §3.5: h = .01
STEP_FORCE = 3.0  # the brief's c1-c2 force (3, 0, 0); the thesis's timing study prints ".03N"
SECTIONS = ("forces", "particles", "ensemble", "jaxmd", "steps")


# ------------------------------------------------------------------------------------------
# The problem.


def make_body(kind: str, n_p: int = 12):
    return tetrahedron() if kind == "tetrahedron" else disc(n_p)


def make_chain(kind: str, n_p: int = 12, bodies_per_block=None) -> ParticleChain:
    lj = LennardJones(jnp.asarray(EPSILON), jnp.asarray(SIGMA))
    return ParticleChain(make_body(kind, n_p), lj, bodies_per_block=bodies_per_block)


def configuration(kind: str, n_bodies: int, seed: int = 0):
    """Centres `SPACING·j` on the x axis jittered by `JITTER·N(0, 1)`, attitudes `exp(ξ̂)`,
    `ξ ~ U[−π, π]³`. `(r (n, 3), R (n, 3, 3))`."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    j = jnp.arange(n_bodies, dtype=jnp.float64)
    r = jnp.stack([SPACING[kind] * j, 0 * j, 0 * j], -1)
    r = r + JITTER * jax.random.normal(k1, (n_bodies, 3))
    R = so3.exp(jax.random.uniform(k2, (n_bodies, 3), minval=-np.pi, maxval=np.pi))
    return r, R


def evaluation(chain, r, R):
    """One force evaluation: `V` and `(∂V/∂r, ∂V/∂R)`."""
    return chain.potential(r, R), chain.gradients(r, R)


def rel_diff(a, b) -> float:
    """Largest `|a − b|` over the pytree, relative to the largest `|b|` of the same leaf."""
    out = 0.0
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        scale = np.max(np.abs(y))
        out = max(out, float(np.max(np.abs(x - y)) / scale) if scale > 0 else 0.0)
    return out


def choose_repeats(seconds: float, budget: float, lo: int = 3, hi: int = 15) -> int:
    return int(min(max(math.ceil(budget / max(seconds, 1e-6)), lo), hi))


def timed(fns: dict, budget: float) -> dict:
    """`{name: Timing}` of zero-argument functions, one after the other: a call to choose the
    repeats from, then `time_interleaved` of that function alone (warm-up, repeats, best).

    Not round robin: what is measured here is how a program uses the caches, and a peer
    called in between (the unblocked variant streams 72–720 MB) would hand each call a cold
    cache that a simulation's next force evaluation does not have."""
    out = {}
    for name, f in fns.items():
        t = time.perf_counter()
        jax.block_until_ready(f())
        repeats = choose_repeats((time.perf_counter() - t) or 1e-6, budget)
        out[name] = time_interleaved({name: f}, (), repeats, statistic="best")[name]
    return out


def record(timing, extra: dict) -> dict:
    rec = timing.record()
    rec["median_seconds"] = float(np.median(rec["seconds_all"]))
    rec.update(extra)
    return rec


# ------------------------------------------------------------------------------------------
# 1. Force evaluation against N and n_p.


def force_point(kind: str, n_p: int, N: int, budget: float) -> dict:
    """Both variants at one size: timings, compile, memory, their relative difference."""
    n = N + 2
    r, R = configuration(kind, n)
    out = {}
    compiled = {}
    for variant, bpb in (("blocked", None), ("unblocked", 0)):
        chain = make_chain(kind, n_p, bpb)
        c, compile_s = aot_compile(evaluation, chain, r, R)
        compiled[variant] = (c, chain)
        out[variant] = {"compile_seconds": compile_s, **memory_bytes(c)}
        out[variant]["bodies_per_block"] = chain.resolved_bodies_per_block(n)  # 0: one shot
    fns = {v: (lambda c=c, ch=ch: c(ch, r, R)) for v, (c, ch) in compiled.items()}
    load0 = load_average()
    timings = timed(fns, budget)
    diff = rel_diff(timings["blocked"].out, timings["unblocked"].out)
    for v, tm in timings.items():
        particles, pairs = n * n_p, (n - 1) * n_p * n_p
        out[v] = record(
            tm,
            {
                **out[v],
                "body": kind,
                "n_p": n_p,
                "N": N,
                "n_bodies": n,
                "particles": particles,
                "pair_terms": pairs,
                "particle_steps_per_s": particles / tm.seconds,
                "pair_terms_per_s": pairs / tm.seconds,
                "ns_per_pair_term": 1e9 * tm.seconds / pairs,
                "load_average": [load0, load_average()],
            },
        )
    out["max_rel_diff_blocked_vs_unblocked"] = diff
    out["bitwise_equal"] = all(
        np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(
            jax.tree.leaves(timings["blocked"].out), jax.tree.leaves(timings["unblocked"].out)
        )
    )
    b, u = out["blocked"], out["unblocked"]
    log(
        f"{kind:11s} n_p={n_p:2d} N={N:>6d}: blocked {1e3 * b['seconds']:9.3f} ms "
        f"({b['temp_bytes'] / 1e6:7.1f} MB), unblocked {1e3 * u['seconds']:9.3f} ms "
        f"({u['temp_bytes'] / 1e6:7.1f} MB), rel diff {diff:.1e}, load {load_average()[0]}"
    )
    return out


def exponents(rows, x_key, min_x=None) -> dict:
    """`{variant: slope}` of the best calls, and `{variant_median, variant_cpu: …}`."""
    out = {}
    for v in ("blocked", "unblocked"):
        for stat, suffix in (
            ("seconds", ""),
            ("median_seconds", "_median"),
            ("cpu_seconds", "_cpu"),
        ):
            pts = [(r[v][x_key], r[v][stat]) for r in rows]
            pts = [pt for pt in pts if min_x is None or pt[0] >= min_x]
            if len(pts) >= 2:
                out[v + suffix] = loglog_slope(*zip(*pts))
    return out


def section_forces(quick: bool) -> dict:
    Ns = [10, 100, 1000] if quick else [10, 100, 1_000, 10_000, 100_000]
    out = {}
    for kind in ("tetrahedron", "disc"):
        n_p = 4 if kind == "tetrahedron" else 12
        rows = [force_point(kind, n_p, N, 0.5 if quick else 2.0) for N in Ns]
        fit = exponents(rows, "N", min_x=1000)
        out[kind] = {"n_p": n_p, "rows": rows, "exponent_in_N_over_N_ge_1e3": fit}
        log(f"{kind}: exponent in N (N ≥ 10³): {fit}")
    out["target"] = {
        "exponent_at_most": 1.05,
        "passes": {
            k: out[k]["exponent_in_N_over_N_ge_1e3"].get("blocked", float("nan")) <= 1.05
            for k in ("tetrahedron", "disc")
        },
    }
    return out


def section_particles(quick: bool) -> dict:
    n_ps = [6, 12] if quick else [6, 8, 12, 16, 24, 32]
    Ns = [8, 1000] if quick else [8, 10_000]
    out = {}
    for N in Ns:
        rows = [force_point("disc", n_p, N, 0.5 if quick else 2.0) for n_p in n_ps]
        fit = exponents(rows, "n_p")
        out[f"N={N}"] = {"N": N, "rows": rows, "exponent_in_n_p": fit}
        log(f"disc N={N}: exponent in n_p: {fit}")
    return out


# ------------------------------------------------------------------------------------------
# 2. Ensembles of short chains.


def section_ensemble(quick: bool) -> dict:
    n_chains = 1000 if quick else 10_000
    n_bodies = 10
    out = {"n_chains": n_chains, "n_bodies": n_bodies}
    for kind, n_p in (("tetrahedron", 4), ("disc", 12)):
        chain = make_chain(kind, n_p)
        rs, Rs = jax.vmap(lambda s, kind=kind: configuration(kind, n_bodies, s))(
            jnp.arange(n_chains)
        )
        one = lambda r, R, chain=chain: evaluation(chain, r, R)  # noqa: E731
        pairs_per_chain = (n_bodies - 1) * n_p * n_p
        variants = {"vmap": jax.jit(jax.vmap(one))}
        for b in sorted({max(block_size(n_p) // (n_bodies - 1), 1), 64}):
            variants[f"lax_map_batch{b}"] = jax.jit(
                lambda rs, Rs, b=b: jax.lax.map(lambda a: one(*a), (rs, Rs), batch_size=b)
            )
        compiled, rec = {}, {}
        for name, f in variants.items():
            c, s = aot_compile(f, rs, Rs)
            compiled[name] = c
            rec[name] = {"compile_seconds": s, **memory_bytes(c)}
        fns = {k: (lambda c=c: c(rs, Rs)) for k, c in compiled.items()}
        timings = timed(fns, 0.5 if quick else 3.0)
        ref = timings["vmap"].out
        for name, tm in timings.items():
            rec[name] = record(
                tm,
                {
                    **rec[name],
                    "chains_per_s": n_chains / tm.seconds,
                    "particle_steps_per_s": n_chains * n_bodies * n_p / tm.seconds,
                    "ns_per_pair_term": 1e9 * tm.seconds / (n_chains * pairs_per_chain),
                    "max_rel_diff_vs_vmap": rel_diff(tm.out, ref),
                    "load_average": load_average(),
                },
            )
            log(
                f"ensemble {kind:11s} {name:17s}: {1e3 * tm.seconds:9.2f} ms, "
                f"{n_chains / tm.seconds:12.0f} chains/s ({rec[name]['temp_bytes'] / 1e6:.1f} MB)"
            )
        out[kind] = {"n_p": n_p, "variants": rec}
    return out


# ------------------------------------------------------------------------------------------
# 3. JAX-MD.


def neighbour_pairs(n_bodies: int, n_p: int) -> np.ndarray:
    """`(2, (n_bodies−1)·n_p²)` particle pairs of neighbouring bodies, receiver < sender
    (JAX-MD's `OrderedSparse`), particle `i` on body `i // n_p`."""
    j = np.arange(n_bodies - 1)[:, None, None]
    k = np.arange(n_p)[None, :, None]
    ell = np.arange(n_p)[None, None, :]
    shape = (n_bodies - 1, n_p, n_p)
    a = np.broadcast_to(j * n_p + k, shape).ravel()
    b = np.broadcast_to((j + 1) * n_p + ell, shape).ravel()
    return np.stack([a, b])


def _sorted_pairs(idx, n_particles) -> np.ndarray:
    idx = np.asarray(idx)
    idx = idx[:, idx[0] < n_particles]
    lo, hi = np.minimum(idx[0], idx[1]), np.maximum(idx[0], idx[1])
    return np.unique(lo.astype(np.int64) * n_particles + hi)


def jaxmd_point(jax_md, kind: str, n_p: int, N: int, allocate_max: int, budget: float) -> dict:
    from jax_md import energy, partition, space

    n = N + 2
    chain = make_chain(kind, n_p)
    r, R = configuration(kind, n)
    x_bodies = chain.positions(r, R)  # (n, n_p, 3)
    d = x_bodies[:-1, :, None, :] - x_bodies[1:, None, :, :]
    max_pair = float(jnp.max(jnp.sqrt(jnp.sum(d * d, -1))))
    r_onset = (max_pair + 0.05 * SIGMA) / SIGMA
    r_cutoff = r_onset + 0.1
    cut = r_cutoff * SIGMA
    # into the box [0, L)³ by moving the centres: both codes then see the same particles
    r = r - jnp.min(x_bodies.reshape(-1, 3), axis=0) + 2 * cut
    x = chain.positions(r, R).reshape(-1, 3)
    n_particles = x.shape[0]
    box = jnp.maximum(jnp.max(x, axis=0) + 2 * cut, 3.2 * cut)  # ≥ 3 cells, nothing wraps
    displacement, _ = space.periodic(box)
    body_of = jnp.arange(n_particles) // n_p

    def neighbours_only(idx):
        bi = body_of[:, None]
        bj = jnp.where(idx < n_particles, body_of[jnp.minimum(idx, n_particles - 1)], -2)
        return jnp.where(jnp.abs(bi - bj) == 1, idx, n_particles)

    neighbor_fn, energy_fn = energy.lennard_jones_neighbor_list(
        displacement,
        box,
        sigma=jnp.asarray(SIGMA, dtype=jnp.float64),  # strongly typed: JAX-MD's f32(4) · ε
        epsilon=jnp.asarray(EPSILON, dtype=jnp.float64),  # would cast a weak-typed ε to f32
        r_onset=r_onset,
        r_cutoff=r_cutoff,
        dr_threshold=0.0,
        format=partition.OrderedSparse,
        custom_mask_function=neighbours_only,
    )
    direct = neighbour_pairs(n, n_p)
    rec = {
        "body": kind,
        "n_p": n_p,
        "N": N,
        "n_bodies": n,
        "particles": n_particles,
        "pairs": int(direct.shape[1]),
        "r_onset_over_sigma": r_onset,
        "r_cutoff_over_sigma": r_cutoff,
        "format": "OrderedSparse",
    }
    if n_particles <= allocate_max:
        t = time.perf_counter()
        nbrs = neighbor_fn.allocate(x)
        rec["neighbour_list"] = "jax_md cell list (neighbor_fn.allocate)"
        rec["allocate_seconds"] = time.perf_counter() - t
        rec["overflow"] = bool(nbrs.did_buffer_overflow)
        same = np.array_equal(
            _sorted_pairs(nbrs.idx, n_particles), _sorted_pairs(direct, n_particles)
        )
        rec["pairs_equal_to_neighbouring_bodies"] = bool(same)
    else:
        nbrs = partition.NeighborList(  # exactly the neighbouring bodies' pairs
            idx=jnp.asarray(direct, dtype=jnp.int32),
            reference_position=x,
            error=partition.PartitionError(jnp.zeros((), jnp.uint8)),
            cell_list_capacity=None,
            max_occupancy=int(direct.shape[1]),
            format=partition.OrderedSparse,
            cell_size=None,
            cell_list_fn=None,
            update_fn=None,
        )
        rec["neighbour_list"] = (
            f"written directly (OrderedSparse, receiver < sender): {n_particles} particles > "
            f"--jaxmd-allocate-max {allocate_max} (the cell list's candidate arrays do not fit)"
        )
    ours = jax.jit(evaluation).lower(chain, r, R).compile()
    theirs = jax.jit(jax.value_and_grad(energy_fn)).lower(x, nbrs).compile()
    fns = {"jaxrigid": lambda: ours(chain, r, R), "jax_md": lambda: theirs(x, nbrs)}
    timings = timed(fns, budget)
    (V, (gr, gR)), (V_md, g_md) = timings["jaxrigid"].out, timings["jax_md"].out
    g_md = g_md.reshape(n, n_p, 3)
    gr_md = jnp.sum(g_md, axis=1)
    gR_md = jnp.einsum("jka,kb->jab", g_md, chain.body.r)
    rec["energy_jaxrigid"], rec["energy_jax_md"] = float(V), float(V_md)
    rec["energy_rel_diff"] = abs(float(V_md - V)) / abs(float(V))
    rec["dV_dr_rel_diff"] = rel_diff(gr_md, gr)
    rec["dV_dR_rel_diff"] = rel_diff(gR_md, gR)
    # how much the net body forces cancel: Σ_k |∂V/∂x_k| against |Σ_k ∂V/∂x_k|, largest of each
    rec["dV_dr_cancellation"] = float(
        jnp.max(jnp.sum(jnp.abs(g_md), axis=1)) / jnp.max(jnp.abs(gr_md))
    )
    for name, tm in timings.items():
        rec[name] = record(
            tm,
            {
                "particle_steps_per_s": n_particles / tm.seconds,
                "pair_terms_per_s": rec["pairs"] / tm.seconds,
            },
        )
    rec["ratio_particle_steps_jaxrigid_vs_jax_md"] = (
        rec["jaxrigid"]["particle_steps_per_s"] / rec["jax_md"]["particle_steps_per_s"]
    )
    rec["load_average"] = load_average()
    log(
        f"jax_md {kind:11s} N={N:>6d}: jaxrigid {1e3 * rec['jaxrigid']['seconds']:9.3f} ms, "
        f"jax_md {1e3 * rec['jax_md']['seconds']:9.3f} ms, ratio "
        f"{rec['ratio_particle_steps_jaxrigid_vs_jax_md']:.2f}; V rel diff "
        f"{rec['energy_rel_diff']:.1e}, ∂V/∂r {rec['dV_dr_rel_diff']:.1e}, "
        f"∂V/∂R {rec['dV_dR_rel_diff']:.1e}; list: {rec['neighbour_list'][:24]}"
    )
    return rec


def section_jaxmd(quick: bool, allocate_max: int) -> dict:
    try:
        jax_md = importlib.import_module("jax_md")
        version = importlib.metadata.version("jax-md")
    except Exception as e:  # noqa: BLE001 — any failure to import is a reason to skip
        log(f"jax_md skipped: {type(e).__name__}: {e}")
        return {"skipped": f"{type(e).__name__}: {e}"}
    points = [("disc", 12, N) for N in ([100, 1000] if quick else [100, 1000, 10_000, 100_000])]
    points += [("tetrahedron", 4, N) for N in ([1000] if quick else [1000, 10_000, 100_000])]
    rows = []
    for kind, n_p, N in points:
        try:
            rows.append(jaxmd_point(jax_md, kind, n_p, N, allocate_max, 0.5 if quick else 2.0))
        except Exception as e:  # noqa: BLE001 — record and go on with the next size
            log(f"jax_md {kind} N={N} failed: {type(e).__name__}: {str(e)[:300]}")
            rows.append({"body": kind, "N": N, "failed": f"{type(e).__name__}: {str(e)[:300]}"})
    return {"jax_md_version": version, "rows": rows}


# ------------------------------------------------------------------------------------------
# 4. Integrator steps (a hook: the chain integrators are being written in parallel).


def make_step_models(n_bodies: int):
    """`[(name, integrator, model, state0)]` for the chain integrators, from rest. The one
    place to adapt when their API changes."""
    from jaxrigid.integrators import RATTLE, Gauss6
    from jaxrigid.lie import quaternion
    from jaxrigid.models import chain_matrix, chain_quaternion
    from jaxrigid.models.chain_boundary import ChainBoundary

    chain = make_chain("disc", 12)
    boundary = ChainBoundary(kind="c1-c2", force=jnp.array([STEP_FORCE, 0.0, 0.0]))
    r, R = configuration("disc", n_bodies)
    zero = jnp.zeros_like(r)

    def from_velocities(module, cls, X):
        fn = getattr(module, "from_velocities", None) or getattr(cls, "from_velocities")
        return fn(chain, boundary, r, X, zero, zero)

    matrix = chain_matrix.RigidBodyChain(chain=chain, boundary=boundary)
    quat = chain_quaternion.QuaternionChain(chain=chain, boundary=boundary)
    q = quaternion.from_matrix(R)
    return [
        ("ChainRATTLE", RATTLE(), matrix, from_velocities(chain_matrix, type(matrix), R)),
        ("ChainGauss6", Gauss6(), quat, from_velocities(chain_quaternion, type(quat), q)),
    ]


def section_steps(quick: bool, steps_max: int) -> dict:
    import jaxrigid as jr

    sizes = [10, 100] if quick else [s for s in (10, 100, 1_000, 10_000, 100_000) if s <= steps_max]
    n_steps = 4
    try:
        make_step_models(4)
    except Exception as e:  # noqa: BLE001 — missing or changed modules: skip with the reason
        log(f"steps skipped: {type(e).__name__}: {e}")
        return {"skipped": f"{type(e).__name__}: {e}"}
    rows = []
    for n in sizes:
        for name, integrator, model, state0 in make_step_models(n):
            try:
                run = jax.jit(
                    lambda s, integrator=integrator, model=model: (
                        jr.simulate(
                            integrator, model, s, STEP_DT, n_steps, save_every=n_steps
                        ).final_state
                    )
                )
                c, compile_s = aot_compile(run, state0)
                tm = timed({"f": lambda c=c, s=state0: c(s)}, 0.5 if quick else 2.0)["f"]
                step_s = tm.seconds / n_steps
                rows.append(
                    record(
                        tm,
                        {
                            "integrator": name,
                            "n_bodies": n,
                            "n_steps_per_call": n_steps,
                            "compile_seconds": compile_s,
                            "seconds_per_step": step_s,
                            "body_steps_per_s": n / step_s,
                            "particle_steps_per_s": n * 12 / step_s,
                            "load_average": load_average(),
                        },
                    )
                )
                log(f"step {name:12s} N+2={n:>6d}: {1e3 * step_s:10.3f} ms/step")
            except Exception as e:  # noqa: BLE001 — record and go on
                log(f"step {name} N+2={n} failed: {type(e).__name__}: {str(e)[:300]}")
                rows.append(
                    {"integrator": name, "n_bodies": n, "failed": f"{type(e).__name__}: {e}"}
                )
    return {"dt": STEP_DT, "force": [STEP_FORCE, 0.0, 0.0], "n_p": 12, "rows": rows}


# ------------------------------------------------------------------------------------------


def main():
    p = parser(__doc__)
    p.add_argument(
        "--sections",
        default="forces,particles,ensemble,jaxmd",
        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all but steps)",
    )
    p.add_argument("--threads", default="all", help="'1': XLA single-threaded on one core")
    p.add_argument("--jaxmd-allocate-max", type=int, default=200_000)
    p.add_argument("--steps-max", type=int, default=10_000, help="largest N + 2 of `steps`")
    args = p.parse_args()
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        p.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    t_start = time.perf_counter()
    out = {
        "problem": {
            "epsilon": EPSILON,
            "sigma": SIGMA,
            "spacing": SPACING,
            "jitter": JITTER,
            "dtype": "float64",
            "block_size": {n_p: block_size(n_p) for n_p in (4, 6, 8, 12, 16, 24, 32)},
        },
        "threads": args.threads,
        "sections_run": sections,
        "load_average_at_start": load_average(),
    }
    if "forces" in sections:
        out["forces_vs_N"] = section_forces(args.quick)
    if "particles" in sections:
        out["forces_vs_n_p"] = section_particles(args.quick)
    if "ensemble" in sections:
        out["ensemble"] = section_ensemble(args.quick)
    if "jaxmd" in sections:
        out["jax_md"] = section_jaxmd(args.quick, args.jaxmd_allocate_max)
    if "steps" in sections:
        out["steps"] = section_steps(args.quick, args.steps_max)
    tag = device_tag("float64")
    if args.threads == "1":
        tag += "_threads1"
    name = "chain_scaling_steps" if sections == ["steps"] else "chain_scaling"
    name += f"_{tag}" + ("_quick" if args.quick else "") + ".json"
    path = write_results(args.out, name, out, t_start)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
