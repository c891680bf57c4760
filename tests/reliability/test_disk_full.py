"""Out of disk space: a build ends with one clear line and leaves nothing that reads as built
(a rerun with space succeeds); a file cache that cannot be written is skipped with a warning.

The small disk is a real one: a 160 KiB tmpfs where this test may mount one
(root), and everywhere a 16 KiB file size limit (RLIMIT_FSIZE, `ulimit -f`) on
the child process, under which writes fail with EFBIG ("File too large").
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap

import pytest
import tensorflow_datasets as tfds

from fast_tfds.cli import verify
from tests.helpers import TFDS_CLI, run_ok

ENV = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
SMALL = 160 * 1024  # bytes on the tmpfs: less than the 224 build of the test sample
SMALL_FILE = 16 * 1024  # bytes per file under the limit: less than one shard of it


class SmallDisk:
    """A folder where writing more than SMALL bytes fails, and a way to give it room."""

    def __init__(self, kind: str, folder):
        self.kind, self.folder = kind, folder
        self.limited = True
        folder.mkdir()
        if kind == "tmpfs":
            if os.geteuid() != 0:
                pytest.skip("mounting a tmpfs needs root; the file-size-limit case covers this")
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={SMALL}", "tmpfs", os.fspath(folder)],
                capture_output=True,
                timeout=60,
            )
            if done.returncode != 0:
                pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")

    def preexec(self):
        if self.kind == "rlimit" and self.limited:
            _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (SMALL_FILE, hard))
        return None

    def grow(self) -> None:
        self.limited = False
        if self.kind == "tmpfs":
            remount = ["mount", "-o", "remount,size=64m", os.fspath(self.folder)]
            subprocess.run(remount, check=True, timeout=60)

    def release(self) -> None:
        if self.kind == "tmpfs":
            subprocess.run(["umount", os.fspath(self.folder)], check=False, timeout=60)


@pytest.fixture(params=["tmpfs", "rlimit"])
def small_disk(request, tmp_path):
    disk = SmallDisk(request.param, tmp_path / "small")
    yield disk
    disk.release()


def test_a_build_that_runs_out_of_space_fails_in_one_line_and_a_rerun_succeeds(
    cats_sample, small_disk
):
    manual_dir, counts = cats_sample
    data_dir = small_disk.folder / "data"
    command = [*TFDS_CLI, "build", "cats_vs_dogs_fast", "--imports", "cats_vs_dogs_fast"]
    command += ["--config", "224", "--manual_dir", os.fspath(manual_dir)]
    command += ["--data_dir", os.fspath(data_dir)]

    full = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
        preexec_fn=small_disk.preexec(),
    )
    output = full.stdout + full.stderr
    assert full.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    errors = [line for line in output.splitlines() if "ERROR: " in line]
    assert len(errors) == 1, output[-3000:]
    reason = "No space left on device" if small_disk.kind == "tmpfs" else "File too large"
    assert (
        f"ERROR: cats_vs_dogs_fast: the build ran out of disk space in {data_dir} ({reason}); "
    ) in errors[0], errors[0]
    assert "Nothing of this build was kept" in errors[0]
    assert "run the same command again" in errors[0]
    # Nothing half-written is left: the config folder the build made went with it (and
    # with it any version or incomplete.* folder).
    assert not (data_dir / "cats_vs_dogs_fast" / "224").exists()
    builder = tfds.builder("cats_vs_dogs_fast", config="224", data_dir=data_dir)
    assert not builder.is_prepared()

    small_disk.grow()
    # The rerun, a fork of a server that has imported TensorFlow (`tests.forks`): it is an
    # ordinary build, which needs no interpreter of its own (the full one's limit does).
    run_ok(command, env=ENV, fork=True)
    builder = tfds.builder("cats_vs_dogs_fast", config="224", data_dir=data_dir)
    assert builder.info.splits["train"].num_examples == counts["expected_examples"]
    report = verify.verify_paths([data_dir])
    assert not report.problems and len(report.checked) == 1


# Two epochs with a file cache on the small disk, counting each epoch's examples.
_TRAIN = textwrap.dedent(
    """
    import sys
    import cats_vs_dogs_fast
    ds = cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=sys.argv[1], cache=sys.argv[2], batch_size=8,
        download_and_prepare=False,
    )
    for epoch in range(2):
        print("epoch", epoch, sum(int(images.shape[0]) for images, _ in ds), flush=True)
    """
)


def test_a_cache_that_cannot_be_written_is_skipped_and_training_goes_on(
    cats_data_dir, cats_filenames, small_disk
):
    cache = small_disk.folder / "cache"
    done = subprocess.run(
        [sys.executable, "-c", _TRAIN, os.fspath(cats_data_dir), os.fspath(cache)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
        preexec_fn=small_disk.preexec(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    n = len(cats_filenames)
    assert done.stdout.splitlines() == [f"epoch 0 {n}", f"epoch 1 {n}"]
    assert "not enough room for the cache" in done.stderr, done.stderr[-3000:]
    assert "reading without the cache" in done.stderr
    # Nothing but the (tiny) lock file was written.
    written = [p.name for p in small_disk.folder.iterdir()]
    assert all(name.endswith(".lock") for name in written), written
