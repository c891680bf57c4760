"""`ObjectCopies` (`fast_tfds.cache.remote.copies`) with a stand-in for gcsfs: the order
and number of copies at a time, the bounded wait, the one-line errors, the folder's life.
(The copies from an emulated bucket, through both readers, are tests/bucket's.)"""

from __future__ import annotations

import errno
import gc
import os
import threading
import time

import pytest

from fast_tfds.cache.remote import copies as remote_copies
from fast_tfds.cache.remote.copies import ObjectCopies
from fast_tfds.cache.remote.object_stores import GCS, BucketReadError, ObjectStore

# Every wait here is bounded; generous, for a busy machine.
WAIT_S = 60
FILES = [f"gs://bucket/build/shard-{k:05d}" for k in range(6)]


class FakeBucket:
    """gcsfs's `get_file` for objects whose bytes are their names; each copy waits for
    its object's release (`release`), or fails with what `errors` holds for it."""

    def __init__(self, *, released: bool = True):
        self.lock = threading.Lock()
        self.started: list[str] = []
        self.running = 0
        self.most_running = 0
        self.errors: dict[str, BaseException] = {}
        self.releases: dict[str, threading.Event] = {}
        self.released = released

    def release(self, name: str) -> None:
        self._event(name).set()

    def _event(self, name: str) -> threading.Event:
        with self.lock:
            if name not in self.releases:
                self.releases[name] = threading.Event()
                if self.released:
                    self.releases[name].set()
            return self.releases[name]

    def get_file(self, rpath, lpath, callback=None, concurrency=None):
        with self.lock:
            self.started.append(rpath)
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            if not self._event(rpath).wait(WAIT_S):
                raise TimeoutError(f"{rpath} never released")
            if rpath in self.errors:
                raise self.errors[rpath]
            data = rpath.encode()
            with open(lpath, "wb") as f:
                f.write(data)
            if callback is not None:
                callback.relative_update(len(data))
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def bucket(monkeypatch, tmp_path):
    fake = FakeBucket()
    monkeypatch.setattr(ObjectStore, "client", lambda self: fake)
    monkeypatch.setenv("TMPDIR", os.fspath(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # TMPDIR is read again
    return fake


def name(k: int) -> str:
    return FILES[k].removeprefix("gs://")


def test_copies_run_in_the_order_asked_for(bucket, monkeypatch):
    monkeypatch.setattr(remote_copies, "PARALLEL_COPIES", 1)
    copies = ObjectCopies(GCS, FILES, timeout_s=WAIT_S)
    order = [3, 1, 4, 0, 5, 2]
    for k in order:
        copies.start(k)
    for k in order:
        local = copies.wait(k)
        assert open(local, "rb").read() == name(k).encode()
        assert os.path.dirname(local) == copies.folder
    assert bucket.started == [name(k) for k in order]
    copies.start(3)  # asked for again: copied once
    assert copies.wait(3) and len(bucket.started) == len(order)


def test_at_most_parallel_copies_run_at_a_time(bucket, monkeypatch):
    monkeypatch.setattr(remote_copies, "PARALLEL_COPIES", 2)
    bucket.released = False
    copies = ObjectCopies(GCS, FILES, timeout_s=WAIT_S)
    for k in range(len(FILES)):
        copies.start(k)
    deadline = time.monotonic() + WAIT_S
    while bucket.running < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # time for a third copy to start, were it allowed to
    assert sorted(bucket.started) == [name(0), name(1)]
    for k in range(len(FILES)):
        bucket.release(name(k))
    for k in range(len(FILES)):
        assert copies.wait(k)
    assert bucket.most_running == 2 and len(bucket.started) == len(FILES)


def test_a_copy_that_gets_nothing_ends_the_wait_with_one_line(bucket):
    bucket.released = False
    copies = ObjectCopies(GCS, FILES, timeout_s=0.5)
    with pytest.raises(BucketReadError) as caught:
        copies.wait(2)
    message = str(caught.value)
    assert message.startswith(f"{FILES[2]}: the bucket gave no records within 0.5 s")
    assert "FAST_TFDS_BUCKET_READ_TIMEOUT_S=SECONDS" in message and "\n" not in message
    bucket.release(name(2))


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (FileNotFoundError("b/build/shard-00001"), "reading it from the bucket failed ("),
        (OSError(errno.ENOSPC, "No space left on device"), "no room for its local copy in "),
    ],
)
def test_a_failed_copy_is_one_line_naming_the_object(bucket, error, says):
    bucket.errors[name(1)] = error
    copies = ObjectCopies(GCS, FILES, timeout_s=WAIT_S)
    with pytest.raises(BucketReadError) as caught:
        copies.wait(1)
    message = str(caught.value)
    assert message.startswith(f"{FILES[1]}: {says}"), message
    assert "\n" not in message
    assert copies.wait(0)  # the other objects are still copied
    assert not [p for p in os.listdir(copies.folder) if p.endswith(".partial")]


def test_the_folder_goes_with_the_copies(bucket):
    copies = ObjectCopies(GCS, FILES, timeout_s=WAIT_S, opener=os.path.getsize)
    assert copies.folder is None  # nothing made before a copy is asked for
    assert copies.wait(0) == len(name(0))  # what `opener` made of the copy
    folder = copies.folder
    assert os.path.isdir(folder)
    del copies
    deadline = time.monotonic() + WAIT_S  # the copying thread lets go as it ends
    while os.path.exists(folder) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert not os.path.exists(folder)


def test_copies_asked_for_ahead_wait_for_those_a_reader_asks_for(bucket, monkeypatch):
    """Copies asked for ahead (as a dataset is opened) run after every copy a reader asked
    for, and one a reader asks for moves to the reader's turn: the reader's order first."""
    monkeypatch.setattr(remote_copies, "PARALLEL_COPIES", 1)
    bucket.released = False
    copies = ObjectCopies(GCS, FILES, timeout_s=WAIT_S)
    for k in range(4):
        copies.start(k, ahead=True)
    deadline = time.monotonic() + WAIT_S
    while not bucket.started and time.monotonic() < deadline:
        time.sleep(0.01)
    copies.start(5)
    copies.start(2)
    copies.start(2, ahead=True)  # asked for by a reader already: stays in the reader's turn
    for k in range(len(FILES)):
        bucket.release(name(k))
    for k in (5, 2, 1, 3, 0):
        assert open(copies.wait(k), "rb").read() == name(k).encode()
    assert bucket.started == [name(k) for k in (0, 5, 2, 1, 3)]


def test_closed_copies_stop_and_their_folder_goes(bucket, monkeypatch):
    """`close` (an opening that failed, copies no reader took): the queued copies never
    start, a wait for one is the one line of a failed read, and the folder goes, the
    copies in flight's files included."""
    monkeypatch.setattr(remote_copies, "PARALLEL_COPIES", 2)
    bucket.released = False
    copies = ObjectCopies(GCS, FILES, timeout_s=WAIT_S)
    for k in range(len(FILES)):
        copies.start(k, ahead=True)
    deadline = time.monotonic() + WAIT_S
    while bucket.running < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    folder = copies.folder
    copies.close()
    for k in range(len(FILES)):
        bucket.release(name(k))
    with pytest.raises(BucketReadError) as caught:
        copies.wait(4)
    message = str(caught.value)
    assert message.startswith(
        f"{FILES[4]}: reading it from the bucket failed (its copies were dropped)"
    )
    assert "\n" not in message
    with pytest.raises(BucketReadError):
        copies.wait(0)  # in flight when closed: its copy is not kept
    copies.start(5)  # asked for after `close`: nothing starts
    deadline = time.monotonic() + WAIT_S
    while (bucket.running or os.path.exists(folder)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(folder)
    assert sorted(bucket.started) == [name(0), name(1)]


def test_each_download_is_a_started_and_a_landed_record(bucket, caplog):
    """The copies' timeline (`copies.timeline`, DEBUG): a record as each download starts and
    one as it lands, naming the object; a failed one never lands."""
    bucket.errors[name(1)] = OSError("gone")
    copies = ObjectCopies(GCS, FILES[:3], timeout_s=WAIT_S)
    with caplog.at_level("DEBUG", logger=remote_copies.timeline.name):
        for k in range(3):
            copies.start(k)
        copies.wait(0)
        copies.wait(2)
        with pytest.raises(BucketReadError):
            copies.wait(1)
    marks = sorted(
        (r.args[0], getattr(r, remote_copies.PHASE))
        for r in caplog.records
        if hasattr(r, remote_copies.PHASE)
    )
    assert marks == [
        (FILES[0], "landed"),
        (FILES[0], "started"),
        (FILES[1], "started"),
        (FILES[2], "landed"),
        (FILES[2], "started"),
    ]
