"""The model structures: what a method needs of a model, one abstract base each.

A model declares its structure by subclassing it (a model of two structures subclasses both:
the unreduced rolling ball is an attitude-quaternion system and a Lagrange–d'Alembert system);
an integrator declares the structures it integrates in its class fact `structures`, and
`AbstractIntegrator.integrates` asks `isinstance(model, structures)` and nothing else about the
model's class (`integrators/base.py`). What a method needs beyond its structure (a torque it
can or cannot take) is its `requires(model)`, which reads the model's declared facts, never its
class. A structure is a contract: the members its docstring lists, which the integrators of it
call; its abstract methods are enforced when a model is made (its fields are listed, not
declared: an abstract field would reorder the model's own dataclass fields). Its `title`
names it in a method's refusal.

| Structure | Its models | Its methods |
| --- | --- | --- |
| `AbstractLiePoissonBody` | `RigidBody` | Krysl's, MKRK, DMV, LP-split |
| `AbstractCanonicalSystem` | `HamiltonianSystem` | Runge–Kutta, partitioned RK |
| `AbstractConstrainedBodies` | `ConstrainedRigidBody`, `RigidBodyChain` | RATTLE |
| `AbstractDirectorBody` | `DirectorRigidBody` | EM-AVF |
| `AbstractCoupledBodies` | `CoupledBodies` | DMV |
| `AbstractCanonicalChain` | `QuaternionChain` | Gauss (2, 4, 6) |
| `AbstractAttitudeQuaternion` | `RollingBall`, `RollingBallUnreduced`, `Suslov` | RKMK |
| `AbstractRollingBall` | `RollingBall` | DLA (on the group) |
| `AbstractLagrangeDAlembert` | `LagrangeDAlembertSystem`, `RollingBallUnreduced` | DLA-midpoint |

Each exists because some method integrates exactly its models: two structures that the same
methods integrate would be one. The constrained bodies are one structure with a body axis (one
body about a fixed point is a chain of one, held in place), integrated by the one RATTLE. The
quaternion chain is integrated by the one Gauss (the same classes as the canonical system's),
which asks either structure for its `state_layout` (one flat vector, or one row per body),
`coupling_reach` and `stage_linear_solver`; it stays a structure of its own because the other
canonical methods (explicit, partitioned, Radau) do not integrate it. The coupled bodies are
integrated by the one DMV, which asks either structure for its discrete mechanics
(`moser_veselov_body`, `moser_veselov_spatial`: the residual of the start-of-step discrete
Legendre transform, its predictor, the update); they stay a structure of their own because the
Lie–Poisson body's other methods do not integrate them.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

from jax.flatten_util import ravel_pytree

from ..linear_solvers import AbstractLinearSolver, Auto, StageJacobian
from . import coupled_moser_veselov, moser_veselov
from .base import AbstractModel

__all__ = [
    "AbstractAttitudeQuaternion",
    "AbstractCanonicalChain",
    "AbstractCanonicalSystem",
    "AbstractConstrainedBodies",
    "AbstractCoupledBodies",
    "AbstractDirectorBody",
    "AbstractLagrangeDAlembert",
    "AbstractLiePoissonBody",
    "AbstractRollingBall",
    "AbstractStructure",
    "STRUCTURES",
    "models_of",
]


class AbstractStructure(AbstractModel):
    """The base of the structures: `title`, the structure in words."""

    title: ClassVar[str]


class AbstractLiePoissonBody(AbstractStructure):
    """A rigid body about a fixed point in Lie–Poisson form (Krysl §3, eq. 7): state
    `(R, Pi)`, the attitude `R ∈ SO(3)` (body → space) and the body momentum `Π`,

        Π̇ = Π × 𝕀⁻¹Π + T(t, R, Π),   Ṙ = R (𝕀⁻¹Π)^.

    Members: `inertia (3, 3)`; `potential`, an `AbstractPotential` or `None` (its class facts
    say what a method may exploit: `uniform_gravity`); `torque`, a user's `T(t, R, Π)` or
    `None`; `has_torque` (either present); `gravity` (the potential if it is uniform
    gravity); `angular_velocity_map()`, the map `Π ↦ 𝕀⁻¹Π`;
    `body_torque(t, R, Pi)`, the total body torque. Its discrete mechanics
    (`models.moser_veselov`, DMV's): `moser_veselov_requirement()`, `moser_veselov_body(state,
    dt)`, `moser_veselov_spatial(state, dt)`, `moser_veselov_keeps`."""

    title: ClassVar[str] = "a Lie–Poisson rigid body"
    # Moser–Veselov's step keeps |Π|, π = RΠ and, by its integral ΠᵀJ²Π, the energy
    moser_veselov_keeps: ClassVar[frozenset[str]] = frozenset({"K", "pi", "RtR_error"})

    def moser_veselov_requirement(self) -> str | None:
        """Where the discrete Lagrangian does not model this body (a torque, a potential other
        than uniform gravity), in words; `None`: the free body and the heavy top."""
        return moser_veselov.heavy_top_requirement(self)

    def moser_veselov_body(self, state, dt) -> moser_veselov.MoserVeselovStep:
        """The body form's step (Dixon (21)–(22), (46))."""
        return moser_veselov.body_step(self, state, dt)

    def moser_veselov_spatial(self, state, dt) -> moser_veselov.MoserVeselovStep:
        """The spatial form's step (Dixon (29)–(30), (51), Appendix B)."""
        return moser_veselov.spatial_step(self, state, dt)

    @property
    @abc.abstractmethod
    def has_torque(self) -> bool:
        """Whether a potential or a torque function acts (the free body has neither)."""

    @property
    @abc.abstractmethod
    def gravity(self) -> Any:
        """The potential if it is uniform gravity, `V = up · (R c)` (its class fact
        `uniform_gravity`; fields `up` and `weighted_com`: the heavy top), else `None`."""

    @abc.abstractmethod
    def angular_velocity_map(self) -> Callable:
        """The map `Π ↦ Ω = 𝕀⁻¹Π`."""

    @abc.abstractmethod
    def body_torque(self, t, R, Pi):
        """The total body torque `T(t, R, Π)`."""


class AbstractCanonicalSystem(AbstractStructure):
    """A canonical Hamiltonian system `q̇ = ∂H/∂p`, `ṗ = −∂H/∂q` on flat coordinates: state
    `(q, p)`. Members: `grad_q(q, p)`, `grad_p(q, p)`; `vector_field(t, state)`;
    `state_layout(state)`, one flat vector; `coupling_reach = None` (no body axis) and
    `stage_linear_solver = Auto()` (Newton's default on the stage equations: the dense
    Jacobian, every unknown coupled)."""

    title: ClassVar[str] = "a canonical Hamiltonian system"
    coupling_reach: ClassVar[int | None] = None
    stage_linear_solver: ClassVar[AbstractLinearSolver] = Auto()

    def state_layout(self, state):
        """`(y (n,), to_array, from_array)`: the state as one flat vector (`ravel_pytree`), and
        the maps from a state-shaped pytree to such a vector and back."""
        y, unravel = ravel_pytree(state)
        return y, lambda tree: ravel_pytree(tree)[0], unravel

    @abc.abstractmethod
    def grad_q(self, q, p):
        """`∂H/∂q`."""

    @abc.abstractmethod
    def grad_p(self, q, p):
        """`∂H/∂p`."""

    @abc.abstractmethod
    def vector_field(self, t, state):
        """`(q̇, ṗ)`."""


class AbstractConstrainedBodies(AbstractStructure):
    """Rigid bodies as holonomically constrained systems in the embedding (RATTLE's form,
    Chaurasia §3.2 and App. B): each body's attitude `R_j ∈ ℝ³ˣ³`, the constraint
    `R_jᵀR_j = 1` kept by a multiplier, its conjugate momentum `P_j = Ṙ_j J`, and its centre
    `r_j` with momentum `p_j` — one body about a fixed point (state `(R, P)`, no centre) or a
    chain along a body axis (state `(r, p, R, P)`). Members: `bodies(state)`, the state along
    the body axis as `(r (n, 3), p (n, 3), R (n, 3, 3), P (n, 3, 3))`, and
    `with_bodies(state, r, p, R, P)`, its inverse; `mass`, one body's; `inverse_mass_diagonal`,
    `diag J⁻¹ (3,)`; `masks(n_bodies, dtype)`, `(translation, rotation)` each `(n,)`, zero on
    the held coordinates; `potential_gradients(t, r, R)`, `(∂V/∂r, ∂V/∂R)`."""

    title: ClassVar[str] = "rigid bodies constrained in the embedding (RATTLE's form)"

    @abc.abstractmethod
    def bodies(self, state):
        """`(r, p, R, P)` along the body axis."""

    @abc.abstractmethod
    def with_bodies(self, state, r, p, R, P):
        """`state` with the bodies `(r, p, R, P)` (the inverse of `bodies`)."""

    @property
    @abc.abstractmethod
    def mass(self):
        """One body's mass."""

    @property
    @abc.abstractmethod
    def inverse_mass_diagonal(self):
        """`diag(J⁻¹) (3,)`."""

    @abc.abstractmethod
    def masks(self, n_bodies: int, dtype):
        """`(translation, rotation)`: which coordinates move (zero on the held ones)."""

    @abc.abstractmethod
    def potential_gradients(self, t, r, R):
        """`(∂V/∂r (n, 3), ∂V/∂R (n, 3, 3))`."""


class AbstractDirectorBody(AbstractStructure):
    """A rigid body in directors (Gebhardt & Romero): state `(q, v)`, the centre and three
    directors `q ∈ ℝ¹²` with the rigidity constraints, and their velocities. Members:
    `euler_inertia`, the directors' mass matrix; `generalized_forces(t, q)`; `nontwisting`
    (static: the constraint set of the non-twisting form)."""

    title: ClassVar[str] = "a rigid body in directors"

    @abc.abstractmethod
    def generalized_forces(self, t, q):
        """The generalised forces on `q`."""


class AbstractCoupledBodies(AbstractStructure):
    """Two Lie–Poisson rigid bodies joined by a ball-and-socket joint (Dixon §8): state
    `(R, Lambda, Pi)`, the attitudes and the momentum. Members: `joint (2, 3)`,
    `reduced_mass`, `augmented_inertia()`, `angular_velocity(Lambda, Pi)`. Its discrete
    mechanics (`models.coupled_moser_veselov`, DMV's): `moser_veselov_requirement()`,
    `moser_veselov_body(state, dt)`, `moser_veselov_spatial(state, dt)`,
    `moser_veselov_keeps`."""

    title: ClassVar[str] = "two coupled rigid bodies"
    # the total π by the update's exchange (discrete Noether); the energy is not kept
    moser_veselov_keeps: ClassVar[frozenset[str]] = frozenset({"pi", "RtR_error"})

    def moser_veselov_requirement(self) -> str | None:
        """`None`: the discrete Lagrangian (52) models every pair of coupled bodies."""
        return None

    def moser_veselov_body(self, state, dt) -> moser_veselov.MoserVeselovStep:
        """The body form's step (Dixon (52)–(60), Table 5, derived anew)."""
        return coupled_moser_veselov.body_step(self, state, dt)

    def moser_veselov_spatial(self, state, dt) -> moser_veselov.MoserVeselovStep:
        """The spatial form's step (Dixon (61)–(67), Table 6, derived anew)."""
        return coupled_moser_veselov.spatial_step(self, state, dt)

    @property
    @abc.abstractmethod
    def reduced_mass(self):
        """`ε = m₁m₂/(m₁ + m₂)`."""

    @abc.abstractmethod
    def augmented_inertia(self):
        """The inertias about the joint, `(2, 3, 3)`."""

    @abc.abstractmethod
    def angular_velocity(self, Lambda, Pi):
        """Both bodies' angular velocities."""


class AbstractCanonicalChain(AbstractStructure):
    """Rigid bodies along a body axis in unit quaternions (Chaurasia §3.3): state
    `(r, p, q, g)` with the body axis first among the event axes, a canonical Hamiltonian
    system whose field keeps `qᵀg` a quadratic first integral and couples each body to its
    neighbours only (the stage Jacobian is block-banded along the axis). Members:
    `vector_field(t, state)`; `state_layout(state)`, one row per body, `(N+2, w)`;
    `coupling_reach = 1` (row `n` of the field depends on rows `n − 1 … n + 1` only: two
    colours find the Jacobian's diagonal blocks, `linear_solvers.body_blocks`);
    `stage_linear_solver = StageJacobian()` (Newton's default on the stage equations: the
    per-body simplified Newton, cost linear in the number of bodies)."""

    title: ClassVar[str] = "a chain of bodies in quaternions"
    coupling_reach: ClassVar[int] = 1
    stage_linear_solver: ClassVar[AbstractLinearSolver] = StageJacobian()

    @abc.abstractmethod
    def vector_field(self, t, state):
        """`(ṙ, ṗ, q̇, ġ)` of every body."""

    @abc.abstractmethod
    def state_layout(self, state):
        """`(y (N+2, w), to_array, from_array)`: each body's coordinates in one row, and the
        maps from a state-shaped pytree to such an array and back."""


class AbstractAttitudeQuaternion(AbstractStructure):
    """An attitude and a Euclidean part (RKMK's form): a `NamedTuple` state with a field `q`,
    one body's unit quaternion `(w, x, y, z)` (body → space, event rank 1), with
    `q̇ = ½ q Ω♯`, and other fields `y` in vector spaces. Members:
    `angular_velocity(state) -> Ω (3,)`, the body angular velocity; `vector_field(t, state)`,
    whose every field but `q` is `ẏ`."""

    title: ClassVar[str] = "a system of an attitude quaternion and a Euclidean part"

    @abc.abstractmethod
    def angular_velocity(self, state):
        """The body angular velocity `Ω (3,)` at `state`."""

    @abc.abstractmethod
    def vector_field(self, t, state):
        """The state's time derivative (its `q` field is not read by RKMK)."""


class AbstractRollingBall(AbstractStructure):
    """A ball rolling without slipping on a horizontal plane, carrying point masses at body
    positions `χᵢ(t)` (Putkaradze & Rogers; `docs/rolling-ball-model.md`): reduced state
    `(q, Omega, x)`. Members: `radius`, `inertia` (about the centre), `gravity`,
    `external_force (3,)` at the centre, `weights()` (the masses), `mass_kinematics(t) -> (χ,
    χ̇, χ̈)`, `omega_dot(t, state)`."""

    title: ClassVar[str] = "a rolling ball"

    @abc.abstractmethod
    def weights(self):
        """The masses `mᵢ`, the ball's own first."""

    @abc.abstractmethod
    def mass_kinematics(self, t):
        """`(χ, χ̇, χ̈)` of the masses in the body frame at `t`."""

    @abc.abstractmethod
    def omega_dot(self, t, state):
        """`Ω̇` of the continuous equations (the implicit step's predictor)."""


class AbstractLagrangeDAlembert(AbstractStructure):
    """A Lagrange–d'Alembert system (Putkaradze & Rogers App. A, (A.32)–(A.33)): a Lagrangian
    quadratic in `Q̇` on flat coordinates `Q (n,)`, velocity constraints affine in `Q̇`,
    generalised forces. Members: `lagrange_dalembert_system()`, the engine
    (`models.nonholonomic.LagrangeDAlembertSystem`) of these equations; `coordinates(state)
    -> (Q, Q̇)` and `from_coordinates(Q, Qdot) -> state`, its inverse on the constraint."""

    title: ClassVar[str] = "a Lagrange–d'Alembert system"

    @abc.abstractmethod
    def lagrange_dalembert_system(self) -> Any:
        """The `LagrangeDAlembertSystem` of this model's equations."""

    @abc.abstractmethod
    def coordinates(self, state):
        """`(Q, Q̇)` of `state`."""

    @abc.abstractmethod
    def from_coordinates(self, Q, Qdot):
        """The state of `(Q, Q̇)` (exact on the constraint)."""


STRUCTURES: tuple[type[AbstractStructure], ...] = (
    AbstractLiePoissonBody,
    AbstractCanonicalSystem,
    AbstractConstrainedBodies,
    AbstractDirectorBody,
    AbstractCoupledBodies,
    AbstractCanonicalChain,
    AbstractAttitudeQuaternion,
    AbstractRollingBall,
    AbstractLagrangeDAlembert,
)
"""Every structure, in the order of the table above."""


def models_of(structure: type) -> list[str]:
    """The names of jaxrigid's own model classes of `structure` (its subclasses in `jaxrigid`
    not named `Abstract…`), sorted: the words of a refusal."""
    found: set[str] = set()
    todo: list[type] = [structure]
    while todo:
        subclasses: list[type] = todo.pop().__subclasses__()
        for sub in subclasses:
            todo.append(sub)
            if sub.__module__.startswith("jaxrigid.") and not sub.__name__.startswith("Abstract"):
                found.add(sub.__name__)
    return sorted(found)
