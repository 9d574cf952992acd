"""Physical systems: parameters, state, energy, torques, invariants, checks."""

from .base import AbstractModel as AbstractModel
from .constrained_rigid_body import ConstrainedRigidBody as ConstrainedRigidBody
from .constrained_rigid_body import ConstrainedRigidBodyState as ConstrainedRigidBodyState
from .coupled_bodies import CoupledBodies as CoupledBodies
from .coupled_bodies import CoupledBodiesState as CoupledBodiesState
from .director import DirectorRigidBody as DirectorRigidBody
from .director import DirectorState as DirectorState
from .rigid_body import AbstractPotential as AbstractPotential
from .rigid_body import AxialPowerPotential as AxialPowerPotential
from .rigid_body import HeavyTopPotential as HeavyTopPotential
from .rigid_body import RigidBody as RigidBody
from .rigid_body import RigidBodyState as RigidBodyState
from .rolling_ball import RollingBall as RollingBall
from .rolling_ball import RollingBallState as RollingBallState
from .rolling_ball import two_circles_ball as two_circles_ball
from .rolling_ball_unreduced import RollingBallUnreduced as RollingBallUnreduced
from .rolling_ball_unreduced import RollingBallUnreducedState as RollingBallUnreducedState
from .rolling_disk import RollingDisk as RollingDisk
from .rolling_disk import RollingDiskState as RollingDiskState
from .suslov import Suslov as Suslov
from .suslov import SuslovState as SuslovState
