"""Physical systems: parameters, state, energy, torques, invariants."""

from .coupled_bodies import CoupledBodies as CoupledBodies
from .coupled_bodies import CoupledBodiesState as CoupledBodiesState
from .director import DirectorRigidBody as DirectorRigidBody
from .director import DirectorState as DirectorState
from .rigid_body import AbstractPotential as AbstractPotential
from .rigid_body import AxialPowerPotential as AxialPowerPotential
from .rigid_body import HeavyTopPotential as HeavyTopPotential
from .rigid_body import RigidBody as RigidBody
from .rigid_body import RigidBodyState as RigidBodyState
from .symmetric_top import ConstrainedRigidBody as ConstrainedRigidBody
from .symmetric_top import ConstrainedRigidBodyState as ConstrainedRigidBodyState
