"""Trajectory optimisation of the rolling ball's internal masses (the model note
`docs/rolling-ball-model.md`, "Optimal control"): parametrised controls `θ(t)`
(prescribed masses) and actuations `u(t)` (dynamic masses, forces on the rails), composable
costs, an augmented-Lagrangian optimiser with `optax` and `jax.grad` through `simulate`, and
named problems (`mode="prescribed"` or `"dynamic"`); disturbed scenarios (`scenarios`),
receding-horizon control on them (`mpc`), and feedback policies trained through the
simulator (`policies`, `closed_loop`, `training`, `policy_io`; the `reach-region` family,
`region`), learnt from MPC (`imitation`), or computed from the re-plan's sensitivity
(`neighbouring`) and trained further per task on model-drawn scenarios (`tuning`); the least
effort any such law could spend on a plant known in advance (`hindsight`)."""

from . import hindsight as hindsight
from . import imitation as imitation
from . import mpc as mpc
from . import neighbouring as neighbouring
from . import tuning as tuning
from .closed_loop import PerTask as PerTask
from .closed_loop import Tasks as Tasks
from .closed_loop import closed_loop_rollout as closed_loop_rollout
from .closed_loop import linear_feedback as linear_feedback
from .closed_loop import loss_and_grad as loss_and_grad
from .costs import AbstractCost as AbstractCost
from .costs import CirclePath as CirclePath
from .costs import ContactLimits as ContactLimits
from .costs import DiscObstacles as DiscObstacles
from .costs import Effort as Effort
from .costs import FinalAttitude as FinalAttitude
from .costs import FinalPosition as FinalPosition
from .costs import FinalRest as FinalRest
from .costs import GeronoPath as GeronoPath
from .costs import RailBarrier as RailBarrier
from .costs import Tracking as Tracking
from .costs import Trajectory as Trajectory
from .costs import WeightedSum as WeightedSum
from .costs import rollout as rollout
from .hindsight import Hindsight as Hindsight
from .hindsight import Identified as Identified
from .hindsight import Informed as Informed
from .hindsight import hindsight_optima as hindsight_optima
from .hindsight import identifying_replanner as identifying_replanner
from .hindsight import informed_replanner as informed_replanner
from .neighbouring import neighbouring_feedback as neighbouring_feedback
from .optimise import AugmentedLagrangian as AugmentedLagrangian
from .optimise import MultiStartResult as MultiStartResult
from .optimise import OptimiseResult as OptimiseResult
from .optimise import multi_start as multi_start
from .optimise import optimise as optimise
from .parametrisations import AbstractParametrisedActuation as AbstractParametrisedActuation
from .parametrisations import AbstractParametrisedControl as AbstractParametrisedControl
from .parametrisations import BSplineActuation as BSplineActuation
from .parametrisations import BSplineControl as BSplineControl
from .parametrisations import FourierActuation as FourierActuation
from .parametrisations import FourierControl as FourierControl
from .policies import LinearFeedback as LinearFeedback
from .policies import MLPPolicy as MLPPolicy
from .policies import PlantInformedFeedback as PlantInformedFeedback
from .policies import QuadraticFeedback as QuadraticFeedback
from .policy_io import load_policy as load_policy
from .policy_io import save_policy as save_policy
from .presets import DEFAULT_STEP as DEFAULT_STEP
from .presets import MODES as MODES
from .presets import PROBLEMS as PROBLEMS
from .presets import ControlProblem as ControlProblem
from .presets import ParametrisedSlot as ParametrisedSlot
from .presets import default_settings as default_settings
from .presets import get_problem as get_problem
from .presets import initial_guesses as initial_guesses
from .presets import parametrised_slot as parametrised_slot
from .region import OpenLoopOptima as OpenLoopOptima
from .region import open_loop_optima as open_loop_optima
from .region import reach_region as reach_region
from .region import sample_tasks as sample_tasks
from .scenarios import Replay as Replay
from .scenarios import Scenarios as Scenarios
from .scenarios import draw_scenarios as draw_scenarios
from .scenarios import replay as replay
from .training import TrainSettings as TrainSettings
from .training import train_policy as train_policy
from .tuning import TuneSettings as TuneSettings
from .tuning import tune_feedback as tune_feedback
