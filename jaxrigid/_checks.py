"""Value checks at the API boundary (DESIGN.md §4b).

Concrete inputs are checked on the host with numpy, so the error names the offending
ensemble member and value; traced inputs (a caller's own `jit`) go through
`equinox.error_if`, which works under `jit` and names the failing batch index under `vmap`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

try:
    from jax.core import Tracer as _Tracer
except ImportError:  # pragma: no cover - jax versions that moved it
    from jax._src.core import Tracer as _Tracer


def is_concrete(*xs) -> bool:
    return not any(isinstance(x, _Tracer) for x in jax.tree_util.tree_leaves(xs))


def require(x, bad, message: str):
    """Raise `ValueError(message + member)` where `bad` (one flag per ensemble member) is set.

    `bad` has the ensemble shape (or is a scalar). Returns `x` (which must be used, so that the
    traced check is not removed as dead code).
    """
    if is_concrete(x, bad):
        bad = np.asarray(bad)
        if bad.any():
            where = ""
            if bad.ndim:
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                where = f" (ensemble member {idx[0] if len(idx) == 1 else idx}"
                where += f"; {int(bad.sum())} of {bad.size} members fail)"
            raise ValueError(message + where)
        return x
    return eqx.error_if(x, bad, message)
