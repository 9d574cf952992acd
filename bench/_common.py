"""What the benchmark scripts share: the machine description and JSON conversion.

The scripts run as `python bench/<script>.py`, so `bench/` is on the path and they import
this as `from _common import machine, to_json`.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import math
import os
import platform
import subprocess
from pathlib import Path

import jax
import numpy as np


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else `platform.processor()`."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None


def machine(packages=("jax", "jaxlib", "equinox", "numpy", "scipy")) -> dict:
    """The machine, the first JAX device, package versions, load average and date."""
    device = jax.devices()[0]
    versions = {}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "uname": platform.uname()._asdict(),
        "processor": cpu_name(),
        "cpu_count": os.cpu_count(),
        "device": str(device),
        "device_kind": device.device_kind,
        "platform": device.platform,
        "versions": versions,
        "python": platform.python_version(),
        "git_commit": git_commit(),
        "load_average": os.getloadavg(),
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def to_json(obj):
    """Arrays and numpy scalars to plain Python; non-finite floats to strings."""
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_json(obj.tolist())
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return to_json(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj
