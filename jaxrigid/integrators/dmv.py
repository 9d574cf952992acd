"""The discrete Moser–Veselov (DMV) integrator, body and spatial forms, of every model whose
discrete mechanics it is given: the free rigid body and the heavy top
(`AbstractLiePoissonBody`, `models.moser_veselov`) and two coupled bodies
(`AbstractCoupledBodies`, `models.coupled_moser_veselov`).

S. Dixon, "Discrete Moser–Veselov integrators for spatial and body representations of rigid
body motions"; the implicit step is the Moser–Veselov equation of McLachlan & Zanna [25].
Every form's step is the same: solve the start-of-step discrete Legendre transform `= hΠ` for
the Cayley vectors of the increments by Newton from a predictor, then update the attitudes
and the momenta by the end-of-step transform. What differs between the models (the
transforms, the predictor, the update, a heavy top's half kicks) is the model's
(`moser_veselov_body`, `moser_veselov_spatial`, returning a `MoserVeselovStep`), and so is
what the step keeps (`moser_veselov_keeps`: `preserved(model)`).

The implicit step is solved by Newton on the Cayley (Gibbs) vector of each increment, a
quadratic system without trigonometric functions or a unit-norm constraint; why, and why not
the paper's Schur decomposition, is told with the residual in `models.moser_veselov`.

The preprocessed DMV of Hairer & Vilmart (orders 4–10, the free body: `AbstractPreprocessedDMV`)
is DMV run on a body with modified moments of inertia.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp

from .. import _linalg
from ..models.moser_veselov import body_gravity_torque as body_gravity_torque
from ..models.moser_veselov import cayley_minus_identity as cayley_minus_identity
from ..models.moser_veselov import heavy_top_requirement as heavy_top_requirement
from ..models.moser_veselov import mass_matrix as mass_matrix
from ..models.moser_veselov import moser_veselov_predictor, moser_veselov_residual
from ..models.moser_veselov import spatial_gravity_torque as spatial_gravity_torque
from ..models.structures import AbstractCoupledBodies, AbstractLiePoissonBody
from ..newton import Newton
from .base import AbstractImplicitIntegrator, solve_on_branch

_REF = "Dixon, discrete Moser–Veselov integrators"


def solve_moser_veselov(newton: Newton, inertia, h_momentum):
    """Cayley vector `c (3,)` of the free body's Moser–Veselov increment for `h·momentum`,
    and the `NewtonInfo` (see `solve_step`)."""
    residual = lambda x: moser_veselov_residual(x, inertia, h_momentum)  # noqa: E731
    guess = moser_veselov_predictor(inertia, h_momentum)
    return solve_on_branch(newton, residual, guess, jnp.zeros_like(guess))


def solve_step(newton: Newton, step):
    """The state at the end of a model's `MoserVeselovStep`, and the `NewtonInfo`. A root
    farther from the predictor than the predictor is from 0 (the root at h = 0) is not the
    branch continuous in h and is reported as not converged."""
    c, info = solve_on_branch(newton, step.residual, step.guess, jnp.zeros_like(step.guess))
    return step.update(c), info


class _DMV(AbstractImplicitIntegrator):
    """The class facts of both forms. `preserves`: what the step keeps on a Lie–Poisson body;
    on a model, `preserved(model)`, its discrete mechanics' `moser_veselov_keeps` (the coupled
    bodies' step keeps the total π, not the energy)."""

    structures = (AbstractLiePoissonBody, AbstractCoupledBodies)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = AbstractLiePoissonBody.moser_veselov_keeps
    newton: Newton = eqx.field(default_factory=Newton)

    def requires(self, model) -> str | None:
        return model.moser_veselov_requirement()

    def preserved(self, model) -> frozenset[str]:
        return self.preserves & model.moser_veselov_keeps

    def _checked(self, model):
        why = model.moser_veselov_requirement()
        if why is not None:
            raise ValueError(f"{self.name} {why.removeprefix('it ')}; this model is not one")
        return model


class DMVBody(_DMV):
    """DMV in the body representation: solve the start-of-step transform for the body
    increments `W = R_kᵀR_{k+1}`, then `R_{k+1} = R_kW` and the momenta by the end-of-step
    transform. Free body and heavy top ((21)–(22), (46), Table 3): `WJ − JWᵀ = hΠ̂_k`,
    `Π_{k+1} = WᵀΠ_k`, the potential split symmetrically by half kicks `Π ± ½h Γ × c`; keeps
    `|Π|`, `π = RΠ` and `K` to round-off. Coupled bodies ((52)–(60), Table 5, derived anew:
    `models.coupled_moser_veselov`): both increments, `Λ ← W_1ᵀΛW_2`; keeps the total `π`.
    Second order, symmetric, variational."""

    name: ClassVar[str] = "DMV-body"
    reference: ClassVar[str] = (
        _REF + ", eqs. (21)–(22), (46); §8, (52)–(60), Table 5; McLachlan & Zanna (2005)"
    )

    def step(self, model, state, solver_state, t, dt):
        del t
        new, info = solve_step(self.newton, self._checked(model).moser_veselov_body(state, dt))
        return new, solver_state, info


class DMVSpatial(_DMV):
    """DMV in the spatial representation: the same equations conjugated by the attitudes,
    `R_{k+1} = ωR_k`. Free body and heavy top (Appendix B, (29)–(30), (51), Table 4): with
    `π = R_kΠ_k` (the conserved `m`) and `I_k = R_k𝕀R_kᵀ` (advected), `ωI_k − I_kωᵀ = hπ̂`,
    heavy-top half kicks `π ± ½h up × χ` with `χ_{k+1} = ωχ_k`. Coupled bodies ((61)–(67),
    Table 6, derived anew): the advected spatial mass matrices and joint vectors, the joint's
    exchange `π_{1,2} ∓= (ε/h)Δδ_1 × Δδ_2`. The same map as `DMVBody` in exact arithmetic."""

    name: ClassVar[str] = "DMV-spatial"
    reference: ClassVar[str] = (
        _REF + ", eqs. (29)–(30), (51), Appendix B; §8, (61)–(67), Table 6; "
        "McLachlan & Zanna (2005)"
    )

    def step(self, model, state, solver_state, t, dt):
        del t
        step = self._checked(model).moser_veselov_spatial(state, dt)
        new, info = solve_step(self.newton, step)
        return new, solver_state, info


DMV_METHODS = {cls.name: cls for cls in (DMVBody, DMVSpatial)}


# --- the preprocessed DMV (Hairer & Vilmart 2006): DMV on a modified body ------------------

_PREPROCESSED_REF = (
    "Hairer & Vilmart, Preprocessed discrete Moser–Veselov algorithm for the full dynamics "
    "of a rigid body, J. Phys. A 39 (2006) 13225–13235, and their code DMV10"
)
ORDERS = (2, 4, 6, 8, 10)


def _coefficients(inertia):
    """`(S, D)`: `S[j−1][i]`, `D[j−1][i]` (j = 1..4, i = 0..j) multiply `N^{j−i} E^i` in `σ − 1`
    and `δ` (DMV10's `S{2j+1}C{i+1}`, `D{2j+1}C{i+1}`), for the inertia tensor `(3, 3)`."""
    inv = _linalg.inv3(inertia)
    I2 = inertia @ inertia
    inv2 = inv @ inv
    tr = jnp.trace
    s1, s2, s3, s4 = tr(inertia), tr(I2), tr(I2 @ inertia), tr(I2 @ I2)
    r1, r2, r3, r4 = tr(inv), tr(inv2), tr(inv2 @ inv), tr(inv2 @ inv2)
    d = _linalg.det3(inertia)
    # Σ_{i≠j} I_i^a / I_j^b (DMV10's XSI, XSI12, XSI21, XSI13, XSI31, XSI22).
    x11 = s1 * r1 - 3.0
    x12 = s1 * r2 - r1
    x21 = s2 * r1 - s1
    x13 = s1 * r3 - r2
    x31 = s3 * r1 - s2
    x22 = s2 * r2 - 3.0
    d2, d3, d4 = d * d, d * d * d, (d * d) * (d * d)
    S = [
        [s1 / (6 * d), -r1 / 3],
        [
            (s2 / d - r1) / (30 * d),
            (1 - x11) / (30 * d),
            (3 * s1 / d + 2 * r2) / 60,
        ],
        [
            (4 * d + 17 * s3 - 15 * d * x11) / (2520 * d3),
            (9 * s1 + 10 * d * r2 - 6 * x21) / (420 * d2),
            ((6 * x12 - 100 * r1) * d + 53 * s2) / (2520 * d2),
            (15 - d * r3 - 2 * x11) / (630 * d),
        ],
        [
            (62 * s4 - 94 * d * x21 + 66 * d2 * r2 + 81 * d * s1) / (45360 * d4),
            (-77 * x31 + 75 * d * x12 + 214 * s2 - 240 * d * r1) / (22680 * d3),
            (26 * d * x22 + 55 * s3 + 204 * d - 50 * d2 * r3 - 59 * d * x11) / (7560 * d3),
            (137 * d * r2 - d * x13 + 3 * s1 - 69 * x21) / (11340 * d2),
            (2 * d2 * r4 + 5 * d * x12 - 171 * d * r1 + 159 * s2) / (45360 * d2),
        ],
    ]
    D = [
        [-1 / (3 * d), s1 / (6 * d)],
        [
            -s1 / d2 / 60,
            r1 / d / 10 - s2 / d2 / 60,
            -(9 + x11) / d / 60,
        ],
        [
            (34 * d * r1 - 19 * s2) / (2520 * d3),
            (s3 + 2 * d * x11 - 85 * d) / (1260 * d3),
            (47 * s1 + 13 * x21 - 38 * d * r2) / (2520 * d2),
            (9 * d * r1 + d * x12 - 11 * s2) / (1260 * d2),
        ],
        [
            (60 * x11 * d - 61 * s3 - 247 * d) / (45360 * d4),
            (54 * d * s1 - s4 + 218 * d * x21 - 426 * d2 * r2) / (45360 * d4),
            (125 * d * r1 - 5 * x31 - 130 * s2 + 4 * d * x12) / (7560 * d3),
            (67 * s3 - 735 * d - 15 * d * x22 + 87 * d * x11 + 34 * d2 * r3) / (22680 * d3),
            (165 * s1 - d * x13 - 9 * x21 - 145 * d * r2) / (45360 * d2),
        ],
    ]
    return S, D, inv


def modification(inertia, Pi, dt, order):
    """`(σ, δ)` of the modified inverse inertia `σ𝕀⁻¹ + δ1` for a step `dt` from momentum `Pi`
    (`σ = 1, δ = 0` for order 2, plain DMV)."""
    if order not in ORDERS:
        raise ValueError(f"preprocessed DMV has orders {ORDERS}, not {order}")
    S, D, inv = _coefficients(inertia)
    h2 = dt * dt
    N = 0.5 * h2 * jnp.dot(Pi, Pi)
    E = 0.5 * h2 * jnp.dot(Pi, inv @ Pi)
    sigma = jnp.ones_like(N)
    delta = jnp.zeros_like(N)
    for j in range(1, order // 2):
        for i in range(j + 1):
            monomial = N ** (j - i) * E**i
            sigma = sigma + S[j - 1][i] * monomial
            delta = delta + D[j - 1][i] * monomial
    return sigma, delta


def modified_inertia(inertia, Pi, dt, order):
    """The modified inertia tensor `(σ𝕀⁻¹ + δ1)⁻¹` that DMV integrates (see the module
    docstring); `inertia` itself for order 2."""
    if order == 2:
        return inertia
    sigma, delta = modification(inertia, Pi, dt, order)
    inv = _linalg.inv3(inertia)
    return _linalg.inv3(sigma * inv + delta * jnp.eye(3, dtype=inv.dtype))


class AbstractPreprocessedDMV(AbstractImplicitIntegrator):
    """DMV (`base`: `DMVBody` or `DMVSpatial`) on the modified inertia of order `order`: the
    preprocessed DMV of the free rigid body, orders 4, 6, 8 and 10.

    E. Hairer, G. Vilmart, "Preprocessed discrete Moser–Veselov algorithm for the full dynamics of
    a rigid body", J. Phys. A: Math. Gen. 39 (2006) 13225–13235; the authors' Fortran code DMV10
    (www.unige.ch/~hairer/software.html, version of 29 August 2006 with the correction of
    28 December 2007; read here in the copy github.com/ja72/RB_DiscreteMoserVeselov,
    `DMV_F77/DMV10.FI`, whose README gives that origin, and its Fortran 95 port
    `DMV_F95/mod_dmv.f90`, whose coefficients agree with it term by term).

    **The method.** DMV keeps the Casimir `|Π|²` and the energy `K = ½Πᵀ𝕀⁻¹Π` exactly and is an
    integrable Poisson map, so its numerical solution is the exact solution of a rigid body with
    *modified* moments of inertia (Hairer–Vilmart). Running DMV (`DMVBody` /
    `DMVSpatial`, unchanged) on the body with the inverse inertia

        𝕀̃⁻¹ = σ(h) 𝕀⁻¹ + δ(h) 1,
        σ = 1 + Σ_{j=1}^{k−1} Σ_{i=0}^{j} S_{j,i} N^{j−i} E^i,
        δ =     Σ_{j=1}^{k−1} Σ_{i=0}^{j} D_{j,i} N^{j−i} E^i,
        N = ½h²|Π|²,   E = ½h² Πᵀ𝕀⁻¹Π,

    (`S_{j,i}`, `D_{j,i}` rational functions of the principal moments, `_coefficients`) gives a
    method of order 2k for the momentum *and* the attitude: `σ` corrects the speed along the
    (exact) momentum orbit, `δ` the rotation about the momentum, which only the attitude sees
    (`δ 1` adds `δΠ` to `Ω`, and `Π × δΠ = 0`). `N` and `E` are kept by DMV, so the modified
    inertia is constant along a run; as in the authors' code it is recomputed from the current
    `Π` at every step (a step is then a self-contained map, and the method stays symmetric: the
    coefficients are even in h).

    **Reproduced, and how.** The coefficients are those of DMV10 (the paper's Fortran code),
    written here over the invariants of the inertia tensor rather than its principal moments:
    every coefficient is a symmetric function of the moments, `s_k = Σ I_i^k = tr 𝕀^k`,
    `r_k = Σ I_i^{−k} = tr 𝕀^{−k}`, `d = I_1I_2I_3 = det 𝕀` and the mixed sums
    `Σ_{i≠j} I_i^a/I_j^b = s_a r_b − s_{a−b}` (with `s_0 = 3`, `s_{−m} = r_m`), so the same
    formulas hold for a non-diagonal `𝕀` (the modification commutes with a rotation of the body
    frame). DMV10's quaternion step (`I_i c_i + (I_k − I_j) c_j c_k = ½h(1 + |c|²)Π_i`, quaternion
    `(1, c)/√(1 + |c|²)`) is the library's Moser–Veselov equation for the Cayley vector `2c`
    (`models.moser_veselov.moser_veselov_residual`), so only the inertia changes. The orders
    are measured in tests/test_dmv_preprocessed.py against a DOP853 reference (momentum and
    attitude). The paper's text itself (its derivation of the coefficients by backward error
    analysis) was not read — the PDF in that repository has bitmap (Type 3) fonts that could not
    be extracted here; the coefficients are taken from the code and verified by the measured
    orders only.

    **Not reproduced.** The authors' code also takes an external potential by a symmetric Strang
    splitting (second order overall); these classes integrate the free rigid body only (a
    `RigidBody` without potential or torque), as the preprocessing is exact only there.
    """

    base: ClassVar[type]
    structures = (AbstractLiePoissonBody,)
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({"K", "pi", "RtR_error"})
    reference: ClassVar[str] = _PREPROCESSED_REF
    newton: Newton = eqx.field(default_factory=Newton)

    def requires(self, model) -> str | None:
        if model.has_torque:
            return "it integrates the free rigid body (a RigidBody without potential or torque)"
        return None

    def step(self, model, state, solver_state, t, dt):
        if model.has_torque:
            raise ValueError(
                f"{self.name} integrates the free rigid body only (the preprocessing is exact "
                "for it alone); this model has a potential or a torque"
            )
        inertia = modified_inertia(model.inertia, state.Pi, dt, self.order)
        modified = eqx.tree_at(lambda m: m.inertia, model, inertia)
        return self.base(newton=self.newton).step(modified, state, solver_state, t, dt)


class _Body(AbstractPreprocessedDMV):
    base: ClassVar[type] = DMVBody


class _Spatial(AbstractPreprocessedDMV):
    base: ClassVar[type] = DMVSpatial


class DMV4Body(_Body):
    name: ClassVar[str] = "DMV4-body"
    order: ClassVar[int] = 4


class DMV6Body(_Body):
    name: ClassVar[str] = "DMV6-body"
    order: ClassVar[int] = 6


class DMV8Body(_Body):
    name: ClassVar[str] = "DMV8-body"
    order: ClassVar[int] = 8


class DMV10Body(_Body):
    name: ClassVar[str] = "DMV10-body"
    order: ClassVar[int] = 10


class DMV4Spatial(_Spatial):
    name: ClassVar[str] = "DMV4-spatial"
    order: ClassVar[int] = 4


class DMV6Spatial(_Spatial):
    name: ClassVar[str] = "DMV6-spatial"
    order: ClassVar[int] = 6


class DMV8Spatial(_Spatial):
    name: ClassVar[str] = "DMV8-spatial"
    order: ClassVar[int] = 8


class DMV10Spatial(_Spatial):
    name: ClassVar[str] = "DMV10-spatial"
    order: ClassVar[int] = 10


PREPROCESSED_DMV_CLASSES = (
    DMV4Body,
    DMV6Body,
    DMV8Body,
    DMV10Body,
    DMV4Spatial,
    DMV6Spatial,
    DMV8Spatial,
    DMV10Spatial,
)
PREPROCESSED_DMV_METHODS = {cls.name: cls for cls in PREPROCESSED_DMV_CLASSES}


def preprocessed_dmv(order: int, spatial: bool = False, newton: Newton | None = None):
    """The preprocessed DMV of `order` (4, 6, 8, 10; 2 is plain `DMVBody` / `DMVSpatial`)."""
    form = "spatial" if spatial else "body"
    cls: type[AbstractImplicitIntegrator] | None
    cls = (DMVSpatial if spatial else DMVBody) if order == 2 else None
    if cls is None:
        name = f"DMV{order}-{form}"
        if name not in PREPROCESSED_DMV_METHODS:
            raise ValueError(f"preprocessed DMV has orders {ORDERS}, not {order}")
        cls = PREPROCESSED_DMV_METHODS[name]
    return cls() if newton is None else cls(newton=newton)
