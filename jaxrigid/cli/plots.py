"""The plot `jaxrigid run` writes (`DIR/CASE.png`): the drift of the conserved invariants, the
change of the quantities the case does not conserve, and the state (a rolling ball's contact
path). An ensemble is drawn as its median and 5–95 % band over the members, its contact paths
as a fan of members and the final positions of all of them."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .run import RunSpec, Trajectory

BAND = (0.05, 0.5, 0.95)  # the quantiles drawn for an ensemble: band and median
FAN = 40  # contact paths drawn for an ensemble (all final positions are)

# units of the invariants by name, for a case in SI units (`Case.si_units`)
_UNITS = (
    (r"energy|H|K|.*_work", "J"),
    (r"pi\d|pi_norm|Pi\d|Pi_dot_Gamma|angular_momentum\d|p_psi|p_phi|qTg", "kg m²/s"),
    (r"momentum\d", "kg m/s"),
    (r".*_error|.*_norm|constraint", "1"),
)
# the state fields drawn against t: the first of these a state has (else all its fields),
# what they are and their SI units
_STATE_FIELDS = {
    "Pi": ("Π, body angular momentum", "kg m²/s"),
    "Omega": ("Ω, body angular velocity", "rad/s"),
    "P": ("P = ṘJ, third column", "kg m²/s"),
    "v": ("director velocities", "1/s"),
}


def _kind(name: str) -> int:
    """The row of `_UNITS` that `name` matches (its dimension), `len(_UNITS)` for none."""
    return next((i for i, (p, _) in enumerate(_UNITS) if re.fullmatch(p, name)), len(_UNITS))


def _unit(name: str, si: bool) -> str:
    """`name [unit]` for a case in SI units; `name` otherwise."""
    k = _kind(name)
    return f"{name} [{_UNITS[k][1]}]" if si and k < len(_UNITS) else name


def _by_dimension(varying: dict) -> list[dict]:
    """`varying` in groups of one dimension each (energies, angular momenta, ...), so that
    one axis never mixes them."""
    kinds = sorted({_kind(name) for name in varying})
    return [{k: v for k, v in varying.items() if _kind(k) == kind} for kind in kinds]


def _legend(ax) -> None:
    """The legend outside the axes, on their right: it never covers the data."""
    if ax.get_legend_handles_labels()[0]:
        n = len(ax.get_legend_handles_labels()[0])
        ax.legend(
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize="small",
            frameon=False,
            ncol=1 if n <= 12 else 2,
        )


def _members(values, ensemble: bool) -> np.ndarray:
    """`values (*ensemble, n_t, ...)` (one ensemble axis or none) as `(members, n_t, ...)`."""
    values = np.asarray(values, dtype=float)
    return values if ensemble else values[None]


def _band(ax, ts, values, label, log=False, **style) -> None:
    """`values (members, n_t)`: one line for one member; else the median and the 5–95 %
    band over the members (on a `log` scale only where its lower edge is positive)."""
    if values.shape[0] == 1:
        ax.plot(ts, values[0], label=label, lw=0.9, **style)
        return
    with warnings.catch_warnings():  # a member masked to NaN all along (a failed run)
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, mid, hi = np.nanquantile(values, BAND, axis=0)
    (line,) = ax.plot(ts, mid, label=label, lw=0.9, **style)
    where = lo > 0 if log else None
    ax.fill_between(ts, lo, hi, where=where, color=line.get_color(), alpha=0.2, lw=0)


def _time_label(si: bool) -> str:
    return "t [s]" if si else "t (dimensionless)"


def _draw_drifts(ax, ts, conserved: dict, si: bool, ens: bool) -> None:
    """`|I(t) − I(0)|` of each conserved invariant, log scale (those zero throughout named
    in the legend only)."""
    for name, v in conserved.items():
        v = _members(v, ens)
        drift = np.abs(v[:, 1:] - v[:, :1])
        if not np.any(drift > 0):
            ax.plot([], [], " ", label=f"{_unit(name, si)}: 0 throughout")
            continue
        _band(ax, ts[1:], drift, _unit(name, si), log=True)
    ax.set_ylabel("|I(t) − I(0)|\nconserved invariants")
    if not conserved:
        ax.text(0.5, 0.5, "this case conserves none of its model's invariants", ha="center",
                va="center", transform=ax.transAxes)  # fmt: skip
        ax.set_yticks([])
        return
    ax.set_yscale("log", nonpositive="mask")
    _legend(ax)


def _draw_changes(ax, ts, varying: dict, si: bool, ens: bool) -> None:
    """`Q(t) − Q(0)` of quantities of one dimension that the case does not conserve (with a
    rolling ball's work `W(t)`, which the energy's change equals along the exact flow)."""
    for name, v in varying.items():
        v = _members(v, ens)
        style = {"ls": "--"} if name.endswith("_work") else {}
        _band(ax, ts, v - v[:, :1], name, **style)
    ax.axhline(0.0, color="0.6", lw=0.5)
    unit = _unit(next(iter(varying)), si).partition(" ")[2]  # "[J]", or "" without units
    ax.set_ylabel(" ".join(filter(None, ["Q(t) − Q(0)", unit])) + "\nnot conserved")
    _legend(ax)


def _draw_state(ax, ts, states, si: bool, ens: bool) -> None:
    """The state's momentum against t (`_STATE_FIELDS`; all fields of a canonical state);
    a chain's transverse displacement of each body."""
    fields = getattr(states, "_fields", ())
    if _is_chain(states):
        r = _members(states.r, ens)[..., 1]  # (members, n_t, bodies)
        for j in range(r.shape[-1]):
            label = f"body {j}" if r.shape[-1] <= 12 else None
            _band(ax, ts, r[..., j] - r[:, :1, j], label)
        ax.set_ylabel("r_y(t) − r_y(0)" + (" [m]" if si else ""))
        _legend(ax)
        return
    shown = [f for f in _STATE_FIELDS if f in fields][:1] or list(fields)
    for field in shown:
        values, column, labels = _members(getattr(states, field), ens), "", None
        if values.ndim == 4:
            rows, cols = values.shape[-2:]
            if rows == cols:  # a 3×3 matrix (RATTLE's P): its third column, entries i3
                values, column = values[..., 2], "3"
            else:  # one vector per body (coupled bodies' Pi (2, 3)): every component
                labels = [f"{field}{b + 1},{i + 1}" for b in range(rows) for i in range(cols)]
                values = values.reshape(values.shape[:2] + (rows * cols,))
        for i in range(values.shape[-1]):
            _band(ax, ts, values[..., i], labels[i] if labels else f"{field}{i + 1}{column}")
    if len(shown) == 1 and shown[0] in _STATE_FIELDS:
        words, unit = _STATE_FIELDS[shown[0]]
        ax.set_ylabel(f"{words} [{unit}]" if si else words)
    else:
        ax.set_ylabel(", ".join(shown) + (" (SI units)" if si else ""))
    _legend(ax)


def _draw_contact(ax, ts, states, si: bool, ens: bool) -> None:
    """The contact point's path `(x1, x2)`: member 0's, a fan of up to `FAN` members' and
    the final positions of all members."""
    x = _members(states.x, ens)[..., :2]  # (members, n_t, 2)
    m = x.shape[0]
    if m > 1:
        fan = np.unique(np.linspace(1, m - 1, min(FAN, m - 1)).round().astype(int))
        for k, i in enumerate(fan):
            label = f"paths of {len(fan)} members" if k == 0 else None
            ax.plot(x[i, :, 0], x[i, :, 1], color="tab:blue", alpha=0.25, lw=0.6, label=label)
        ax.scatter(x[:, -1, 0], x[:, -1, 1], s=4, color="tab:orange", alpha=0.6, lw=0,
                   label=f"final positions, all {m} members", zorder=3)  # fmt: skip
    ax.plot(x[0, :, 0], x[0, :, 1], color="k", lw=1.0,
            label="member 0 (the case)" if m > 1 else "path")  # fmt: skip
    ax.plot(x[0, :1, 0], x[0, :1, 1], "o", color="tab:green", ms=5, label=f"t = {ts[0]:g}")
    ax.plot(x[0, -1:, 0], x[0, -1:, 1], "s", color="k", ms=4, label=f"t = {ts[-1]:g}")
    ax.set_aspect("equal", adjustable="datalim")
    unit = " [m]" if si else ""
    ax.set_xlabel("x1" + unit)
    ax.set_ylabel("x2" + unit)
    ax.set_title("contact point", fontsize="medium")
    _legend(ax)


def write_png(path: Path, spec: RunSpec, traj: Trajectory, conserved, varying) -> bool:
    """The conserved invariants' drift (log scale), the varying quantities' change, and the
    state against t (a rolling ball: its contact path). False without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return False
    ts, si, ens = np.asarray(traj.ts, dtype=float), spec.case.si_units, spec.ensemble is not None
    rolling = _is_rolling(traj.states)
    groups = _by_dimension(varying)
    rows = ["drift"] + [f"change{i}" for i in range(len(groups))] + ["state"]
    heights = [1.0] * (len(rows) - 1) + [2.0 if rolling else 1.0]
    fig = Figure(figsize=(10, 2.4 * sum(heights) + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = dict(zip(rows, fig.subplots(len(rows), 1, height_ratios=heights)))
    _draw_drifts(axes["drift"], ts, conserved, si, ens)
    for i, group in enumerate(groups):
        _draw_changes(axes[f"change{i}"], ts, group, si, ens)
    if rolling:
        _draw_contact(axes["state"], ts, traj.states, si, ens)
    else:
        _draw_state(axes["state"], ts, traj.states, si, ens)
    timed = [axes[row] for row in rows if not (rolling and row == "state")]
    for ax in timed[:-1]:
        ax.sharex(timed[-1])
        ax.tick_params(labelbottom=False)
    timed[-1].set_xlabel(_time_label(si))
    who = ""
    if spec.ensemble is not None and spec.ensemble > 1:
        who = f", ensemble of {spec.ensemble}: median and {BAND[0]:.0%}–{BAND[2]:.0%} band"
    fig.suptitle(f"{spec.case.name}, {spec.method}, dt = {spec.dt:g}{who}")
    fig.savefig(path, dpi=100)
    return True


def _is_chain(states) -> bool:
    """A chain of bodies' states: centres `r (..., n_t, N+2, 3)` and momenta `p`."""
    fields = getattr(states, "_fields", ())
    return "r" in fields and "p" in fields and np.ndim(states.r) >= 3


def _is_rolling(states) -> bool:
    """A rolling body's states: an attitude quaternion `q` and a centre `x` (3 components)."""
    fields = getattr(states, "_fields", ())
    return "q" in fields and "x" in fields and np.shape(states.x)[-1:] == (3,)
