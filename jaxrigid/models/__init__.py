"""Physical systems: parameters, state, energy, torques, invariants."""

from .rigid_body import AbstractPotential as AbstractPotential
from .rigid_body import AxialPowerPotential as AxialPowerPotential
from .rigid_body import HeavyTopPotential as HeavyTopPotential
from .rigid_body import RigidBody as RigidBody
from .rigid_body import RigidBodyState as RigidBodyState
