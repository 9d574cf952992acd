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
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp

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
