"""The plot `jaxrigid control` writes (`DIR/PROBLEM.png`): the contact path against the
target and the obstacles, and the controls."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_control(path: Path, problem, report: dict, arrays: dict, refine: int) -> bool:
    """The contact path against the target (with the obstacles), and the controls `θᵢ(t)`,
    `θ̈ᵢ(t)` (or the forces `uᵢ(t)`), the re-simulation at `dt/refine`. False without
    matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Circle
    except ImportError:
        return False
    from ..control.costs import DiscObstacles

    fig = Figure(figsize=(11, 6), layout="constrained")
    FigureCanvasAgg(fig)
    # matplotlib types the result as one SubFigure or an array, whatever the shape
    left, right = fig.subfigures(1, 2, width_ratios=(1.2, 1))  # type: ignore[misc]
    ax = left.subplots()
    x, t, target = arrays["x"], arrays["t"], arrays["target"]
    if target.ndim == 2:
        ax.plot(target[:, 0], target[:, 1], "k--", lw=1, label="target x*(t)")
    else:
        ax.plot(target[0], target[1], "k*", ms=12, label="target")
    for term in problem.inequalities:
        if isinstance(term, DiscObstacles):
            for c, r in zip(np.asarray(term.centres), np.asarray(term.radii)):
                ax.add_patch(Circle(c, r, color="tab:red", alpha=0.3))
    ax.plot(x[:, 0], x[:, 1], lw=1.5, label=f"{report['method']}, dt = {report['dt']:g}")
    xr = arrays["resimulated_x"]
    label = f"re-simulated ({report['resimulation']['method']}, dt/{refine})"
    ax.plot(xr[:, 0], xr[:, 1], ":", lw=1.5, label=label)
    ax.plot(x[:1, 0], x[:1, 1], "o", ms=4)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x1")
    ax.set_ylabel("x2")
    ax.legend(fontsize="small")
    ax.set_title(
        f"{report['problem']}: {report['miss_kind']} {report['miss']:.2e}", fontsize="medium"
    )
    top, bottom = right.subplots(2, 1, sharex=True)
    lower, symbol = ("u", "u") if "u" in arrays else ("theta_ddot", "θ̈")
    for i in range(arrays["theta"].shape[1]):
        top.plot(t, arrays["theta"][:, i], label=f"θ{i + 1}")
        bottom.plot(t, arrays[lower][:, i], label=f"{symbol}{i + 1}")
    top.set_ylabel("θ (rail position)")
    bottom.set_ylabel(symbol + (" (rail force)" if "u" in arrays else ""))
    bottom.set_xlabel("t")
    top.legend(fontsize="small")
    top.set_title("controls", fontsize="medium")
    fig.savefig(path, dpi=100)
    return True


def plot_feedback(path: Path, report: dict, arrays: dict) -> bool:
    """The scenarios' contact paths, closed loop (MPC) against open loop (the open-loop
    optimum replayed), and the target. False without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return False
    fig = Figure(figsize=(7, 6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for i, (xo, xc) in enumerate(zip(arrays["open_loop_x"], arrays["closed_loop_x"])):
        ax.plot(xo[:, 0], xo[:, 1], color="tab:orange", lw=0.8, alpha=0.7,
                label="open loop" if i == 0 else None)  # fmt: skip
        ax.plot(xc[:, 0], xc[:, 1], color="tab:blue", lw=0.8, alpha=0.7,
                label=f"MPC (every {report['replan_every']:g})" if i == 0 else None)  # fmt: skip
    target = arrays["target"]
    ax.plot(target[0], target[1], "k*", ms=12, label="target")
    ax.plot([0.0], [0.0], "ko", ms=4)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x1")
    ax.set_ylabel("x2")
    ax.legend(fontsize="small")
    ax.set_title(
        f"{report['problem']}: {report['scenarios']} scenarios, σ = {report['disturbance']:g}; "
        f"median miss {report['closed_loop_miss']:.1e} (MPC), "
        f"{report['open_loop_miss']:.1e} (open loop)",
        fontsize="medium",
    )
    fig.savefig(path, dpi=100)
    return True
