"""Sweeps on a Dask distributed cluster (issue 15, "Hosts"): a local cluster of 2 worker
processes (the same code path as a real cluster) against the in-process `run`.

Bitwise equalities (`np.array_equal`) are the claims, not tolerances: each worker compiles the
same chunk program for the same chunk size on the same kind of device (one CPU device: the
workers' XLA_FLAGS force no device count), so where a chunk runs cannot change a bit of it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from jaxrigid.cli import main
from jaxrigid.sweep import Grid, Sweep, Values, load, load_spec, run, run_distributed
from jaxrigid.sweep import store as store_module
from jaxrigid.sweep.cluster import SweepTaskError, _chunk_task, shard_count

distributed = pytest.importorskip("distributed")

AXES = (Grid("Omega1", -0.5, 0.5, 7), Values("Omega3", (0.0, 0.05, 0.1, -0.2, 0.3)))


def small(**kw) -> Sweep:
    """35 members of the torque-free body, 100 steps, in 5 chunks of 7."""
    return Sweep("krysl-torque-free", axes=AXES, t_end=1.0, chunk_size=7, **kw)


def _worker_env() -> dict:
    """The test environment's XLA_FLAGS without a forced host device count: every worker has
    one CPU device, as the in-process reference does."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    return {"XLA_FLAGS": " ".join(f for f in flags if "force_host_platform" not in f)}


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        env=_worker_env(),
    )
    with cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "ref"
    run(small(), out, progress=False)
    return load(out)


def _assert_equal(got, want):
    assert got.keys() == want.keys()
    assert got["finished"].all()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def _chunks_run(stream) -> list[int]:
    """The chunk indices of the sweep tasks in a task stream (`get_task_stream`)."""
    return sorted(int(t["key"].rsplit("-", 1)[1]) for t in stream.data if "chunk" in t["key"])


def _markers(out) -> dict:
    """The finished chunks' markers and their modification times (ns)."""
    return {p.name: p.stat().st_mtime_ns for p in (out / "done").iterdir() if p.name.isdigit()}


def test_shard_count():
    """A worker shards a chunk over the most local devices that divide the chunk size."""
    assert [shard_count(4, s) for s in (8, 6, 5, 1)] == [4, 3, 1, 1]
    assert shard_count(1, 7) == 1 and shard_count(8, 12) == 6


def test_missing_distributed_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    with pytest.raises(ImportError, match=r"jaxrigid\[sweep,cluster\]"):
        run_distributed(small(), tmp_path / "s", client=None)
    assert not (tmp_path / "s").exists()


def test_cluster_equals_in_process(client, reference, tmp_path):
    """Both workers compute chunks; every member equals the in-process run bit for bit."""
    client.wait_for_workers(2)
    out = tmp_path / "s"
    with distributed.get_task_stream(client) as stream:
        assert run_distributed(small(), out, client, progress=False) == out
    _assert_equal(load(out), reference)
    assert _chunks_run(stream) == [0, 1, 2, 3, 4]
    assert len({t["worker"] for t in stream.data}) == 2, "one worker did everything"
    with distributed.get_task_stream(client) as again:  # a finished store: nothing to run
        run_distributed(small(), out, client, resume=True, progress=False)
    assert _chunks_run(again) == []
    # a task repeated after its chunk was written (its worker died before reporting) does
    # nothing: it neither fails nor rewrites the marker
    before = _markers(out)
    assert _chunk_task(small().describe(), str(out), 2, 14, 21, 7, True) == 0
    assert _markers(out) == before


def _interrupted(out, at_start, monkeypatch):
    """An in-process run that fails (a full disk) when it writes the chunk starting at
    `at_start`: the chunks before it are finished."""
    original = store_module.Store._write_rows

    def failing(self, name, start, value):
        if start == at_start:
            raise OSError(28, "No space left on device")
        return original(self, name, start, value)

    monkeypatch.setattr(store_module.Store, "_write_rows", failing)
    with pytest.raises(store_module.SweepStoreError, match="No space left on device"):
        run(small(), out, progress=False)
    monkeypatch.undo()


def test_resume_on_the_cluster(client, reference, tmp_path, monkeypatch):
    """After an interrupted in-process run (chunks 0 and 1 finished) the cluster computes only
    chunks 2–4, leaves the finished ones untouched, and the store equals the full run."""
    out = tmp_path / "s"
    _interrupted(out, 14, monkeypatch)
    stamps = _markers(out)
    assert sorted(stamps) == ["0", "1"]
    data = out / "results.zarr" / "final" / "Pi" / "c" / "0" / "0"
    data_stamp = data.stat().st_mtime_ns
    with distributed.get_task_stream(client) as stream:
        run_distributed(small(), out, client, resume=True, progress=False)
    assert _chunks_run(stream) == [2, 3, 4]
    assert {k: v for k, v in _markers(out).items() if k in stamps} == stamps
    assert data.stat().st_mtime_ns == data_stamp
    _assert_equal(load(out), reference)


def test_a_failing_chunk_is_named_and_resume_continues(client, reference, tmp_path, monkeypatch):
    """Chunk 3's marker cannot be written (a directory is in the way of its temporary file):
    its task fails on every retry, and the run stops naming chunk 3 and `--resume`; once the
    obstacle is gone, resuming completes the sweep."""
    out = tmp_path / "s"
    _interrupted(out, 0, monkeypatch)  # the store exists, no chunk finished
    (out / "done" / "3.tmp").mkdir()
    with pytest.raises(SweepTaskError, match=r"chunk 3 \(members 21\.\.27\).*--resume"):
        run_distributed(small(), out, client, resume=True, progress=False, retries=1)
    assert not (out / "done" / "3").exists()
    (out / "done" / "3.tmp").rmdir()
    run_distributed(small(), out, client, resume=True, progress=False)
    _assert_equal(load(out), reference)


_SPEC = """
case = "krysl-torque-free"
t_end = 1.0
chunk_size = 7
[[axes]]
kind = "grid"
parameter = "Omega1"
start = -0.5
stop = 0.5
num = 7
[[axes]]
kind = "values"
parameter = "Omega3"
values = [0.0, 0.05, 0.1, -0.2, 0.3]
"""


def test_command_on_a_local_cluster(reference, tmp_path, capsys):
    """`jaxrigid sweep --local-workers 2` end to end (in a subprocess, as a user runs it),
    equal to the in-process run; `--devices` with a cluster is a usage error (workers use
    their own devices)."""
    spec = tmp_path / "s.toml"
    spec.write_text(_SPEC)
    assert load_spec(spec).describe() == small().describe()
    args = ["sweep", str(spec), "--out", str(tmp_path / "o"), "--local-workers", "2"]
    assert main(args + ["--devices", "1"]) == 2
    assert "--devices applies to a run in this process" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    env = dict(os.environ, PYTHONPATH=os.getcwd(), **_worker_env())
    done = subprocess.run(
        [sys.executable, "-m", "jaxrigid", *args], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "35 members of krysl-torque-free" in done.stdout
    _assert_equal(load(tmp_path / "o"), reference)


# --- a worker killed mid-chunk ----------------------------------------------------------


def _slow() -> Sweep:
    """24 members in 6 chunks of 4, 50 000 steps: a chunk computes for about half a second."""
    axes = (Grid("Omega1", -0.5, 0.5, 6), Values("Omega3", (0.0, 0.05, 0.1, -0.2)))
    return Sweep("krysl-torque-free", axes=axes, t_end=500.0, chunk_size=4)


def _executing(dask_worker):
    """(pid, keys of the tasks the worker is executing), run on a worker by `client.run`."""
    return os.getpid(), [str(ts.key) for ts in dask_worker.state.executing]


@pytest.mark.slow  # kills workers and waits for the nanny's restarts (≈ 1 min)
def test_worker_killed_mid_chunk(client, tmp_path):
    """SIGKILL of a worker while it computes a chunk: the nanny restarts it, the chunk's task
    runs again, the sweep completes and equals the in-process run bit for bit, and no marker
    is written twice (each keeps the time it was first seen with)."""
    client.wait_for_workers(2)
    ref, out = tmp_path / "ref", tmp_path / "s"
    run(_slow(), ref, progress=False)
    failed: list = []
    driver = threading.Thread(
        target=lambda: _capture(failed, run_distributed, _slow(), out, client, progress=False)
    )
    driver.start()
    seen: dict = {}

    def watch():
        if (out / "done").exists():
            for name, mtime in _markers(out).items():
                seen.setdefault(name, mtime)

    kills = []  # (pid, chunk, whether its marker was absent just after the kill)
    deadline = time.monotonic() + 300
    while not any(k[2] for k in kills) and driver.is_alive() and time.monotonic() < deadline:
        watch()
        victim = _computing(client, out) if seen else None  # once compiled: chunks compute
        if victim and len(kills) < 3 and victim[0] not in {k[0] for k in kills}:
            os.kill(victim[0], signal.SIGKILL)
            kills.append((*victim, not (out / "done" / victim[1]).exists()))
        time.sleep(0.02)
    # a kill just after a marker was written (the task not yet reported) is retried too and
    # must find its chunk finished; the test needs one kill mid-chunk
    assert any(k[2] for k in kills), f"no worker was caught computing a chunk: {kills}"
    while driver.is_alive() and time.monotonic() < deadline:
        watch()
        time.sleep(0.02)
    driver.join(timeout=1)
    assert not failed, failed
    watch()
    assert sorted(seen, key=int) == [str(i) for i in range(6)]
    assert _markers(out) == seen
    _assert_equal(load(out), load(ref))
    client.wait_for_workers(2, timeout=120)  # the nanny started a new worker process
    pids = {pid for pid, _ in client.run(_executing).values()}
    assert not pids & {k[0] for k in kills}


def _computing(client, out):
    """`(pid, chunk)` of a worker executing a chunk not yet finished, or None."""
    try:
        workers = client.run(_executing).values()
    except Exception:  # a worker closing or starting: look again
        return None
    for pid, keys in workers:
        for chunk in (k.rsplit("-", 1)[1] for k in keys if "chunk" in k):
            if not (out / "done" / chunk).exists():
                return pid, chunk
    return None


def _capture(errors: list, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except BaseException as err:  # reported by the test thread
        errors.append(err)
