"""What the `jaxrigid control` commands share: the problem's name, the methods that integrate
its ball, the optimiser's settings for `--iterations`, and the runs of an optimum saved at
every step (its own method's, and the re-simulation with another at `dt / REFINE`), whose
programs `Prebuild` builds beside the optimiser."""

from __future__ import annotations

import contextvars
import math
import threading

from .._suggest import did_you_mean
from ..xla_options import quick_build
from .errors import UsageError

__all__ = [
    "IMPLICIT",
    "REFINE",
    "dense",
    "method",
    "methods",
    "Prebuild",
    "problem_name",
    "resimulation_method",
    "settings",
]

REFINE = 4  # the re-simulation's step is dt / REFINE


def problem_name(name: str) -> str:
    """The control problem's canonical name; `UsageError` naming the valid ones."""
    from ..control.presets import PROBLEMS

    for key in PROBLEMS:
        if key == name.lower():
            return key
    raise UsageError(
        f"unknown control problem {name!r}; valid problems: {', '.join(PROBLEMS)}"
        + did_you_mean(name, PROBLEMS)
    )


def methods(model) -> dict[str, type]:
    """The registered methods that integrate `model`, by canonical name."""
    from ..integrators import REGISTRY

    found: dict[str, type] = {}
    for cls in REGISTRY:
        if cls.name not in found and cls().integrates(model):
            found[cls.name] = cls
    return found


def method(name: str | None, model):
    """`(canonical name, integrator)` of the registered method `name` (default RKMK4) that
    integrates `model`; `UsageError` naming the valid ones otherwise."""
    found = methods(model)
    name = name or "RKMK4"
    for key, cls in found.items():
        if key.lower() == name.lower():
            return key, cls()
    raise UsageError(
        f"unknown method {name!r} for the rolling ball ({type(model).__name__}); valid "
        f"methods: {', '.join(found)}{did_you_mean(name, found)}"
    )


IMPLICIT = ("DLA", "DLA-midpoint")  # the Lagrange–d'Alembert methods (reduced, unreduced)


def resimulation_method(name: str, model):
    """A different integrator for the re-simulation than the method `name`: the implicit
    Lagrange–d'Alembert method that integrates `model` for the explicit RKMK methods, RKMK4
    for those."""
    if name in IMPLICIT:
        return method("RKMK4", model)
    return method(next(m for m in IMPLICIT if m in methods(model)), model)


def settings(name: str, iterations: int | None, mode: str = "prescribed"):
    """The problem's optimiser settings with `--iterations` L-BFGS iterations in all."""
    from ..control.optimise import AugmentedLagrangian
    from ..control.presets import default_settings

    base = default_settings(name, mode)
    if iterations is None:
        return base
    if iterations < 1:
        raise UsageError(f"--iterations must be a positive integer, got {iterations}")
    n_inner = min(base.n_inner, iterations)
    n_outer = math.ceil(iterations / n_inner)
    return AugmentedLagrangian(
        n_outer=n_outer,
        n_inner=n_inner,
        rho0=base.rho0,
        growth=base.growth,
        rho_max=base.rho_max,
        decrease=base.decrease,
        gtol=base.gtol,
    )


def dense(problem, p, integrator=None, refine: int = 1):
    """The trajectory saved at every step of `dt/refine`."""
    from ..control.costs import rollout

    integrator = problem.integrator if integrator is None else integrator
    return rollout(
        integrator,
        problem.with_coefficients(p),
        problem.state0,
        problem.dt / refine,
        problem.n_steps * refine,
        save_every=1,
    )


class Prebuild:
    """The programs of `dense`'s `runs` (`(integrator, refine)` pairs), built in a thread by
    running them once on the initial coefficients `p0` (same shapes and settings as the
    optimum's: the same programs) while the optimiser runs. `start()` (idempotent) starts the
    thread; `join()` starts it if it has not started and waits for it. The thread runs in a
    copy of the caller's context (its `stored_programs` and `quick_build`); a failure there
    is left for the later call to meet and report.

    The command starts it once the optimiser's program is built (its first progress
    report), not before: tracing holds Python's lock, so a thread tracing beside the
    optimiser's trace only delays it, while XLA compiles and runs outside the lock and the
    thread's work overlaps them on two or more cores (bench/README.md,
    "`jaxrigid control`: when the optimum's runs are built")."""

    def __init__(self, problem, p0, runs):
        def build():
            try:
                with quick_build():
                    for integrator, refine in runs:
                        dense(problem, p0, integrator, refine)
            except Exception:  # noqa: BLE001 - the same call on the optimum raises it again
                pass

        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(build,), daemon=True)
        self._lock = threading.Lock()
        self._started = False

    def start(self) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                self._thread.start()

    def join(self) -> None:
        self.start()
        self._thread.join()
