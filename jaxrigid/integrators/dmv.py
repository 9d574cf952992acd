"""The discrete Moser–Veselov (DMV) integrator for the free rigid body, body and spatial forms.

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
implicit equation is solved). So is the kinetic energy (measured: 1e-14 over 10⁵ steps): the
Moser–Veselov integral `ΠᵀJ²Π` is,
by Cayley–Hamilton, `(τ² − e₂)|Π|² + 2 det(𝕀) K` (`τ = ½ tr 𝕀`, `e₂` the second invariant of
`𝕀`), so the DMV momentum stays on the exact orbit and its error is a pure phase error. The
spatial form conjugates the same equation by `R_k`: with the spatial mass matrix
`I_k = R_k J R_kᵀ` (advected, (30)) and the constant spatial momentum `m = π̂` ((29) and
Lemma 5.2.1), solve `ω_k I_k − I_k ω_kᵀ = h π̂`, then `R_{k+1} = ω_k R_k`. In exact arithmetic
`ω_k = R_k W_k R_kᵀ`: the two forms are the same map and differ only by round-off.

**Solving the implicit step: Newton on the Cayley (Gibbs) vector.** Write `W = cay(ĉ)` (so3's
`cayley`, whose quaternion is `(1, c/2)/‖·‖`; every rotation by less than π is one, and a step
rotates by |hΩ| ≪ π). For a unit quaternion `(q₀, q)` of `W` the equation reads
`2q₀𝕀q + 2(Jq)×q = hΠ` (the quaternion form McLachlan & Zanna work with); dividing by `q₀²`
(`c = 2q/q₀`) gives a *quadratic* system in three unknowns,

    r(c) = 𝕀c + ½ c × (𝕀c) − (1 + |c|²/4) h Π = 0          (J c × c = c × 𝕀c),

with no trigonometric functions, square roots or unit-norm constraint. It is solved with the
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
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp

from .. import _linalg
from ..lie import so3
from ..models.rigid_body import RigidBodyState
from ..newton import Newton
from .base import AbstractImplicitIntegrator, solve_on_branch

_PRESERVES = frozenset({"K", "pi", "RtR_error"})
_REF = "Dixon, discrete Moser–Veselov integrators"


def mass_matrix(inertia):
    """Moser–Veselov's `J = ½ tr(𝕀)·1 − 𝕀` for the body inertia `𝕀 (3, 3)`."""
    return 0.5 * jnp.trace(inertia) * jnp.eye(3, dtype=inertia.dtype) - inertia


def cayley_minus_identity(c):
    """`cay(ĉ) − 1 = 4/(4 + |c|²)(ĉ + ĉ²/2)`, without rounding `1 + …` (see so3.compose_exp)."""
    k = 4.0 / (4.0 + jnp.sum(c * c, axis=-1))
    C = so3.hat(c)
    return k[..., None, None] * (C + 0.5 * (C @ C))


def moser_veselov_residual(c, inertia, h_momentum):
    """`r(c) = 𝕀c + ½ c × 𝕀c − (1 + |c|²/4) hΠ`: zero iff `W = cay(ĉ)` solves
    `WJ − JWᵀ = hΠ̂` (body form; the spatial form passes `R𝕀Rᵀ` and `hπ`)."""
    Ic = inertia @ c
    return Ic + 0.5 * jnp.cross(c, Ic) - (1.0 + 0.25 * jnp.dot(c, c)) * h_momentum


def solve_moser_veselov(newton: Newton, inertia, h_momentum):
    """Cayley vector `c (3,)` of the Moser–Veselov increment for `h·momentum`, and the
    `NewtonInfo`. A root farther from the predictor than the predictor is from 0 (the root
    at h = 0) is not the branch continuous in h and is reported as not converged."""
    inv = _linalg.inv3(inertia)

    def sweep(c):
        return inv @ ((1.0 + 0.25 * jnp.dot(c, c)) * h_momentum - 0.5 * jnp.cross(c, inertia @ c))

    guess = sweep(sweep(inv @ h_momentum))
    residual = lambda x: moser_veselov_residual(x, inertia, h_momentum)  # noqa: E731
    return solve_on_branch(newton, residual, guess, jnp.zeros_like(guess))


def _require_free(model, name):
    if model.has_torque:
        raise ValueError(
            f"{name} integrates the free (torque-free) rigid body; this model has a "
            "potential or torque (use IMIDM, TRAPM, ... for torqued bodies)"
        )


class DMVBody(AbstractImplicitIntegrator):
    """DMV in the body representation: solve `W J − J Wᵀ = hΠ̂_k` for `W ∈ SO(3)`, then
    `R_{k+1} = R_k W` (21), `Π_{k+1} = Wᵀ Π_k` (22). Second order, symmetric, variational;
    keeps `|Π|`, `π = RΠ` and `K` to round-off. Free rigid body only."""

    name: ClassVar[str] = "DMV-body"
    torque_free_only: ClassVar[bool] = True
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = _PRESERVES
    reference: ClassVar[str] = _REF + ", eqs. (21)–(22); McLachlan & Zanna (2005)"
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, t, dt):
        del t
        _require_free(model, self.name)
        R, Pi = state
        c, info = solve_moser_veselov(self.newton, model.inertia, dt * Pi)
        # Π_{k+1} = Wᵀ Π_k = cay(−ĉ) Π_k.
        Pi1 = Pi + cayley_minus_identity(-c) @ Pi
        return RigidBodyState(R + R @ cayley_minus_identity(c), Pi1), info


class DMVSpatial(AbstractImplicitIntegrator):
    """DMV in the spatial representation (Appendix B, (29)–(30)): with `π = R_kΠ_k` (the
    conserved spatial momentum `m`) and the spatial inertia `R_k𝕀R_kᵀ` (the advected `I_k`),
    solve `ω I_k − I_k ωᵀ = hπ̂` for `ω ∈ SO(3)`, then `R_{k+1} = ω R_k`,
    `Π_{k+1} = R_{k+1}ᵀπ`. The same map as `DMVBody` in exact arithmetic."""

    name: ClassVar[str] = "DMV-spatial"
    torque_free_only: ClassVar[bool] = True
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = _PRESERVES
    reference: ClassVar[str] = _REF + ", eqs. (29)–(30), Appendix B; McLachlan & Zanna (2005)"
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, t, dt):
        del t
        _require_free(model, self.name)
        R, Pi = state
        pi = R @ Pi
        inertia_s = R @ model.inertia @ R.T
        c, info = solve_moser_veselov(self.newton, inertia_s, dt * pi)
        R1 = R + cayley_minus_identity(c) @ R
        # Back to the body frame as Π_{k+1} = Π_k + R_k⁻¹(ωᵀ − 1)π (= R_{k+1}ᵀπ exactly): the
        # roundings of R and of its inverse then touch only the O(h) increment. Forming
        # R_{k+1}ᵀπ multiplies π by R Rᵀ = 1 + O(ε) every step, the same factor step after
        # step, and |Π|, π and K drift coherently (1e-10 in 10⁴ steps); R_{k+1}⁻¹π still
        # drifts 6e-12 in 10⁵ steps; this form stays at 1e-14 like the body form.
        return RigidBodyState(R1, Pi + _linalg.inv3(R) @ (cayley_minus_identity(-c) @ pi)), info


DMV_METHODS = {cls.name: cls for cls in (DMVBody, DMVSpatial)}
