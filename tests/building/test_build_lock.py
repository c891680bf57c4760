"""The build lock when a build fails: it removes the lock file it made, and a build that
was waiting on that file locks the new one, so that two builds never both hold the lock."""

from __future__ import annotations

import fcntl
import logging
import os
import threading

import pytest

from fast_tfds.building import guard


class Failed(Exception):
    pass


def test_a_failed_build_removes_its_lock_and_folder_and_a_waiting_build_relocks(tmp_path):
    dataset_dir = tmp_path / "data" / "cats_vs_dogs_fast"
    lock_path = dataset_dir / guard.LOCK_NAME
    first_holds, second_waits = threading.Event(), threading.Event()
    seen = {}

    class WaitingLogged(logging.Handler):
        def emit(self, record):
            if "waiting for it to finish" in record.getMessage():
                second_waits.set()

    def first():
        with pytest.raises(Failed), guard.build_lock(dataset_dir, "first"):
            first_holds.set()
            seen["second_waited_first"] = second_waits.wait(timeout=60)
            raise Failed
        seen["first_failed"] = True

    def second():
        assert first_holds.wait(timeout=60)
        with guard.build_lock(dataset_dir, "second") as waited:
            seen["waited"] = waited
            # The lock file at the path is the one this build holds: another build that
            # opens it now cannot lock it.
            other = os.open(lock_path, os.O_RDWR)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(other)
        seen["done"] = True

    handler = WaitingLogged()
    logging.getLogger("absl").addHandler(handler)
    try:
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
            assert not thread.is_alive()
    finally:
        logging.getLogger("absl").removeHandler(handler)
    # (Threads' exceptions do not fail a test: what each did is in `seen`.)
    assert seen == {
        "second_waited_first": True,
        "first_failed": True,
        "waited": True,
        "done": True,
    }
    # The second build succeeded: its lock file stays, as after any build that succeeds.
    assert lock_path.exists()


def test_a_failed_build_leaves_what_was_there_before(tmp_path):
    dataset_dir = tmp_path / "cats_vs_dogs_fast"
    (dataset_dir / "original").mkdir(parents=True)
    (dataset_dir / guard.LOCK_NAME).write_text("")  # left by an earlier build
    config_dir = dataset_dir / "224"
    with pytest.raises(Failed), guard.build_lock(dataset_dir, "failing"):
        with guard.removed_on_failure(config_dir, config_dir / "notes.txt"):
            config_dir.mkdir()
            (config_dir / "notes.txt").write_text("made by this build\n")
            raise Failed
    assert sorted(p.name for p in dataset_dir.iterdir()) == [guard.LOCK_NAME, "original"]


def test_a_folder_that_others_wrote_into_stays(tmp_path):
    made = tmp_path / "224"
    with pytest.raises(Failed), guard.removed_on_failure(made):
        made.mkdir()
        (made / "theirs").write_text("not named, so not removed\n")
        raise Failed
    assert (made / "theirs").exists()
