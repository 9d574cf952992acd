"""The rolling ball actuated by internal point masses (Putkaradze & Rogers 2018; the model note
`docs/rolling-ball-model.md`), all in one place: the reduced ball on prescribed rail motions,
(B.8), and its state (`model`), its shape and value checks (`checks`), the two-circles contract
ball (`two_circles`); the unreduced Lagrange–d'Alembert ball, whose masses may be dynamic
(`unreduced`); the rails the masses move on (`rails`) and their prescribed motions
(`controls`)."""

from .checks import check_model_shapes as check_model_shapes
from .checks import check_rolling_ball_state as check_rolling_ball_state
from .model import RollingBall as RollingBall
from .model import RollingBallState as RollingBallState
from .model import rolling_ball_state as rolling_ball_state
from .model import vertical as vertical
from .two_circles import TWO_CIRCLES_T_END as TWO_CIRCLES_T_END
from .two_circles import two_circles_ball as two_circles_ball

__all__ = [
    "RollingBall",
    "RollingBallState",
    "TWO_CIRCLES_T_END",
    "check_rolling_ball_state",
    "rolling_ball_state",
    "two_circles_ball",
    "vertical",
]
