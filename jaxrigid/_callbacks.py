"""A host callback that stays one call under `vmap`.

`jax.debug.callback`'s batching rule unrolls the callback into one call per mapped member
(jax 0.10–0.11, `debugging.debug_batching_rule`): a program that grows with the ensemble, so
that XLA's compile time and memory for `control.multi_start` grew with the number of starts
(measured in bench/README.md, `control_multistart_compile.py`). `host_callback` wraps the
callback in `jax.custom_batching.custom_vmap` whose rule calls it once with the mapped arguments
stacked: the program is the same for every number of members, and the host gets one call
with all members' values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_batching import custom_vmap

__all__ = ["host_callback"]


def host_callback(fn, *args) -> None:
    """`jax.debug.callback(fn, *args)`, one call also under `vmap`: mapped, `fn` receives
    every argument with one leading axis per `vmap` (outermost first), unmapped arguments
    broadcast to it. `fn` must accept those stacked values (e.g. `_checks.first_row`). The
    arguments carry no derivative (the callback only reports)."""
    args = tuple(lax.stop_gradient(jnp.asarray(a)) for a in args)

    @custom_vmap
    def report(*args):
        jax.debug.callback(fn, *args)
        return ()

    @report.def_vmap
    def _rule(axis_size, in_batched, *args):
        stacked = [
            a if batched else jnp.broadcast_to(a, (axis_size,) + a.shape)
            for a, batched in zip(args, in_batched)
        ]
        report(*stacked)
        return (), ()

    report(*args)
