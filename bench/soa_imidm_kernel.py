"""Experiment: a hand-written structure-of-arrays IMIDM (torque-free), the ceiling for target (a).

Each vector component is its own `(N,)` array, so every operation is elementwise and XLA fuses
the step; Newton uses a chord Jacobian from 3 JVPs with unit tangents (members are independent),
and the Rodrigues coefficients are either sin/cos (`trig`), a 5-term series (`poly`, exact
only for small increments), or the library's branch-free series exact for every angle
(`exact`, `jaxrigid.lie.so3._rodrigues_coefficients`). Prints body-steps/s for N = 10⁴
members, 200 steps of Δt = 0.01.
Not library code: it measures what the layout proposed in docs/design-notes.md (item 6) buys.

    python bench/soa_imidm_kernel.py
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
from jaxrigid.cases import get_case  # noqa: E402

N = 10000
STEPS = 200
h = 0.01
case = get_case("krysl-torque-free")
model, s0 = case.build(case.resolve())
ens = case.perturb(s0, np.random.default_rng(0), 0.01, N)
Iinv = np.linalg.inv(np.asarray(model.inertia))
R0 = tuple(ens.R[:, i, j] for i in range(3) for j in range(3))
P0 = tuple(ens.Pi[:, i] for i in range(3))


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def omega(P):
    return tuple(sum(Iinv[i, j] * P[j] for j in range(3)) for i in range(3))


def add(a, b, s=1.0):
    return tuple(x + s * y for x, y in zip(a, b))


def coeffs(x, mode):
    if mode == "exact":
        from jaxrigid.lie.so3 import _rodrigues_coefficients

        return _rodrigues_coefficients(x)[:2]
    if mode == "trig":
        small = x < 1e-2
        t = jnp.sqrt(jnp.where(small, 1.0, x))
        sh, ch = jnp.sin(0.5 * t), jnp.cos(0.5 * t)
        a = jnp.where(small, 1 - x / 6 + x * x / 120 - x**3 / 5040 + x**4 / 362880, 2 * sh * ch / t)
        b = jnp.where(
            small, 0.5 - x / 24 + x * x / 720 - x**3 / 40320 + x**4 / 3628800, 2 * (sh / t) ** 2
        )
        return a, b
    a = 1 - x / 6 + x * x / 120 - x**3 / 5040 + x**4 / 362880
    b = 0.5 - x / 24 + x * x / 720 - x**3 / 40320 + x**4 / 3628800
    return a, b


def rot(w, v, mode):
    a, b = coeffs(w[0] ** 2 + w[1] ** 2 + w[2] ** 2, mode)
    wv = cross(w, v)
    wwv = cross(w, wv)
    return tuple(v[i] + a * wv[i] + b * wwv[i] for i in range(3))


def residual(x, P, mode):
    psi = tuple(0.5 * h * o for o in omega(x))
    return add(x, rot(tuple(-p for p in psi), P, mode), -1.0)


def step(R, P, mode, iters, jac):
    x = add(P, cross(P, omega(P)), 0.5 * h)
    if jac == "jvp":  # Jacobian columns by 3 JVPs (members are independent: block-diagonal)
        z = jnp.zeros_like(P[0])
        o = jnp.ones_like(P[0])
        cols = [
            jax.jvp(
                lambda *x: residual(x, P, mode), x, tuple(o if k == j else z for k in range(3))
            )[1]
            for j in range(3)
        ]
    adj = [cross(cols[1], cols[2]), cross(cols[2], cols[0]), cross(cols[0], cols[1])]
    det = sum(cols[0][i] * adj[0][i] for i in range(3))
    for _ in range(iters):
        r = residual(x, P, mode)
        x = tuple(x[i] - sum(adj[i][j] * r[j] for j in range(3)) / det for i in range(3))
    psi = tuple(0.5 * h * o for o in omega(x))
    mpsi = tuple(-p for p in psi)
    P1 = rot(mpsi, rot(mpsi, P, mode), mode)
    w = tuple(2 * p for p in psi)
    a, b = coeffs(w[0] ** 2 + w[1] ** 2 + w[2] ** 2, mode)
    z = 0 * w[0]
    W = [[z, -w[2], w[1]], [w[2], z, -w[0]], [-w[1], w[0], z]]
    A = [
        [a * W[i][j] + b * sum(W[i][k] * W[k][j] for k in range(3)) for j in range(3)]
        for i in range(3)
    ]
    Rm = [[R[3 * i + j] for j in range(3)] for i in range(3)]
    R1 = tuple(
        Rm[i][j] + sum(Rm[i][k] * A[k][j] for k in range(3)) for i in range(3) for j in range(3)
    )
    return R1, P1


for mode in ["trig", "poly", "exact"]:
    for iters in [2, 3]:
        f = jax.jit(
            lambda R, P: jax.lax.fori_loop(
                0, STEPS, lambda i, s: step(*s, mode, iters, "jvp"), (R, P)
            )
        )
        out = jax.block_until_ready(f(R0, P0))
        best = 1e9
        for _ in range(3):
            t = time.perf_counter()
            jax.block_until_ready(f(R0, P0))
            best = min(best, time.perf_counter() - t)
        print(mode, iters, f"{N * STEPS / best:.3e}", float(out[1][0][0]))
