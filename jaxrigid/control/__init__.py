"""Trajectory optimisation of the rolling ball's internal masses (issue 14; the model note
`shared/models/rolling-ball.md`, "Optimal control"): parametrised controls, composable costs,
an augmented-Lagrangian optimiser with `optax` and `jax.grad` through `simulate`, and named
problems."""

from .parametrisations import AbstractParametrisedControl as AbstractParametrisedControl
from .parametrisations import BSplineControl as BSplineControl
from .parametrisations import FourierControl as FourierControl
