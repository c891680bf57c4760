"""A script that stops reading an endless iteration and ends exits, within 30 s of its last
batch: tf.data's threads call our numpy functions until the prefetch buffers are full,
and an iterator left to Python's finalization used to wait for good for a thread that
finalization had ended inside one (`fast_tfds.read.exit_iterators`). The hang came in
about half the runs on this sample before the fix, so each kind runs twice."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.bucket import emulated
from tests.bucket.conftest import TFRECORD, bucket  # noqa: F401  (a fixture)
from tests.children import Child
from tests.helpers import REPO, child_env
from tests.loader.conftest import cats_array_record_dir  # noqa: F401  (a fixture)

# From the line after the last batch to the end of the process (TensorFlow's own
# teardown takes a few seconds on a loaded 2-core machine).
EXIT_S = 30
RUNS = (1, 2)


def stops_and_exits(kind: str, data_dir, *extra, env=None) -> None:
    child = Child(
        [sys.executable, "-m", "tests.reliability.stop_reading", kind, str(data_dir), *extra],
        env=env or child_env(PYTHONPATH=os.fspath(REPO)),
        cwd=REPO,
    )
    child.line_starting("STOPPED")  # Bounded by the start-up timeout.
    try:
        child.wait(timeout=EXIT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(f"{kind}: still running {EXIT_S} s after its last batch")
    child.communicate()
    assert child.returncode == 0, child.stderr_text()[-3000:]


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("kind", ["plain", "augment", "keras", "drop-plain", "drop-augment"])
def test_a_tf_data_script_that_stops_reading_exits(kind, run, cats_data_dir):
    stops_and_exits(kind, cats_data_dir)


@pytest.mark.parametrize("run", RUNS)
def test_a_persisted_read_that_stops_exits(run, cats_data_dir, tmp_path):
    stops_and_exits("persist", cats_data_dir, tmp_path)


@pytest.mark.parametrize("run", RUNS)
def test_a_loader_with_workers_that_stops_exits(run, cats_array_record_dir):  # noqa: F811
    stops_and_exits("loader", cats_array_record_dir)


@pytest.mark.parametrize("run", RUNS)
def test_a_bucket_read_with_copies_that_stops_exits(run, bucket):  # noqa: F811
    env = emulated.child_env(bucket, PYTHONPATH=os.fspath(REPO))
    stops_and_exits("bucket", bucket.url(TFRECORD), env=env)
