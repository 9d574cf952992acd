"""A sweep's description: a named case, the method and step, fixed parameter values, the axes,
and what to keep per member. Written to the store with the results, so a sweep is
reproducible from its output alone (`Sweep.describe`, `Sweep.from_dict`).

A spec file (TOML) is the same description:

    case = "krysl-torque-free"
    method = "IMIDM"            # default: the case's
    dt = 0.01                   # default: the case's
    t_end = 20.0                # default: the case's; or n_steps = 2000
    dtype = "float64"
    chunk_size = 65536          # at most; default: chosen from the measured footprint

    [set]                       # fixed parameters (default: the case's)
    I12 = 0.0

    [[axes]]
    kind = "grid"
    parameter = "Omega1"
    start = -1.0
    stop = 1.0
    num = 1000

    [keep]
    final_state = true          # the state at t_end
    invariants = true           # |I(t) − I(0)| at t_end and its maximum over every step
    outcome = true              # the first failed step's cause (jaxrigid.results.RESULTS)
    stride = 0                  # the state every `stride` steps (0: no trajectory)
    lyapunov = "Pi"             # finite-time Lyapunov exponent from a tangent in Pi ("": none)

    [keep.reductions]           # over every step: min, max, mean (time average), first_zero
    "Pi[1]" = ["first_zero", "min"]
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path

from .._checks import is_integer, real_number
from .._suggest import did_you_mean
from .axes import AbstractAxis, axis_of

__all__ = ["Keep", "Sweep", "load_spec"]

_DTYPES = ("float64", "float32")


@dataclasses.dataclass(frozen=True)
class Keep:
    """What is stored per member: `final_state`, `invariants` (drift at the end and its
    maximum over every step, by an observer inside the scan), `outcome` (cause code and the
    first failed step), `reductions` (`{observable: [reduction, ...]}`, over every step by
    `observers.Reductions`: min, max, mean, first_zero of an invariant or a state component
    such as `"Pi[1]"`), `stride` (the state every `stride` steps, from t = 0; 0: none), and
    `lyapunov` (a state field such as `"Pi"`, `"p"`: the finite-time Lyapunov exponent
    (1/T) log |δ(T)| of the tangent δ started as a unit vector in that field, by `jax.jvp`
    through the whole run — a chaos indicator; the field must be a vector space coordinate
    (momenta, not a rotation matrix); finite while λT < log(float max) ≈ 709 in float64)."""

    final_state: bool = True
    invariants: bool = True
    outcome: bool = True
    reductions: Mapping = dataclasses.field(default_factory=dict)
    stride: int = 0
    lyapunov: str = ""

    def __post_init__(self):
        from ..observers import REDUCTIONS

        pairs = []
        for name, which in dict(self.reductions).items():
            which = (which,) if isinstance(which, str) else tuple(which)
            unknown = sorted(set(which) - set(REDUCTIONS))
            if not which or unknown:
                raise ValueError(
                    f"sweep spec: [keep.reductions] {name!r}: give reductions among "
                    f"{list(REDUCTIONS)}" + (f" (unknown: {unknown})" if unknown else "")
                )
            pairs.append((str(name), which))
        # a tuple of pairs: hashable (a compiled program's key) and in the spec's order
        object.__setattr__(self, "reductions", tuple(pairs))
        if not isinstance(self.lyapunov, str):
            raise ValueError(
                f"sweep spec: [keep] lyapunov must be a state field's name, got {self.lyapunov!r}"
            )
        if not (isinstance(self.stride, int) and self.stride >= 0):
            raise ValueError(
                f"sweep spec: [keep] stride must be an integer ≥ 0, got {self.stride!r}"
            )

    def describe(self) -> dict:
        out = dataclasses.asdict(self)
        out["reductions"] = {name: list(which) for name, which in self.reductions}
        return out


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A case swept over `axes` (their Cartesian product, row-major). `set`: fixed parameter
    values; `method`, `dt`, `t_end`: default the case's; `n_steps`: instead of `t_end`, and
    needed when an axis sweeps the step `dt` itself (every member then runs `n_steps` steps
    of its own `dt`); `chunk_size`: at most this many members per chunk (default:
    chosen from a measured per-member footprint; either way the chunks are made equal, so
    the last is not mostly padding, and a multiple of the devices: `jaxrigid.sweep.run`)."""

    case: str
    axes: tuple[AbstractAxis, ...]
    method: str | None = None
    dt: float | None = None
    t_end: float | None = None
    set: Mapping = dataclasses.field(default_factory=dict)
    keep: Keep = Keep()
    dtype: str = "float64"
    chunk_size: int | None = None
    n_steps: int | None = None

    def __post_init__(self):
        for name in ("case", "method"):  # names: a number is not one (case = 3 was a crash)
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a name (a string), got {value!r}")
        object.__setattr__(self, "axes", tuple(self.axes))
        fixed = {str(k): real_number(f"set.{k}", v) for k, v in dict(self.set).items()}
        object.__setattr__(self, "set", fixed)
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if self.chunk_size is not None and not (
            is_integer(self.chunk_size) and self.chunk_size >= 1
        ):
            raise ValueError(f"chunk_size must be a positive integer, got {self.chunk_size!r}")
        if self.n_steps is not None and not (is_integer(self.n_steps) and self.n_steps >= 1):
            raise ValueError(f"n_steps must be a positive integer, got {self.n_steps!r}")
        if self.n_steps is not None and self.t_end is not None:
            raise ValueError("give t_end or n_steps, not both")
        for name in ("dt", "t_end"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(real_number(name, v)) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.axes)

    @property
    def n_members(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> dict:
        """A plain dict (JSON/TOML-able) from which `from_dict` rebuilds the sweep."""
        out = dict(case=self.case, axes=[a.describe() for a in self.axes], set=dict(self.set),
                   keep=self.keep.describe(), dtype=self.dtype)  # fmt: skip
        for name in ("method", "dt", "t_end", "chunk_size", "n_steps"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, spec: Mapping) -> Sweep:
        """From a spec's dict (a parsed TOML file); `ValueError` naming an unknown key."""
        spec = dict(spec)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(spec) - known)
        if unknown:
            hint = "".join(did_you_mean(k, sorted(known)) for k in unknown)
            raise ValueError(f"sweep spec: unknown key(s) {unknown}; known: {sorted(known)}{hint}")
        if "case" not in spec:
            raise ValueError("sweep spec: missing key 'case'")
        axes = spec.pop("axes", None)
        if not axes:
            raise ValueError("sweep spec: no [[axes]] given (a sweep needs at least one axis)")
        keep = dict(spec.pop("keep", {}))
        keep_known = {f.name for f in dataclasses.fields(Keep)}
        if set(keep) - keep_known:
            extra = sorted(set(keep) - keep_known)
            hint = "".join(did_you_mean(k, sorted(keep_known)) for k in extra)
            raise ValueError(
                f"sweep spec: unknown [keep] key(s) {extra}; known: {sorted(keep_known)}{hint}"
            )
        return cls(axes=tuple(axis_of(a) for a in axes), keep=Keep(**keep), **spec)


def load_spec(path) -> Sweep:
    """A `Sweep` from a TOML spec file."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            spec = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not valid TOML ({err})") from None
    return Sweep.from_dict(spec)
