"""How the test suite has XLA build its programs (conftest.py applies it in `pytest_configure`,
before any backend starts, unless the mark expression selects the slow tests).

The suite checks properties of small runs, so XLA's optimisations cost more than they buy:
XLA's backend optimisation level 0 (`JAX_DISABLE_MOST_OPTIMIZATIONS=1`) and its older
element-wise fusion emitter (`--xla_cpu_use_fusion_emitters=false`): XLA compiles the suite's
programs 2.4 times faster, and the suite takes 0.63 of its time (docs/design-notes.md, 35).
And one LLVM module per program (`--xla_cpu_parallel_codegen_split_count=1`, not parts on
a thread pool: `SERIAL_CODEGEN_XLA_FLAG`). None enables fast math, but they round some
operations differently from XLA's defaults — where a product and a sum are fused, and
differently for differently shaped programs — so a test whose property depends on how XLA
rounds (bit-for-bit equality of differently shaped programs, round-off over long runs) is
marked `xla_defaults` and runs in a child process with XLA's defaults, as users' programs do
(conftest.py), and so do the notebooks in `DEFAULTS_NOTEBOOKS`.
`JAXRIGID_TEST_XLA_DEFAULTS=1` leaves the environment as it is: with none of the settings in it,
the whole suite runs with XLA's defaults.

The settings live in the environment, so the xdist workers, notebook kernels, command and Dask
subprocesses the suite starts build alike.
"""

from __future__ import annotations

import os
import subprocess
import sys

FAST_BUILD_XLA_FLAG = "--xla_cpu_use_fusion_emitters=false"
# One LLVM module per program, not parts compiled on a thread pool: the suite keeps every core
# busy with one worker each, so the parts buy no wall time and their duplicated work costs
# CPU (bench/README.md, `codegen_split.py`). Like the emitter, it only changes rounding.
SERIAL_CODEGEN_XLA_FLAG = "--xla_cpu_parallel_codegen_split_count=1"
FAST_BUILD_XLA_FLAGS = (FAST_BUILD_XLA_FLAG, SERIAL_CODEGEN_XLA_FLAG)
FAST_BUILD_ENV = "JAX_DISABLE_MOST_OPTIMIZATIONS"  # jax's switch for optimisation level 0
DEFAULTS_ENV = "JAXRIGID_TEST_XLA_DEFAULTS"
# The chain notebook asserts that Gauss6's energy error over a long run shows no drift: its runs
# are chaotic, and under the fast build the c1-c3 Gauss6 run's largest error over the second
# half of t ∈ [0, 50] was 3.8e-6 against 1.0e-6 over the first (asserted: less than twice;
# 1.0e-6 and 9.2e-7 with XLA's defaults), and the other runs' largest errors moved by up to a
# third. (The control notebook's optimised cells depend on rounding in any build:
# tests/notebook_runner.py compares them by their outputs' kinds, at `optimised`, so it runs
# with the fast build.)
DEFAULTS_NOTEBOOKS = {"rigid_body_chain.ipynb"}


def _xla_accepts(flag: str) -> bool:
    """Whether this jaxlib knows `flag`: XLA aborts the process on an unknown XLA_FLAGS entry,
    so a fresh interpreter tries it first."""
    env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip())
    code = "import jax.numpy as jnp; jnp.zeros(1).block_until_ready()"
    return (
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True).returncode == 0
    )


def apply_fast_build() -> None:
    """Put the fast-build settings into this process's environment (once, in the process that
    starts the run: the xdist workers inherit them)."""
    if os.environ.get(DEFAULTS_ENV) == "1" or "PYTEST_XDIST_WORKER" in os.environ:
        return
    os.environ[FAST_BUILD_ENV] = "1"
    for flag in FAST_BUILD_XLA_FLAGS:
        flags = os.environ.get("XLA_FLAGS", "")
        if flag not in flags and _xla_accepts(flag):
            os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()


def fast_build_on() -> bool:
    """Whether this process builds with either fast-build setting (the suite's, or one the
    caller put into the environment with `JAXRIGID_TEST_XLA_DEFAULTS=1`, as
    bench/xla_build_flags.py does)."""
    flags = os.environ.get("XLA_FLAGS", "")
    return os.environ.get(FAST_BUILD_ENV) == "1" or FAST_BUILD_XLA_FLAG in flags


def optimisations_off() -> bool:
    """jax's switch, read from the environment (conftest.py sets jax's config from it)."""
    return os.environ.get(FAST_BUILD_ENV) == "1"


def defaults_environment() -> dict:
    """This process's environment with XLA's defaults in place of the fast build, for a child
    pytest or kernel (which must not think itself an xdist worker or the cache's owner)."""
    drop = (FAST_BUILD_ENV, "_JAXRIGID_TEST_CACHE_OWNED", "PYTEST_CURRENT_TEST")
    env = {k: v for k, v in os.environ.items() if k not in drop and "XDIST" not in k}
    env["XLA_FLAGS"] = without_fast_build_flags(env.get("XLA_FLAGS", ""))
    env[DEFAULTS_ENV] = "1"
    return env


def without_fast_build_flags(flags: str) -> str:
    """`flags` (an `XLA_FLAGS` value) without the fast build's."""
    return " ".join(f for f in flags.split() if f not in FAST_BUILD_XLA_FLAGS)
