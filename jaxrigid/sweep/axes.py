"""The axes of a sweep: which values of a case's parameters its members take.

A sweep's members are the Cartesian product of its axes, row-major (the last axis varies
fastest), so member `m` is found from its index alone (`Axis.values(indices)`): a chunk of a
sweep of 10⁹ members builds only its own parameters, never the whole table.

- `Grid(parameter, start, stop, num, log=False)`: `num` evenly spaced values, both ends
  included (geometrically spaced with `log`).
- `Values(parameter, values)`: the given values, in order.
- `RandomSample(ranges, num, seed)`: `num` points drawn uniformly from the box `ranges`
  (`{name: (low, high)}`) by `numpy.random.default_rng(seed)`.
- `LatinHypercube(ranges, num, seed)`: `num` points of a Latin hypercube in that box: each
  parameter's range cut into `num` equal strata, each stratum sampled once, the strata of the
  parameters paired by independent random permutations (McKay, Beckman & Conover 1979).
- `Table(columns)`: the rows of a user table `{name: (num,) array}`.
- `Circle((x, y), radius, start, stop, num)`: `num` points `x = r cos φ, y = r sin φ` at
  evenly spaced angles φ from `start` to `stop` (radians, both included): a direction in the
  plane of two parameters at a fixed norm (an initial momentum's direction on its sphere).

Samples and tables move several parameters together (one axis, one index); grids and value
lists move one. Everything is float64 numpy: the sweep casts to its own dtype when it builds
the members.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping

import numpy as np

from .._checks import is_integer, real_number, real_numbers

__all__ = [
    "AbstractAxis",
    "Circle",
    "Grid",
    "LatinHypercube",
    "RandomSample",
    "Table",
    "Values",
    "axis_of",
]


class AbstractAxis:
    """One axis: `names` (the parameters it sets), `dim` (its name as a dimension of the
    results), `size`, and `values(indices) -> {name: (k,) float64}`."""

    names: tuple[str, ...]
    dim: str
    size: int

    def values(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def describe(self) -> dict:
        """A plain dict (TOML/JSON-able) from which `axis_of` rebuilds the axis."""
        raise NotImplementedError

    def coordinates(self) -> dict[str, np.ndarray]:
        """All the axis's values (for small axes: the results' coordinates)."""
        return self.values(np.arange(self.size))


def _finite(name, *xs):
    for x in xs:
        if not math.isfinite(real_number(f"axis {name!r}: a value", x)):
            raise ValueError(f"axis {name!r}: values must be finite, got {x!r}")


def _count(name, num) -> int:
    if not is_integer(num) or num < 1:
        raise ValueError(f"axis {name!r}: num must be a positive integer, got {num!r}")
    return int(num)


@dataclasses.dataclass(frozen=True)
class Grid(AbstractAxis):
    parameter: str
    start: float
    stop: float
    num: int
    log: bool = False

    def __post_init__(self):
        _count(self.parameter, self.num)
        _finite(self.parameter, self.start, self.stop)
        if self.log and not (self.start > 0 and self.stop > 0):
            raise ValueError(f"axis {self.parameter!r}: a log grid needs start, stop > 0")

    names = property(lambda self: (self.parameter,))
    dim = property(lambda self: self.parameter)
    size = property(lambda self: self.num)

    def values(self, indices):
        i = np.asarray(indices, np.float64)
        frac = i / (self.num - 1) if self.num > 1 else np.zeros_like(i)
        if self.log:
            lo, hi = math.log(self.start), math.log(self.stop)
            values = np.exp(lo + frac * (hi - lo))
        else:
            values = self.start + frac * (self.stop - self.start)
        # the last value is `stop` exactly, as numpy's linspace and geomspace make it
        return {self.parameter: np.where(i == self.num - 1, self.stop, values)}

    def describe(self):
        return dict(kind="grid", parameter=self.parameter, start=self.start, stop=self.stop,
                    num=self.num, log=self.log)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Values(AbstractAxis):
    parameter: str
    values_: tuple[float, ...]

    def __post_init__(self):
        name = f"axis {self.parameter!r}: each value"
        vals = tuple(float(v) for v in np.ravel(real_numbers(name, self.values_)))
        if not vals:
            raise ValueError(f"axis {self.parameter!r}: empty list of values")
        _finite(self.parameter, *vals)
        object.__setattr__(self, "values_", vals)

    names = property(lambda self: (self.parameter,))
    dim = property(lambda self: self.parameter)
    size = property(lambda self: len(self.values_))

    def values(self, indices):
        return {self.parameter: np.asarray(self.values_)[np.asarray(indices)]}

    def describe(self):
        return dict(kind="values", parameter=self.parameter, values=list(self.values_))


def _ranges(kind, ranges: Mapping) -> dict[str, tuple[float, float]]:
    if not ranges:
        raise ValueError(f"{kind} axis: no parameters given")
    out = {}
    for name, pair in ranges.items():
        lo, hi = (real_number(f"{kind} axis: parameter {name!r}", v) for v in pair)
        _finite(name, lo, hi)
        if not lo <= hi:
            raise ValueError(f"{kind} axis: parameter {name!r} needs low ≤ high, got {pair!r}")
        out[str(name)] = (lo, hi)
    return out


@dataclasses.dataclass(frozen=True)
class _Sample(AbstractAxis):
    ranges: Mapping
    num: int
    seed: int = 0
    dim_name: str = "sample"

    def __post_init__(self):
        object.__setattr__(self, "ranges", _ranges(self.kind, self.ranges))
        _count(self.dim_name, self.num)

    names = property(lambda self: tuple(self.ranges))
    dim = property(lambda self: self.dim_name)
    size = property(lambda self: self.num)

    def values(self, indices):
        return {k: v[np.asarray(indices)] for k, v in self._table().items()}

    def describe(self):
        ranges = {k: list(v) for k, v in self.ranges.items()}
        return dict(kind=self.kind, ranges=ranges, num=self.num, seed=self.seed,
                    dim=self.dim_name)  # fmt: skip

    def __hash__(self):
        return hash((self.kind, tuple(self.ranges.items()), self.num, self.seed, self.dim_name))


class RandomSample(_Sample):
    kind = "random"

    @functools.cache  # noqa: B019 - frozen, hashable; the table is the axis's own
    def _table(self):
        rng = np.random.default_rng(self.seed)
        return {k: rng.uniform(lo, hi, self.num) for k, (lo, hi) in self.ranges.items()}


class LatinHypercube(_Sample):
    kind = "lhs"

    @functools.cache  # noqa: B019
    def _table(self):
        rng = np.random.default_rng(self.seed)
        out = {}
        for k, (lo, hi) in self.ranges.items():
            strata = rng.permutation(self.num) + rng.uniform(0.0, 1.0, self.num)
            out[k] = lo + (hi - lo) * strata / self.num
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class Table(AbstractAxis):
    columns: Mapping
    dim_name: str = "row"

    def __post_init__(self):
        cols = {
            str(k): real_numbers(f"table axis: each entry of column {k!r}", v).reshape(-1)
            for k, v in self.columns.items()
        }
        sizes = {v.size for v in cols.values()}
        if not cols or sizes == {0}:
            raise ValueError("table axis: no rows")
        if len(sizes) != 1:
            raise ValueError(f"table axis: columns of different lengths {sorted(sizes)}")
        for k, v in cols.items():
            if not np.all(np.isfinite(v)):
                raise ValueError(f"table axis: column {k!r} has NaN or inf")
        object.__setattr__(self, "columns", cols)

    names = property(lambda self: tuple(self.columns))
    dim = property(lambda self: self.dim_name)
    size = property(lambda self: next(iter(self.columns.values())).size)

    def values(self, indices):
        return {k: v[np.asarray(indices)] for k, v in self.columns.items()}

    def describe(self):
        return dict(kind="table", columns={k: v.tolist() for k, v in self.columns.items()},
                    dim=self.dim_name)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Circle(AbstractAxis):
    parameters: tuple[str, str]
    radius: float
    start: float
    stop: float
    num: int
    dim_name: str = "angle"

    def __post_init__(self):
        object.__setattr__(self, "parameters", tuple(str(p) for p in self.parameters))
        if len(self.parameters) != 2 or len(set(self.parameters)) != 2:
            raise ValueError(f"circle axis: give two parameters, got {list(self.parameters)}")
        _count(self.dim_name, self.num)
        _finite(self.dim_name, self.radius, self.start, self.stop)

    names = property(lambda self: self.parameters)
    dim = property(lambda self: self.dim_name)
    size = property(lambda self: self.num)

    def angles(self, indices) -> np.ndarray:
        (angle,) = Grid(self.dim_name, self.start, self.stop, self.num).values(indices).values()
        return angle

    def values(self, indices):
        angle = self.angles(indices)
        x, y = self.parameters
        return {x: self.radius * np.cos(angle), y: self.radius * np.sin(angle)}

    def coordinates(self):
        return {self.dim_name: self.angles(np.arange(self.num)), **super().coordinates()}

    def describe(self):
        return dict(kind="circle", parameters=list(self.parameters), radius=self.radius,
                    start=self.start, stop=self.stop, num=self.num, dim=self.dim_name)  # fmt: skip


_KINDS = {"grid", "values", "random", "lhs", "table", "circle"}


def axis_of(entry: Mapping) -> AbstractAxis:
    """An axis from its description (a spec's `[[axes]]` table); `ValueError` naming the
    entry for an unknown kind or a missing or unknown key."""
    entry = dict(entry)
    kind = entry.pop("kind", None)
    if kind not in _KINDS:
        raise ValueError(f"axis {entry}: kind must be one of {sorted(_KINDS)}, got {kind!r}")
    try:
        if kind == "grid":
            return Grid(**entry)
        if kind == "values":
            return Values(entry.pop("parameter"), tuple(entry.pop("values")), **entry)
        if kind == "table":
            return Table(entry.pop("columns"), entry.pop("dim", "row"), **entry)
        if kind == "circle":
            return Circle(dim_name=entry.pop("dim", "angle"), **entry)
        cls = RandomSample if kind == "random" else LatinHypercube
        dim = entry.pop("dim", "sample")
        return cls(entry.pop("ranges"), entry.pop("num"), entry.pop("seed", 0), dim, **entry)
    except (TypeError, KeyError) as err:
        raise ValueError(f"axis of kind {kind!r}: bad or missing keys ({err})") from None


def member_values(axes, indices: np.ndarray) -> dict[str, np.ndarray]:
    """The parameters of the members at flat `indices` (row-major over `axes`)."""
    sizes = [a.size for a in axes]
    per_axis = np.unravel_index(np.asarray(indices, np.int64), sizes)
    out: dict[str, np.ndarray] = {}
    for axis, idx in zip(axes, per_axis):
        out.update(axis.values(idx))
    return out
