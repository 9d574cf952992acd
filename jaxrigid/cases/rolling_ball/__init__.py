"""The rolling ball actuated by internal point masses (Putkaradze & Rogers
2018), its planar limit (the rolling disk, App. C) and Suslov's problem (App. A.2):
seven cases, family `"rolling_ball"`, default method `RKMK4` (`integrators.rkmk`), h = 0.01.
The ball's five are in `ball`, the disk's in `disk`, Suslov's in `suslov`; what they share
(parameters, the ball built from them, observables) in `common`.

The paper survives only as a preview (abstract, references, appendices): its numerical sections
and their data are missing, so apart from `rolling-ball-two-circles` (the contract case,
`jaxrigid.models.rolling_ball.two_circles_ball`) the defaults are jaxrigid's own choices,
documented with each case. The ball cases share the two-circles shell: `r = 1`, `m₀ = 1`,
`𝕀 = diag(0.4, 0.45, 0.5)` about the shell's centre of mass, `χ₀ = (0, 0, −0.1)`, `g = 9.81`;
each starts with `Λ = 1` and the contact point at the origin.

**Reports.** Every case reports the total energy `energy` (kinetic plus potential): an
invariant of the passive ball and of Suslov's body; elsewhere the actuators work on the ball,
so it is an observable (its range), with the work `actuator_work` they do
(`RollingBall.conserved_quantities`, `jaxrigid run`). The ball cases' `final_state` is
`(q, Omega, x)`: `q` the attitude quaternion (w, x, y, z), body → space, `Omega` the body
angular velocity, `x` the geometric centre (three components, `x₃ = r`; `x₁, x₂` the contact
point's); the passive ball's also has the rail coordinates `theta` and rates `theta_dot`.
Their observables: `min_normal_force` (`N = e₃·F_contact`, the minimum over the saved
trajectory; rolling needs `N > 0`) and `max_friction_needed` (the maximum of `|F_t|/N`, the
friction coefficient rolling without slipping needs; `null` in the JSON where `N ≤ 0`), one
per ensemble member. `rolling-disk` and `suslov` report otherwise (their modules' docstrings).
"""

from __future__ import annotations

from ...models.rolling_ball.controls import LinearControl as LinearControl
from ..base import ModelPerturbedCase as ModelPerturbedCase
from . import ball, disk, suslov
from .ball import perturb_omega as perturb_omega
from .ball import unreduced_observables as unreduced_observables
from .common import DT as DT
from .common import FAMILY as FAMILY
from .common import METHOD as METHOD
from .common import ball_observables as ball_observables
from .common import ball_pointwise as ball_pointwise
from .disk import disk_observables as disk_observables
from .disk import perturb_roll_rate as perturb_roll_rate
from .suslov import perturb_suslov as perturb_suslov
from .suslov import perturb_suslov_scale as perturb_suslov_scale
from .suslov import suslov_observables as suslov_observables

__all__ = ["CASES", "LinearControl", "ModelPerturbedCase"]

CASES = ball.CASES + disk.CASES + suslov.CASES
