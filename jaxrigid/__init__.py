"""jaxrigid: structure-preserving integrators for rigid-body dynamics in JAX."""

from . import compensated as compensated
from . import controls as controls
from . import diagnostics as diagnostics
from . import integrators as integrators
from . import lie as lie
from . import linear_solvers as linear_solvers
from . import models as models
from . import rails as rails
from . import results as results
from ._checks import InvalidValueError as InvalidValueError
from .compensated import Compensated as Compensated
from .compensated import compensate as compensate
from .integrators import AKW as AKW
from .integrators import BBTRAP as BBTRAP
from .integrators import BBTRAPWD as BBTRAPWD
from .integrators import IMID as IMID
from .integrators import IMIDM as IMIDM
from .integrators import MKRK as MKRK
from .integrators import RATTLE as RATTLE
from .integrators import SWC1 as SWC1
from .integrators import TRAP as TRAP
from .integrators import TRAPM as TRAPM
from .integrators import EnergyMomentumAVF as EnergyMomentumAVF
from .linear_solvers import AbstractLinearSolver as AbstractLinearSolver
from .linear_solvers import BlockDiagonal as BlockDiagonal
from .linear_solvers import DenseLU as DenseLU
from .linear_solvers import Krylov as Krylov
from .models import AbstractModel as AbstractModel
from .models import DirectorRigidBody as DirectorRigidBody
from .models import DirectorState as DirectorState
from .models import RigidBody as RigidBody
from .models import RigidBodyState as RigidBodyState
from .models import RollingBall as RollingBall
from .models import RollingBallState as RollingBallState
from .newton import Newton as Newton
from .newton import NewtonInfo as NewtonInfo
from .observers import AbstractObserver as AbstractObserver
from .results import RESULTS as RESULTS
from .simulation import IncompatibleModelError as IncompatibleModelError
from .simulation import NewtonConvergenceError as NewtonConvergenceError
from .simulation import Outcome as Outcome
from .simulation import Solution as Solution
from .simulation import StepFailedError as StepFailedError
from .simulation import simulate as simulate

__version__ = "0.1.0"
