"""jaxrigid: structure-preserving integrators for rigid-body dynamics in JAX."""

from . import compensated as compensated
from . import diagnostics as diagnostics
from . import integrators as integrators
from . import lie as lie
from . import linear_solvers as linear_solvers
from . import models as models
from . import results as results
from ._checks import InvalidValueError as InvalidValueError
from .compilation_cache import enable_compilation_cache as enable_compilation_cache
from .integrators import AKW as AKW
from .integrators import BBTRAP as BBTRAP
from .integrators import BBTRAPWD as BBTRAPWD
from .integrators import IMID as IMID
from .integrators import IMIDM as IMIDM
from .integrators import MKRK as MKRK
from .integrators import MKRKRK4 as MKRKRK4
from .integrators import RATTLE as RATTLE
from .integrators import RK4 as RK4
from .integrators import RKMK2 as RKMK2
from .integrators import RKMK4 as RKMK4
from .integrators import RKMK8 as RKMK8
from .integrators import SWC1 as SWC1
from .integrators import TRAP as TRAP
from .integrators import TRAPM as TRAPM
from .integrators import BackwardEuler as BackwardEuler
from .integrators import BackwardEulerMomentum as BackwardEulerMomentum
from .integrators import DMV4Body as DMV4Body
from .integrators import DMV4Spatial as DMV4Spatial
from .integrators import DMV6Body as DMV6Body
from .integrators import DMV6Spatial as DMV6Spatial
from .integrators import DMV8Body as DMV8Body
from .integrators import DMV8Spatial as DMV8Spatial
from .integrators import DMV10Body as DMV10Body
from .integrators import DMV10Spatial as DMV10Spatial
from .integrators import DMVBody as DMVBody
from .integrators import DMVSpatial as DMVSpatial
from .integrators import EnergyMomentumAVF as EnergyMomentumAVF
from .integrators import Euler as Euler
from .integrators import ForwardEuler as ForwardEuler
from .integrators import ForwardEulerMomentum as ForwardEulerMomentum
from .integrators import Gauss2 as Gauss2
from .integrators import Gauss4 as Gauss4
from .integrators import Gauss6 as Gauss6
from .integrators import ImplicitEuler as ImplicitEuler
from .integrators import ImplicitMidpoint as ImplicitMidpoint
from .integrators import LiePoissonSplitting as LiePoissonSplitting
from .integrators import MidpointDLA as MidpointDLA
from .integrators import MKRKGauss4 as MKRKGauss4
from .integrators import MKRKGauss6 as MKRKGauss6
from .integrators import MKRKMidpoint as MKRKMidpoint
from .integrators import MKRKRK4Truncated as MKRKRK4Truncated
from .integrators import NonholonomicDLA as NonholonomicDLA
from .integrators import RadauIIA5 as RadauIIA5
from .integrators import StormerVerlet as StormerVerlet
from .integrators import SunGeng5 as SunGeng5
from .integrators import SymplecticEulerA as SymplecticEulerA
from .integrators import SymplecticEulerB as SymplecticEulerB
from .integrators import compose as compose
from .integrators import get_method as get_method
from .integrators import methods_for as methods_for
from .linear_solvers import AbstractLinearSolver as AbstractLinearSolver
from .linear_solvers import BlockDiagonal as BlockDiagonal
from .linear_solvers import DenseLU as DenseLU
from .linear_solvers import Krylov as Krylov
from .linear_solvers import StageJacobian as StageJacobian
from .models import AbstractModel as AbstractModel
from .models import DirectorRigidBody as DirectorRigidBody
from .models import DirectorState as DirectorState
from .models import LagrangeDAlembertState as LagrangeDAlembertState
from .models import LagrangeDAlembertSystem as LagrangeDAlembertSystem
from .models import RigidBody as RigidBody
from .models import RigidBodyState as RigidBodyState
from .models import RollingBall as RollingBall
from .models import RollingBallState as RollingBallState
from .models import RollingBallUnreduced as RollingBallUnreduced
from .models import RollingBallUnreducedState as RollingBallUnreducedState
from .models import RollingDisk as RollingDisk
from .models import RollingDiskState as RollingDiskState
from .models import Suslov as Suslov
from .models import SuslovState as SuslovState
from .newton import Newton as Newton
from .newton import NewtonInfo as NewtonInfo
from .observers import AbstractObserver as AbstractObserver
from .results import RESULTS as RESULTS
from .simulation import IncompatibleModelError as IncompatibleModelError
from .simulation import Outcome as Outcome
from .simulation import Solution as Solution
from .simulation import StepFailedError as StepFailedError
from .simulation import simulate as simulate
from .xla_options import quick_build as quick_build
from .xla_options import quick_build_options as quick_build_options

__all__ = [
    "compensated",
    "diagnostics",
    "integrators",
    "lie",
    "linear_solvers",
    "models",
    "results",
    "InvalidValueError",
    "enable_compilation_cache",
    "quick_build",
    "quick_build_options",
    "AKW",
    "BBTRAP",
    "BBTRAPWD",
    "IMID",
    "IMIDM",
    "MKRK",
    "MKRKRK4",
    "RATTLE",
    "RK4",
    "RKMK2",
    "RKMK4",
    "RKMK8",
    "SWC1",
    "TRAP",
    "TRAPM",
    "BackwardEuler",
    "BackwardEulerMomentum",
    "DMV4Body",
    "DMV4Spatial",
    "DMV6Body",
    "DMV6Spatial",
    "DMV8Body",
    "DMV8Spatial",
    "DMV10Body",
    "DMV10Spatial",
    "DMVBody",
    "DMVSpatial",
    "EnergyMomentumAVF",
    "Euler",
    "ForwardEuler",
    "ForwardEulerMomentum",
    "Gauss2",
    "Gauss4",
    "Gauss6",
    "ImplicitEuler",
    "ImplicitMidpoint",
    "LiePoissonSplitting",
    "MidpointDLA",
    "MKRKGauss4",
    "MKRKGauss6",
    "MKRKMidpoint",
    "MKRKRK4Truncated",
    "NonholonomicDLA",
    "RadauIIA5",
    "StormerVerlet",
    "SunGeng5",
    "SymplecticEulerA",
    "SymplecticEulerB",
    "compose",
    "get_method",
    "methods_for",
    "AbstractLinearSolver",
    "BlockDiagonal",
    "DenseLU",
    "Krylov",
    "StageJacobian",
    "AbstractModel",
    "DirectorRigidBody",
    "DirectorState",
    "RigidBody",
    "RigidBodyState",
    "RollingBall",
    "RollingBallState",
    "RollingBallUnreduced",
    "RollingBallUnreducedState",
    "RollingDisk",
    "RollingDiskState",
    "Suslov",
    "SuslovState",
    "Newton",
    "NewtonInfo",
    "LagrangeDAlembertState",
    "LagrangeDAlembertSystem",
    "AbstractObserver",
    "RESULTS",
    "IncompatibleModelError",
    "Outcome",
    "Solution",
    "StepFailedError",
    "simulate",
]
"""The public names: the modules, the models, the integrators (every registered method, by
its class name: `get_method` finds them by their canonical names), `simulate` and its
results."""

__version__ = "0.1.0"  # the one place it is written: pyproject reads it at build time
