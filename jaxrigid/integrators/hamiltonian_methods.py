"""The integrators for canonical Hamiltonian systems (family `"hamiltonian"`), by the names
of Chaurasia (2012) ch. 2: name → class (a zero-argument factory), like `RIGID_BODY_METHODS`."""

from __future__ import annotations

from .classical import CLASSICAL_METHODS
from .partitioned import PARTITIONED_METHODS

HAMILTONIAN_METHODS = {**CLASSICAL_METHODS, **PARTITIONED_METHODS}
