"""The sweep store verifies its data (issue 32): a chunk counts as finished only when its
completion record belongs to the store and every array's rows verify against the record's
digests. Each kind of damage is detected by `load`, `verify` and `jaxrigid sweep verify`, and
`--resume` computes exactly the damaged chunks again, ending bit for bit equal to an
uninterrupted run (the same compiled program on the same members' inputs: equality, not a
tolerance, is the claim).

One reference store is run once per module and copied for each test; every resume reuses the
same compiled chunk program (the sweep's program cache), so the module builds one program.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from jaxrigid.cli import main
from jaxrigid.sweep import Grid, Sweep, SweepStoreError, Values, load, run, verify
from jaxrigid.sweep.store import Store

AXES = (Grid("Omega1", -0.5, 0.5, 7), Values("Omega3", (0.0, 0.05, 0.1, -0.2, 0.3)))
SIZE = 7  # 35 members in 5 chunks of 7


def small(axes=AXES) -> Sweep:
    return Sweep("krysl-torque-free", axes=axes, t_end=1.0, chunk_size=SIZE)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """`(path, data)`: an uninterrupted run and what `load` gives."""
    path = tmp_path_factory.mktemp("reference") / "s"
    run(small(), path, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an intact store loads without a warning
        data = load(path)
    assert data["finished"].all()
    return path, data


@pytest.fixture
def copy(reference, tmp_path):
    out = tmp_path / "s"
    shutil.copytree(reference[0], out)
    (out / "lock").unlink()  # as after a clean exit: the lock file is the writer's
    return out


def _chunk_file(out, name, index):
    return out / "results.zarr" / name / "c" / str(index) / "0"


def _assert_equal(data, expected):
    assert data.keys() == expected.keys()
    for k in expected:
        np.testing.assert_array_equal(data[k], expected[k], err_msg=k)


def _members(data, chunks):
    """The flat member mask of `chunks`."""
    mask = np.zeros(data["finished"].size, bool)
    for i in chunks:
        mask[i * SIZE : (i + 1) * SIZE] = True
    return mask.reshape(data["finished"].shape)


# each damage: (what is done to the copy, the chunks it damages, what the message names)
def _delete_chunk_file(out):
    _chunk_file(out, "final/Pi", 2).unlink()


def _overwrite_with_garbage(out):
    _chunk_file(out, "final/Pi", 3).write_bytes(os.urandom(200))


def _overwrite_with_another_chunk(out):  # decodes cleanly: only the digest tells
    shutil.copy(_chunk_file(out, "final/Pi", 0), _chunk_file(out, "final/Pi", 1))


def _delete_array(out):
    shutil.rmtree(out / "results.zarr" / "drift_max" / "H")


def _overwrite_array_metadata(out):
    (out / "results.zarr" / "final" / "Pi" / "zarr.json").write_text("{not json")


DAMAGE = [
    (_delete_chunk_file, [2], r"chunk 2 \(members 14..20\): final/Pi \(final/Pi/c/2/0\) differs"),
    (_overwrite_with_garbage, [3], r"chunk 3 \(members 21..27\): final/Pi/c/3/0 cannot be read"),
    (_overwrite_with_another_chunk, [1], r"chunk 1 \(members 7..13\): final/Pi .*differs"),
    (_delete_array, [0, 1, 2, 3, 4], r"chunk 0 \(members 0..6\): array drift_max/H is missing"),
    (_overwrite_array_metadata, [0, 1, 2, 3, 4], r"chunk 0 .*array final/Pi is missing or unr"),
]


@pytest.mark.parametrize(
    "damage, chunks, message", DAMAGE, ids=lambda x: getattr(x, "__name__", "")
)
def test_damage_is_detected_and_resume_restores_it(reference, copy, damage, chunks, message):
    _, expected = reference
    damage(copy)
    # verify: the damaged chunks named, the others finished
    states = verify(copy)
    assert [c.index for c in states if c.state == "damaged"] == chunks
    assert all(c.state == "finished" for c in states if c.index not in chunks)
    # load: refuses by choice, or marks the damaged members unfinished (and fills them) loudly
    with pytest.raises(SweepStoreError, match=message):
        load(copy, on_damage="raise")
    with pytest.warns(UserWarning, match=message):
        data = load(copy)
    bad = _members(data, chunks)
    assert (data["finished"] == ~bad).all()
    assert np.isnan(data["final/Pi"][bad]).all()
    np.testing.assert_array_equal(data["final/Pi"][~bad], expected["final/Pi"][~bad])
    # resume computes exactly those chunks again: bit for bit the uninterrupted run
    records = {i: (copy / "done" / str(i)).stat().st_mtime_ns for i in range(5) if i not in chunks}
    with pytest.warns(UserWarning, match=rf"{len(chunks)} damaged chunk\(s\) computed again"):
        run(small(), copy, resume=True, progress=False)
    assert {i: (copy / "done" / str(i)).stat().st_mtime_ns for i in records} == records
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _assert_equal(load(copy), expected)


def test_the_command_reports_each_chunk(reference, copy, capsys):
    assert main(["sweep", "verify", str(reference[0])]) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith("35 members in 5 chunks: 5 finished, 0 missing, 0 damaged")
    )
    _delete_chunk_file(copy)
    (copy / "done" / "4").unlink()
    assert main(["sweep", "verify", str(copy)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("chunk 2 (members 14..20) damaged: final/Pi (final/Pi/c/2/0)")
    assert lines[1] == "chunk 4 (members 28..34) missing"
    assert lines[2].endswith("35 members in 5 chunks: 3 finished, 1 missing, 1 damaged")
    # a store with unfinished chunks only is not damaged
    (copy / "done" / "2").unlink()
    assert main(["sweep", "verify", str(copy)]) == 0
    assert main(["sweep", "verify", str(copy.parent / "none")]) == 2
    assert "holds no sweep store" in capsys.readouterr().err
    assert main(["sweep", "verify"]) == 2
    assert "usage: jaxrigid sweep verify DIR" in capsys.readouterr().err
    assert main(["sweep", "verify", str(copy), "--resume"]) == 2
    assert main(["sweep", "spec.toml", str(copy)]) == 2
    assert "unexpected argument" in capsys.readouterr().err


def test_unfinished_members_are_filled_even_where_a_write_began(reference, copy):
    """A chunk without a record (a writer killed during its arrays) may hold some of its rows:
    `load` fills them, so an unfinished member never looks like a result."""
    (copy / "done" / "1").unlink()
    data = load(copy)
    bad = _members(data, [1])
    assert (data["finished"] == ~bad).all()
    assert np.isnan(data["final/Pi"][bad]).all() and (data["outcome/result"][bad] == -1).all()


def test_records_of_a_deleted_store_are_not_trusted(reference, copy):
    """The store deleted and its records kept: a plain run computes everything (it exited 0
    having computed nothing) — here with another spec, whose results are its own."""
    shutil.rmtree(copy / "results.zarr")
    other = small(axes=(Grid("Omega1", -0.3, 0.3, 7), AXES[1]))
    run(other, copy, progress=False)
    data, fresh = load(copy), copy.parent / "fresh"
    run(other, fresh, progress=False)
    _assert_equal(data, load(fresh))
    assert not np.array_equal(data["final/Pi"], reference[1]["final/Pi"])


def test_a_record_from_another_store_is_not_trusted(reference, copy, tmp_path):
    second = tmp_path / "second"  # the same sweep, another store (another store_id)
    run(small(), second, progress=False)
    (second / "done" / "3").unlink()
    shutil.copy(copy / "done" / "3", second / "done" / "3")
    state = verify(second)[3]
    assert (state.state, state.why) == ("missing", "its record belongs to another store (ignored)")
    assert not load(second)["finished"].ravel()[21:28].any()
    run(small(), second, resume=True, progress=False)
    _assert_equal(load(second), reference[1])


def test_a_record_of_other_members_or_garbage_is_not_trusted(copy):
    shutil.copy(copy / "done" / "1", copy / "done" / "2")
    (copy / "done" / "3").write_text("21 28\n")  # an old-style marker: no digests
    states = verify(copy)
    assert states[2].why == "its record covers other members (7..14)"
    assert states[3].why.startswith("its record is not a completion record")
    assert [c.state for c in states] == ["finished", "finished", "missing", "missing", "finished"]


def test_damaged_store_metadata_is_named(copy):
    meta = copy / "results.zarr" / "zarr.json"
    text = meta.read_text()
    meta.write_text(text[: len(text) // 2])
    with pytest.raises(SweepStoreError, match=r"metadata .*results.zarr/zarr.json cannot be read"):
        load(copy)
    # attributes edited by hand (the step): the records' fingerprint no longer matches
    doc = json.loads(text)
    doc["attributes"]["dt"] = 0.02
    meta.write_text(json.dumps(doc))
    with pytest.raises(SweepStoreError, match="fingerprint does not match"):
        load(copy)
    with pytest.raises(ValueError, match="on_damage must be 'unfinished' or 'raise', got 'skip'"):
        load(copy, on_damage="skip")


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from jaxrigid.sweep.store import Store
    store = Store.open(sys.argv[1], mode="r+").lock()
    print("locked", flush=True)
    time.sleep(600)
    """
)


def test_a_second_writer_is_refused_and_a_killed_one_leaves_no_lock(reference, copy):
    _delete_chunk_file(copy)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(copy)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        pid = holder.pid
        with pytest.raises(
            SweepStoreError, match=rf"being written by another process \(pid {pid} on"
        ):
            run(small(), copy, resume=True, progress=False)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the kernel released the killed holder's lock: resume goes on and restores the store
    with pytest.warns(UserWarning, match="computed again"):
        run(small(), copy, resume=True, progress=False)
    _assert_equal(load(copy), reference[1])


def test_a_store_is_locked_while_it_is_written(copy):
    store = Store.open(copy, mode="r+").lock()
    try:
        with pytest.raises(SweepStoreError, match=r"being written by another process \(pid"):
            Store.open(copy, mode="r+").lock()
    finally:
        store.close()
    Store.open(copy, mode="r+").lock().close()  # released


def test_a_failed_creation_releases_its_lock(tmp_path, monkeypatch):
    """Creation takes the lock before it writes; when a write fails (here zarr's, as on a
    full disk), the lock is released, so this process can retry at once."""
    import zarr

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(zarr, "open_group", full)
    out = tmp_path / "s"
    with pytest.raises(SweepStoreError, match="cannot create the sweep store .*No space left"):
        Store.create(out, {}, {"x": ((), "float64")}, 4, 2)
    monkeypatch.undo()
    Store.create(out, {}, {"x": ((), "float64")}, 4, 2).close()  # not "being written"
