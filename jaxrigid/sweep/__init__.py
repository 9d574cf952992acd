"""Parameter sweeps: a named case swept over axes of its parameters (initial conditions and
model parameters), run in chunks into a resumable zarr store.

    axes = (Grid("Omega1", -1, 1, 100), Grid("Omega2", -1, 1, 100))
    sweep = Sweep("krysl-torque-free", axes=axes)
    run(sweep, "out/")            # or: jaxrigid sweep SPEC.toml --out out/
    data = load("out/")           # {name: array shaped like the sweep}; to_xarray("out/")
"""

from __future__ import annotations

import warnings

import numpy as np

from .axes import Circle as Circle
from .axes import Grid as Grid
from .axes import LatinHypercube as LatinHypercube
from .axes import RandomSample as RandomSample
from .axes import Table as Table
from .axes import Values as Values
from .cluster import run_distributed as run_distributed
from .run import plan as plan
from .run import run as run
from .spec import Keep as Keep
from .spec import Sweep as Sweep
from .spec import load_spec as load_spec
from .store import Store, SweepStoreError

__all__ = [
    "Circle",
    "Grid",
    "Keep",
    "LatinHypercube",
    "RandomSample",
    "Sweep",
    "SweepStoreError",
    "Table",
    "Values",
    "describe",
    "load",
    "load_spec",
    "plan",
    "run",
    "run_distributed",
    "to_xarray",
    "verify",
]


def describe(path) -> dict:
    """The store's attributes: the sweep's description, chunk size, method, step, versions."""
    return Store.open(path).attrs


def load(path, *, on_damage: str = "unfinished") -> dict[str, np.ndarray]:
    """The results at `path`: `{name: array of shape (*sweep shape, ...)}` plus `"finished"`
    (bool, per member: its chunk's record belongs to the store and its data verifies;
    unfinished members hold NaN, integers −1) and, when a trajectory was kept,
    `"trajectory_t"` (its times: `(n_saved,)`, or per member when the sweep's axes sweep the
    step `dt`).

    `on_damage`: what a chunk whose data does not verify against its record (a chunk file
    deleted or overwritten, an array deleted) does: `"unfinished"` (default) marks its members
    unfinished, fills them and warns naming the chunks (`--resume` computes them again);
    `"raise"` raises `SweepStoreError` naming them."""
    if on_damage not in ("unfinished", "raise"):
        raise ValueError(f"on_damage must be 'unfinished' or 'raise', got {on_damage!r}")
    store = Store.open(path)
    states, data = store.check(keep=True)
    damaged = [c for c in states if c.state == "damaged"]
    if damaged:
        text = "; ".join(
            f"chunk {c.index} (members {c.start}..{c.stop - 1}): {c.why}" for c in damaged[:5]
        )
        text = f"{path}: {len(damaged)} damaged chunk(s): {text}"
        if on_damage == "raise":
            raise SweepStoreError(text)
        warnings.warn(
            text + "; their members are marked unfinished (--resume computes them)", stacklevel=2
        )
    attrs = store.attrs
    shape = tuple(attrs["shape"])
    finished = np.zeros(attrs["n_members"], bool)
    for c in states:
        finished[c.start : c.stop] = c.state == "finished"
    out = {k: v.reshape(shape + v.shape[1:]) for k, v in data.items()}
    out["finished"] = finished.reshape(shape)
    stride = attrs["sweep"]["keep"].get("stride", 0)
    if stride:
        n_saved = attrs["n_steps"] // stride + 1
        dt = out["param/dt"][..., None] if attrs["dt"] is None else attrs["dt"]  # swept
        out["trajectory_t"] = np.arange(n_saved) * (dt * stride)
    return out


def verify(path) -> list:
    """Every chunk's state at `path` (`ChunkState(index, start, stop, state, why)`, state
    `"finished"`, `"missing"` or `"damaged"`), every array's data read and checked against the
    chunk's completion record; `jaxrigid sweep verify DIR` prints it."""
    return Store.open(path).check()[0]


def to_xarray(path):
    """The results at `path` as an `xarray.Dataset` (xarray is an optional dependency: the
    `sweep` extra): one dimension per axis, the swept parameters as coordinates, and a
    dimension `t` for a kept trajectory."""
    try:
        import xarray as xr
    except ImportError as err:
        raise ImportError("to_xarray needs xarray: pip install 'jaxrigid[sweep]'") from err
    from .spec import Sweep

    attrs = describe(path)
    sweep = Sweep.from_dict(attrs["sweep"])
    dims = [a.dim for a in sweep.axes]
    data = load(path)
    coords = {}
    for axis in sweep.axes:
        for name, values in axis.coordinates().items():
            coords[name] = ((axis.dim,), values)
    if "trajectory_t" in data:
        t = data.pop("trajectory_t")  # per member when the step is swept
        coords["t" if t.ndim == 1 else "trajectory_t"] = t if t.ndim == 1 else (dims + ["t"], t)
    variables = {}
    for key, value in data.items():
        if key.startswith("param/"):
            continue
        name = key.replace("/", "_")
        time = ["t"] if key.startswith("trajectory/") else []
        extra = [f"{name}_{i}" for i in range(value.ndim - len(dims) - len(time))]
        variables[name] = (dims + time + extra, value)
    return xr.Dataset(variables, coords=coords, attrs={"sweep": str(attrs["sweep"])})
