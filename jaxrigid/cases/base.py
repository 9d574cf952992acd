"""Named, documented presets of the papers' numerical examples (the CLI's cases).

Which methods apply to a case is asked of the methods (`integrates`), on a stand-in of each
form's model that the form states (`builds`): the model's type and the static facts that
decide `integrates` (sub-model types, absent parts), no arrays. So listing the methods builds
no model and compiles nothing; tests/test_cli.py checks every stand-in against the model its
form builds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._suggest import did_you_mean
from ..diagnostics import along

_MODELS: dict[int, tuple[Any, tuple]] = {}  # id(case) -> (case, models): cases are unhashable


def sketch(model_type: type, **facts) -> Any:
    """A stand-in for a model of `model_type` for `integrates` to be asked of: an instance
    made without its constructor (no arrays, no checks, nothing compiled) holding `facts`
    and the plain defaults of the other fields. A class given as a fact (or in a tuple) stands
    for an instance of it, itself a stand-in: `sketch(RigidBody, potential=HeavyTopPotential)`.
    A field neither given nor defaulted is absent: reading it raises `AttributeError`."""
    model: Any = object.__new__(model_type)
    fields = dataclasses.fields(model_type) if dataclasses.is_dataclass(model_type) else ()
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    for name, value in {**defaults, **facts}.items():
        object.__setattr__(model, name, _stand_in(value))
    return model


def _stand_in(value):
    if isinstance(value, type):
        return sketch(value)
    if isinstance(value, tuple):
        return tuple(_stand_in(v) for v in value)
    return value


def _integrates(integrator, model) -> bool:
    """`integrator.integrates(model)`, called through the class: reading a method off an
    equinox Module makes a new bound-method Module each time, which costs more than the call
    (the `methods` table asks a few thousand times)."""
    return bool(type(integrator).integrates(integrator, model))


def builds(model_type: type, **facts) -> Callable:
    """Decorator of a form (`params -> (model, state0)`): the stand-in of the model it builds,
    `sketch(model_type, **facts)`, kept as the form's `sketch` (`Case.sketches`). The facts
    are those `integrates` reads (e.g. the potential's type); tests/test_cli.py checks that
    every registered method answers alike for the stand-in and the built model."""

    def mark(form: Callable) -> Callable:
        # a function's own attributes are untyped
        form.sketch = sketch(model_type, **facts)  # type: ignore[attr-defined]
        return form

    return mark


@dataclasses.dataclass(frozen=True)
class Parameter:
    """A scalar parameter of a case, overridable with `--set name=value`. `sweepable`:
    whether a sweep may vary it member by member (`False` for a structural parameter, one the
    build or the reports use as a Python value, e.g. a count or a switch of the outputs)."""

    default: float
    doc: str
    sweepable: bool = True


@dataclasses.dataclass(frozen=True)
class Case:
    """A paper's example: how to build `(model, state0)` from its parameters, its defaults,
    the family its default method is listed under (`jaxrigid methods`), how to perturb it into
    an ensemble, and its observables. Which methods apply is asked of the methods
    (`accepts`: `integrates` on the stand-ins of the case's models, `sketches`)."""

    name: str
    title: str
    reference: str
    description: str
    family: str
    default_method: str
    default_dt: float
    default_t_end: float
    parameters: dict[str, Parameter]
    build: Callable[[dict[str, float]], tuple[Any, Any]]
    perturb: Callable[[Any, np.random.Generator, float, int], Any]  # (state, rng, spread, n)
    # `(model, ts, states, params, values) -> {name: per member}` over a saved path; `values`
    # are `pointwise`'s at every saved state (`{}` without it)
    observables: Callable[[Any, Any, Any, dict[str, float], dict], dict[str, Any]] = (
        lambda model, ts, states, params, values: {}
    )
    # `(model, params) -> fn(t, state) -> {name: array}`: what `observables` needs at every
    # saved state; the command evaluates it in the one program of the invariants (`observe`)
    pointwise: Callable[[Any, dict[str, float]], Callable[[Any, Any], dict]] | None = None
    ensemble_spread: float = 1e-2
    torque_free: bool = False  # descriptive: the body feels no torque
    # the parameters are in SI units (t in s, energies in J); False: the paper's are
    # dimensionless. Only the plots' labels read it
    si_units: bool = False
    # an `AbstractObserver` built from the parameters, run every step inside the scan (and
    # continued across the CLI's chunks); its final carry goes to `observation_observables`
    observer: Callable[[dict[str, float]], Any] | None = None
    observation_observables: Callable[[Any, dict[str, float]], dict[str, Any]] = (
        lambda observations, params: {}
    )
    # further forms of the same example, `params -> (model, state0)` like `build` but another
    # model type integrated by other methods (the chain of bodies in rotation matrices, for
    # `rattle`, next to its quaternion `build`, for `gauss6`); `build_for` picks the form
    other_forms: tuple[Callable[[dict[str, float]], tuple[Any, Any]], ...] = ()

    def observe(self, model, ts, states, params, values: dict | None = None) -> dict[str, Any]:
        """The observables over a saved path (leaves `(*ensemble, n_save, ...)`); `values`:
        `pointwise` already evaluated there (`diagnostics.along`), else evaluated here."""
        if values is None:
            fn = None if self.pointwise is None else self.pointwise(model, params)
            run = jax.jit(lambda ts, states: along(fn, model, ts, states))
            values = {} if fn is None else jax.tree_util.tree_map(np.asarray, run(ts, states))
        return self.observables(model, ts, states, params, values)

    def forms(self) -> tuple[Callable, ...]:
        """`(build, *other_forms)`."""
        return (self.build, *self.other_forms)

    def models(self) -> tuple:
        """The model of each form from the default parameters, built once per case (building
        checks values eagerly, which compiles small programs)."""
        if id(self) not in _MODELS:  # the entry keeps the case alive, so its id stays its own
            params = self.resolve()
            _MODELS[id(self)] = (self, tuple(form(params)[0] for form in self.forms()))
        return _MODELS[id(self)][1]

    def model(self):
        """The model of `build` (the first form) from the default parameters."""
        return self.models()[0]

    def sketches(self) -> tuple:
        """A stand-in of each form's model: the form's `sketch` (`builds`), else (a form that
        states none) the model built from the default parameters (`models`). Which methods
        apply depends on the models' types and static facts, which the parameters do not
        change."""
        stated = [getattr(form, "sketch", None) for form in self.forms()]
        if all(s is not None for s in stated):
            return tuple(stated)
        return tuple(s if s is not None else m for s, m in zip(stated, self.models()))

    def accepts(self, integrator, structures: tuple[type, ...] | None = None) -> bool:
        """Whether `integrator` applies to this case: whether it integrates one of the case's
        models (`integrator.integrates` on their stand-ins, `sketches`); with `structures`,
        one of those models that has one of them (a family's: `jaxrigid methods`)."""
        return any(
            _integrates(integrator, m) and (structures is None or isinstance(m, structures))
            for m in self.sketches()
        )

    def build_for(self, integrator) -> Callable[[dict[str, float]], tuple[Any, Any]]:
        """The form `integrator` integrates (`build` when it integrates none: its own
        checks then say why)."""
        for form, model in zip(self.forms(), self.sketches()):
            if _integrates(integrator, model):
                return form
        return self.build

    def methods(self) -> list[str]:
        """The canonical names of the registered methods that apply to this case, in registry
        order (those that integrate one of the forms' models)."""
        from ..integrators import REGISTRY

        names: list[str] = []
        for cls in REGISTRY:
            if cls.name not in names and self.accepts(cls()):
                names.append(cls.name)
        return names

    def resolve(self, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
        """Defaults updated with `overrides`; unknown names raise `ValueError`."""
        params = {k: float(p.default) for k, p in self.parameters.items()}
        for key, value in (overrides or {}).items():
            if key not in params:
                valid = ", ".join(self.parameters)
                raise ValueError(
                    f"case {self.name} has no parameter {key!r}; valid: {valid}"
                    + did_you_mean(key, self.parameters)
                )
            params[key] = float(value)
        return params


@dataclasses.dataclass(frozen=True)
class ModelPerturbedCase(Case):
    """A case whose ensemble perturbation needs the model (Suslov's `ξ`):
    `perturb_with_model(model, state0, rng, spread, n)`, which `jaxrigid run` prefers to
    `perturb` when given."""

    perturb_with_model: Callable | None = None


# --- ensembles: what a case's `perturb` is made of ----------------------------------------------


def vector_parameters(prefix: str, doc: str, values) -> dict[str, Parameter]:
    """One vector of a case, declared whole: the scalar parameters `prefix1 … prefixN` (`doc`,
    component `i`), default `values`. The command sets and sweeps a vector by its components
    (`--set Omega3=50`, a sweep axis over `Omega1`), so they stay scalar parameters;
    `vector(p, prefix)` assembles them."""
    return {
        f"{prefix}{i + 1}": Parameter(float(x), f"{doc}, component {i + 1}")
        for i, x in enumerate(values)
    }


def inertia_parameters(
    d1: float, d2: float, d3: float, doc: str = "body inertia"
) -> dict[str, Parameter]:
    """A symmetric inertia as the six parameters `I11 … I23`, diagonal `(d1, d2, d3)`."""
    diagonal = {
        f"I{i}{i}": Parameter(d, f"{doc}, entry {i}{i}") for i, d in ((1, d1), (2, d2), (3, d3))
    }
    off = {
        f"I{i}{j}": Parameter(0.0, f"{doc}, entry {i}{j} (= {j}{i})")
        for i, j in ((1, 2), (1, 3), (2, 3))
    }
    return {**diagonal, **off}


def inertia_matrix(p, dtype=None) -> jax.Array:
    """The symmetric `(3, 3)` inertia of the entries `I11`, `I22`, `I33`, `I12`, `I13`, `I23`,
    in the parameters' dtype unless `dtype` is given."""
    rows = [["I11", "I12", "I13"], ["I12", "I22", "I23"], ["I13", "I23", "I33"]]
    return jnp.array([[p[k] for k in row] for row in rows], dtype=dtype)


def vector(p, prefix: str, dtype=None) -> jax.Array:
    """The `(3,)` vector `(p[prefix1], p[prefix2], p[prefix3])` of `vector_parameters`, in the
    parameters' dtype unless `dtype` is given."""
    return jnp.array([p[f"{prefix}{i}"] for i in (1, 2, 3)], dtype=dtype)


def member_noise(rng: np.random.Generator, n: int, *shape: int) -> np.ndarray:
    """`(n, *shape)` draws of `N(0, 1)` (numpy), member 0's zero: member 0 of an ensemble is
    the case itself. Every case's `perturb` draws its members so."""
    noise = rng.standard_normal((n, *shape))
    noise[0] = 0.0
    return noise


def ensemble_noise(rng: np.random.Generator, n: int, *shape: int) -> jax.Array:
    """`member_noise` as a jax array (in the default float dtype)."""
    return jnp.asarray(member_noise(rng, n, *shape))


def ensemble_members(state, n: int, **replaced):
    """`n` copies of `state` (leaves broadcast to a leading axis), with `replaced` fields."""
    copies = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + jnp.shape(x)), state)
    return copies._replace(**replaced)
