"""The discrete mechanics of a Lie–Poisson rigid body that DMV integrates (`integrators.dmv`):
Moser–Veselov's discrete Lagrangian of the free rigid body and the heavy top, its discrete
Legendre transforms and its updates, body and spatial forms (the coupled bodies':
`models.coupled_moser_veselov`). `AbstractLiePoissonBody.moser_veselov_body` and
`moser_veselov_spatial` return them as a `MoserVeselovStep`.

S. Dixon, "Discrete Moser–Veselov integrators for spatial and body representations of rigid
body motions": body form = discrete Euler–Poincaré equation (22) with reconstruction (21);
spatial form = (29)–(30), Appendix B. The implicit step is the Moser–Veselov equation of
McLachlan & Zanna [25].

**Conventions, derived (not copied: see "printed slips" below).** Moser–Veselov's discrete
Lagrangian `L_d(R_k, R_{k+1}) = tr(J(1 − R_kᵀR_{k+1}))/h` with the *mass matrix*
`J = ½ tr(𝕀)·1 − 𝕀` (so that `ĉJ + Jĉ = hat(𝕀c)` and `L_d → ½ Ωᵀ𝕀Ω` as h → 0) gives, with
the body increment `W_k = R_kᵀR_{k+1}` (the paper's `Ω_{k+1}`, ≈ exp(hΩ̂)):

    W_k J − J W_kᵀ = h Π̂_k              (implicit: the Moser–Veselov equation),
    R_{k+1} = R_k W_k,  Π_{k+1} = W_kᵀ Π_k   ((21) and (22): Π̂_{k+1} = W_kᵀ Π̂_k W_k),

so `|Π|` and `π = RΠ` are kept exactly by the update (independently of how accurately the
implicit equation is solved). So is the kinetic energy (to round-off over 10⁵ steps,
tests/test_dmv.py): the Moser–Veselov integral `ΠᵀJ²Π` is, by Cayley–Hamilton,
`(τ² − e₂)|Π|² + 2 det(𝕀) K` (`τ = ½ tr 𝕀`, `e₂` the second invariant of `𝕀`), so the DMV
momentum stays on the exact orbit and its error is a pure phase error. The spatial form
conjugates the same equation by `R_k`: with the spatial mass matrix `I_k = R_k J R_kᵀ`
(advected, (30)) and the constant spatial momentum `m = π̂` ((29) and Lemma 5.2.1), solve
`ω_k I_k − I_k ω_kᵀ = h π̂`, then `R_{k+1} = ω_k R_k`. In exact arithmetic
`ω_k = R_k W_k R_kᵀ`: the two forms are the same map and differ only by round-off.

**Solving the implicit step: Newton on the Cayley (Gibbs) vector.** Write `W = cay(ĉ)` (so3's
`cayley`, whose quaternion is `(1, c/2)/‖·‖`; every rotation by less than π is one, and a step
rotates by |hΩ| ≪ π). For a unit quaternion `(q₀, q)` of `W` the equation reads
`2q₀𝕀q + 2(Jq)×q = hΠ` (the quaternion form McLachlan & Zanna work with); dividing by `q₀²`
(`c = 2q/q₀`) gives a *quadratic* system in three unknowns,

    r(c) = 𝕀c + ½ c × (𝕀c) − (1 + |c|²/4) h Π = 0          (J c × c = c × 𝕀c),

with no trigonometric functions, square roots or unit-norm constraint. DMV solves it with the
library's `Newton` (Jacobian by `jacfwd`, 3×3 cofactor solves, implicit-function gradients),
started from two fixed-point sweeps `c ← 𝕀⁻¹((1 + |c|²/4)hΠ − ½ c × 𝕀c)` from `c = hΩ`
(error O(h³)), so it converges in two iterations (float64, Δt = 0.1; one in float32).
Why not the paper's route: the Schur decomposition of the 6×6 Hamiltonian matrix
(Cardoso–Leite, Appendix B) has no GPU lowering in jax and is a LAPACK call per member;
McLachlan–Zanna's closed form goes through the roots of a scalar polynomial (branch selection
by value, awkward under vmap). Newton on `c` is plain arithmetic that jits, vmaps and
differentiates, and `cay(ĉ)` is orthogonal to round-off whatever the Newton tolerance.

**Printed slips in the paper (checked against the tests in tests/test_dmv.py).**
- The "inertia matrix" `I_0` of the Lagrangian (7) can only be the Moser–Veselov mass matrix
  `J` (`tr(Λ_k I_0 Λ_{k+1}ᵀ)` has the kinetic energy `½Ωᵀ(tr(I_0) − I_0)Ω` as its limit). We
  read §9's principal moments `(2, 2, 1)`, `(3.5, 2.5, 2)` as the inertia tensor `𝕀` (as
  `RigidBody` does, and as the paper's "analytic solution" of the Euler equations needs) and
  form `J` from them; the paper does not say which it used.
- §5.1 defines `M_{k+1} = I_0Ω_{k+1}ᵀ − Ω_{k+1}I_0`, Table 1 `M_k = I_0Ω_k − Ω_kᵀI_0`: opposite
  signs; Table 1's is the one whose limit is `Π̂` (`JΩ̂ + Ω̂J = hat(𝕀Ω)`), and the implicit
  equation for the step from `M_k` is `Ω_{k+1}J − JΩ_{k+1}ᵀ = M_k` (the discrete Legendre
  transform at the *start* of the step), while `JΩ_k − Ω_kᵀJ = M_k` holds at its end.
- (22) `M_{k+1} = Ad*_{Ω_k} M_k` needs `Ω_{k+1}` (= `Λ_kᵀΛ_{k+1}` by the paper's (4)):
  `M_{k+1} = Ω_{k+1}ᵀ M_k Ω_{k+1}`.
- The time step is absent from (7) (`h = 1`, i.e. `M = hΠ̂`); §7 restores it as `Tr/h²`.
- Appendix B step (6) `ω_k = (S_k + m_k/2) I_k⁻¹` must use `I_{k−1}` (`I_k` is only formed from
  `ω_k` in step (7)); its step (2) is the identity `m_k = m_{k−1}` (Lemma 5.2.1), used here as
  such.

**The heavy top (§7, (42)–(51), Tables 3–4), derived.** `RigidBody` with a `HeavyTopPotential`
`V = up·(R c)`, `c = mgχ₀` (body), `Γ = Rᵀ up`: the body torque is `Γ × c` (Dixon's
`mg Γ ◇ χ₀`), the spatial torque `up × χ` with `χ = R c`. We take the discrete Lagrangian
`L_d = tr(J(1 − W_k))/h − ½h(V(R_k) + V(R_{k+1}))`; its discrete Euler–Lagrange equations
are the free Moser–Veselov step between two half kicks (a Strang splitting; symplectic,
symmetric, second order):

    Π⁻ = Π_k + ½h Γ_k × c;   W J − J Wᵀ = hΠ̂⁻;   R_{k+1} = R_kW;   Π_{k+1} = WᵀΠ⁻ + ½h Γ_{k+1} × c.

`⟨Π, Γ⟩` (the Casimir of Figure 9; = `π·up`) and `|Γ|` are kept by every stage (the kicks are
orthogonal to Γ; the free step rotates Π and Γ by the same `Wᵀ`), to round-off. The spatial
form (51) is the same map in `(π, R𝕀Rᵀ, χ)`: kicks `π ± ½h up × χ`, the spatial
Moser–Veselov step, `χ_{k+1} = ω χ_k`. Printed slips:
- (42) takes the potential at the left point only (`−mg⟨Γ_k, χ₀⟩`), and (46) / (51) then kick
  by the whole `mg Γ_k ◇ χ₀` (`mg χ_k ◇ ẑ`) before the free step. Its positions are the same
  sequence as ours, but its node momenta are off by `½h Γ_k × c`, i.e. first order in Π
  (measured slope 0.90 at t = 10 against 2.00 for the symmetric split; tested in
  tests/test_dmv_heavy_top.py). We use the symmetric split, which is second order.
- (46) `Γ_{k+1} = Ω_{k+1}Γ_k` must read `Ω_{k+1}ᵀΓ_k` for `Γ_k = Λ_kᵀẑ` and
  `Ω_{k+1} = Λ_kᵀΛ_{k+1}` (Tables 3–4 print `Γ_k = Λ_kᵀz` and the continuous `Γ̇ = −ΩΓ`,
  whose discrete form is `Ωᵀ`); here Γ is read from `R_{k+1}` (the same in exact arithmetic).
- (46)'s `Ad*_{Ω_k}M_k` needs `Ω_{k+1}`, as for the free body; (51)'s `mg χ_k ◇ ẑ` has the
  opposite order of (46)'s `Γ ◇ χ₀`: with one ◇ convention the spatial torque is `ẑ × χ`
  (= `R(Γ × c)`), which is what the spatial form uses; its `−∇_I L ◇ I` term is the
  advection of the inertia, realised here by `R𝕀Rᵀ` at the current attitude.
- In the text extraction the table captions are shifted against the tables' contents (the
  caption "spatial representation of the heavy top" sits next to a coupled-body table); we
  cite Tables 3–6 by the captions' words (3, 4: heavy top body, spatial; 5, 6: coupled bodies
  body, spatial) and read the table whose content matches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax.numpy as jnp

from .. import _linalg
from ..lie import so3


class MoserVeselovStep(NamedTuple):
    """One Moser–Veselov step of a model, as DMV solves it: `residual(c)`, the start-of-step
    discrete Legendre transform minus `h·momentum` as a function of the Cayley vectors `c`
    (zero on the step); `guess`, the predictor of `c`; `update(c)`, the state at the end of
    the step (attitudes and the end-of-step transform's momenta)."""

    residual: Callable
    guess: Any
    update: Callable


def mass_matrix(inertia):
    """Moser–Veselov's `J = ½ tr(𝕀)·1 − 𝕀` for the body inertia `𝕀 (3, 3)`."""
    return 0.5 * jnp.trace(inertia) * jnp.eye(3, dtype=inertia.dtype) - inertia


def cayley_minus_identity(c):
    """`cay(ĉ) − 1 = 4/(4 + |c|²)(ĉ + ĉ²/2)`, without rounding `1 + …` (see so3.compose_exp)."""
    k = 4.0 / (4.0 + jnp.sum(c * c, axis=-1))
    C = so3.hat(c)
    # `ĉ²` in the component algebra: EM-AVF's residual evaluates this batched over Newton's
    # Jacobian basis, where `@` is a `dot_general` XLA:CPU does not fuse (design note 49)
    return k[..., None, None] * (C + 0.5 * _linalg.matmul(C, C))


def moser_veselov_residual(c, inertia, h_momentum):
    """`r(c) = 𝕀c + ½ c × 𝕀c − (1 + |c|²/4) hΠ`: zero iff `W = cay(ĉ)` solves
    `WJ − JWᵀ = hΠ̂` (body form; the spatial form passes `R𝕀Rᵀ` and `hπ`)."""
    # the component algebra: Newton's Jacobian evaluates this batched over its basis, where
    # `@`, `jnp.cross` and `jnp.dot` are `dot_general`s XLA:CPU does not fuse (design note 49)
    Ic = _linalg.matvec(inertia, c)
    return Ic + 0.5 * _linalg.cross(c, Ic) - (1.0 + 0.25 * _linalg.dot(c, c)) * h_momentum


def moser_veselov_predictor(inertia, h_momentum):
    """Two fixed-point sweeps `c ← 𝕀⁻¹((1 + |c|²/4)hΠ − ½ c × 𝕀c)` from `c = 𝕀⁻¹hΠ = hΩ`:
    the Cayley vector to O(h³)."""
    inv = _linalg.inv3(inertia)

    def sweep(c):
        return inv @ ((1.0 + 0.25 * jnp.dot(c, c)) * h_momentum - 0.5 * jnp.cross(c, inertia @ c))

    return sweep(sweep(inv @ h_momentum))


def heavy_top_requirement(model) -> str | None:
    """DMV's `requires` of a Lie–Poisson body: no torque function, and no potential or uniform
    gravity (the potential's class fact `uniform_gravity`), whose torque the step splits off
    exactly."""
    if model.torque is None and (model.potential is None or model.gravity is not None):
        return None
    return (
        "it integrates the free rigid body and the heavy top only (torque-free bodies and "
        "uniform gravity: no torque function, and a potential that is None or uniform "
        "gravity, as HeavyTopPotential)"
    )


def body_gravity_torque(gravity, R):
    """Body torque of `V = up·(R c)`: `T = Γ × c`, `Γ = Rᵀ up` (Dixon's `mg Γ ◇ χ₀`, (46))."""
    return jnp.cross(R.T @ gravity.up, gravity.weighted_com)


def spatial_gravity_torque(gravity, chi):
    """Spatial torque `up × χ` of the weight at the spatial centre of mass `χ = R c` ((51))."""
    return jnp.cross(gravity.up, chi)


def body_step(model, state, dt) -> MoserVeselovStep:
    """The body form ((21)–(22), (46)): the half kick `Π⁻ = Π_k + ½h Γ_k × c` (heavy top),
    `r(c)` of `WJ − JWᵀ = hΠ̂⁻`, then `R_{k+1} = R_kW`, `Π_{k+1} = WᵀΠ⁻ + ½h Γ_{k+1} × c`."""
    gravity = model.gravity
    R, Pi = state
    if gravity is not None:
        Pi = Pi + 0.5 * dt * body_gravity_torque(gravity, R)
    inertia, h_momentum = model.inertia, dt * Pi

    def update(c):
        R1 = R + R @ cayley_minus_identity(c)
        # Π_{k+1} = Wᵀ Π_k = cay(−ĉ) Π_k.
        Pi1 = Pi + cayley_minus_identity(-c) @ Pi
        if gravity is not None:
            Pi1 = Pi1 + 0.5 * dt * body_gravity_torque(gravity, R1)
        return state._replace(R=R1, Pi=Pi1)

    return MoserVeselovStep(
        lambda c: moser_veselov_residual(c, inertia, h_momentum),
        moser_veselov_predictor(inertia, h_momentum),
        update,
    )


def spatial_step(model, state, dt) -> MoserVeselovStep:
    """The spatial form ((29)–(30), (51), Appendix B): with `π = R_kΠ_k` (half-kicked by
    `½h up × χ_k` for the heavy top) and `I_k = R_k𝕀R_kᵀ`, `r(c)` of `ωI_k − I_kωᵀ = hπ̂`,
    then `R_{k+1} = ωR_k`, the second half kick at `χ_{k+1} = ωχ_k`, and `Π_{k+1}` back in
    the body frame by increments."""
    gravity = model.gravity
    R, Pi = state
    pi = R @ Pi
    kick = jnp.zeros_like(pi)
    chi = None
    if gravity is not None:
        chi = R @ gravity.weighted_com
        kick = 0.5 * dt * spatial_gravity_torque(gravity, chi)
        pi = pi + kick
    inertia_s, h_momentum = R @ model.inertia @ R.T, dt * pi

    def update(c):
        step_s = cayley_minus_identity(c)
        R1 = R + step_s @ R
        pi1, kick1 = pi, kick
        if gravity is not None:
            half = 0.5 * dt * spatial_gravity_torque(gravity, chi + step_s @ chi)
            pi1, kick1 = pi + half, kick + half
        # Back to the body frame as Π_{k+1} = Π_k + R_k⁻¹((π_{k+1} − π_k) + (ωᵀ − 1)π_{k+1})
        # (= R_{k+1}ᵀπ_{k+1} exactly): the roundings of R and of its inverse then touch only
        # the O(h) increment. Forming R_{k+1}ᵀπ multiplies π by R Rᵀ = 1 + O(ε) every step,
        # the same factor step after step, and |Π|, π and K drift coherently (1e-10 in 10⁴
        # steps); R_{k+1}⁻¹π still drifts 6e-12 in 10⁵ steps; this form stays at 1e-14 like
        # the body form.
        Pi1 = Pi + _linalg.inv3(R) @ (kick1 + cayley_minus_identity(-c) @ pi1)
        return state._replace(R=R1, Pi=Pi1)

    return MoserVeselovStep(
        lambda c: moser_veselov_residual(c, inertia_s, h_momentum),
        moser_veselov_predictor(inertia_s, h_momentum),
        update,
    )
