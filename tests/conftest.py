import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jax
import pytest
import xla_settings

import jaxrigid
from jaxrigid import _collector

# float64 is the reference precision; accidental rank promotion ((3,) + (n, 3)) must fail loudly.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

_CACHE_ENV = "JAXRIGID_CACHE_DIR"
_OWNED_CACHE = "_JAXRIGID_TEST_CACHE_OWNED"


def pytest_configure(config):
    """One persistent compilation cache for the run, shared by the xdist workers (which
    inherit the controller's environment): a program one worker compiled, the other loads.
    A fresh directory per run unless `JAXRIGID_CACHE_DIR` names one (then it is kept).
    XLA's settings (`xla_settings`) go first, before any backend starts: the fast build for
    the default suite, XLA's defaults where the mark expression selects the slow tests (long
    runs, where optimised code pays)."""
    if not re.search(r"(?<!not )\bslow\b", config.getoption("markexpr") or ""):
        xla_settings.apply_fast_build()
    # jax reads the variable when it is first imported, which may have been before
    jax.config.update("jax_disable_most_optimizations", xla_settings.optimisations_off())
    if os.environ.get("PYTEST_XDIST_WORKER") is None and not os.environ.get(_CACHE_ENV):
        os.environ[_CACHE_ENV] = tempfile.mkdtemp(prefix="jaxrigid-test-xla-")
        os.environ[_OWNED_CACHE] = "1"
    jaxrigid.enable_compilation_cache()
    # the suite builds thousands of programs, many in its own `jax.jit`s outside the library's
    # builds: Python's collector made rare for the whole run (`jaxrigid._collector`; measured:
    # test_contracts.py spent 24.2 s in it, 4.4 s so)
    gc.set_threshold(*_collector.BUILD_THRESHOLDS)
    if hasattr(config.option, "loadscopereorder"):  # xdist's controller: modules as collected
        config.option.loadscopereorder = False
    config.addinivalue_line(
        "markers",
        "xla_defaults: the property depends on how XLA rounds (bit-for-bit equality of "
        "differently shaped programs, round-off over long runs): run with XLA's defaults",
    )


# The modules that take longest (summed over a run's workers: bench/results/suite_profile_*),
# longest first. xdist's `--dist loadfile` hands the workers whole modules in the order it
# queues them; by default that is by number of tests, which put the notebooks' 440 s near the
# end and left one worker idle for a minute while the other finished them. Queued first, the
# longest modules leave short ones for the end, where they even out the two workers.
LONGEST_FIRST = (
    "test_notebooks.py",
    "test_contracts.py",
    "test_notebooks_rolling_ball.py",
    "test_sweep.py",
    "test_control_feedback.py",
    "test_order_registry.py",
    "test_control_dynamic.py",
    "test_chain_gauss.py",
    "test_splitting.py",
    "test_compositions.py",
    "test_krysl_structure.py",
    "test_runs.py",
    "test_control_policies.py",
    "test_passive_dynamic_masses.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The modules in `LONGEST_FIRST` first, in its order, then the others as collected (xdist
    queues them so: `pytest_configure`)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable


_CHILD_REPORT = "_JAXRIGID_CHILD_REPORT"  # set in a child: where it writes its outcomes
_child_outcomes: dict[str, dict] = {}  # the parent's: node id -> outcome, by module


def _read_outcomes(path: str) -> dict:
    """A child's outcomes so far (none before its first report)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def _marked(item) -> bool:
    return item.get_closest_marker("xla_defaults") is not None


def _run_child(item) -> None:
    """Run every selected `xla_defaults` test of `item`'s module in ONE child pytest with
    XLA's defaults (one start-up and one set of module fixtures for them all; `--dist
    loadfile` keeps a module on one worker) and keep each test's outcome."""
    nodeids = [i.nodeid for i in item.session.items if i.module is item.module and _marked(i)]
    with tempfile.TemporaryDirectory(prefix="jaxrigid-child-") as tmp:
        report = os.path.join(tmp, "outcomes.json")
        env = xla_settings.defaults_environment() | {_CHILD_REPORT: report}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
        child = subprocess.run(
            cmd + nodeids, env=env, cwd=item.config.rootpath, capture_output=True, text=True
        )
        got = _read_outcomes(report)
    for nodeid in nodeids:  # a test the child never reported (a crash) fails with its output
        _child_outcomes[nodeid] = got.get(nodeid) or {
            "outcome": "failed",
            "text": f"the child pytest (exit {child.returncode}) reported nothing for it:\n"
            + child.stdout[-6000:]
            + child.stderr[-2000:],
        }


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked `xla_defaults` runs in a child pytest with XLA's defaults while the
    suite's fast build is on (`_run_child`; its failure message is the child's)."""
    if not (xla_settings.fast_build_on() and _marked(pyfuncitem)):
        return None
    if pyfuncitem.nodeid not in _child_outcomes:
        _run_child(pyfuncitem)
    result = _child_outcomes.pop(pyfuncitem.nodeid)
    if result["outcome"] == "skipped":
        pytest.skip(f"in the child pytest with XLA's defaults: {result['text']}")
    if result["outcome"] != "passed":
        pytest.fail(f"with XLA's defaults (a child pytest):\n{result['text']}", pytrace=False)
    return True


def pytest_runtest_logreport(report):
    """In a child (`_run_child`): each test's outcome, a failure's or skip's text with it."""
    path = os.environ.get(_CHILD_REPORT)
    if path is None or (report.when != "call" and report.passed):
        return
    outcomes = _read_outcomes(path)
    if report.nodeid in outcomes and outcomes[report.nodeid]["outcome"] != "passed":
        return  # a setup failure or skip stands
    text = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else ""
    text = text or (report.longreprtext[-6000:] if report.failed else "")
    outcomes[report.nodeid] = {"outcome": report.outcome, "text": text}
    with open(path, "w") as f:
        json.dump(outcomes, f)


def pytest_unconfigure(config):
    if os.environ.get("PYTEST_XDIST_WORKER") is None and os.environ.pop(_OWNED_CACHE, None):
        shutil.rmtree(os.environ.pop(_CACHE_ENV), ignore_errors=True)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop every compiled program after each test module. XLA:CPU maps memory for each
    executable it keeps; the whole suite in one process compiles thousands and crossed the
    kernel's limit of 65 530 mappings (segfault inside the compiler; measured: test_order.py
    alone leaves 10 148 mappings), while modules share little compiled code. A program a
    later module builds again is loaded from the run's persistent cache. Keeping programs
    while under half the limit is slower: six rigid-body files in one process (test_invariants,
    test_simulate, test_fast_path, test_sensitivity, test_krysl_coulomb, test_order) took 307 s
    of wall and 293 s of CPU at 3.0 GB, against 251 s, 249 s and 1.7 GB clearing after each
    (2026-11-29, one run each)."""
    yield
    jax.clear_caches()
    gc.collect()
