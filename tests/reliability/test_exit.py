"""A script that stops reading an endless iteration and ends exits, within 30 s of its last
batch: tf.data's threads call our numpy functions until the prefetch buffers are full,
and an iterator left to Python's finalization used to wait for good for a thread that
finalization had ended inside one (`fast_tfds.read.exit_iterators`). The hang came in
about half the runs on this sample before the fix, so each kind runs twice."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from fast_tfds.cache import persisted
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


# A persistent fill completed during exit (by a tf.data thread's last call while
# `close_all` closes the iterators, or a loader's while it is closed), after the
# interpreter joined its threads: its writer checksums a 64 MiB byte column, in
# `cv2.sumElems` with the GIL released, then writes the file out.
LATE_FILL = """
import atexit, sys
from pathlib import Path
import numpy as np
from fast_tfds.cache import persisted
from fast_tfds.cache.store import Store

if sys.argv[1] == "tf.data":
    import tensorflow  # noqa: F401  (imported first: close_all then takes no time)
    from fast_tfds.read import exit_iterators
    exit_iterators.close_at_exit()
else:
    import fast_tfds.loader.pipeline  # noqa: F401  (registers the loader's exit hook)

def fill():
    plan = lambda: (256, False)
    opened = persisted.open_or_plan(Path(sys.argv[2]), KEY, plan, what="toy train")
    store = Store(256, {"image": ((512, 512), np.uint8)}, None, opened.backing)
    store.write(np.arange(256), np.full((256, 512, 512), 7, np.uint8))
    print("FILLED", flush=True)

KEY = {"dataset": "toy/1/1.0.0", "split": "train", "shards": []}
# Registered after the back end's hook, so run before it.
atexit.register(fill)
"""


@pytest.mark.parametrize("hook", ["tf.data", "loader"])
def test_a_fill_completed_during_exit_is_written_out_before_finalization(hook, tmp_path):
    """The back ends' exit hooks wait for a persistent file that their pipelines' last
    calls completed (`persisted.finish_writing`). Left to finalization, its writer was
    ended where it next took the GIL: no file, or, inside `cv2.sumElems`, SIGABRT
    (`terminate called without an active exception`), as now and then to a persisted
    read that stopped."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LATE_FILL), hook, os.fspath(tmp_path)],
        env=child_env(PYTHONPATH=os.fspath(REPO)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["FILLED"]
    key = {"dataset": "toy/1/1.0.0", "split": "train", "shards": []}
    served = persisted.open_or_plan(tmp_path, key, None, what=None)
    assert served.filled, served.why
    assert (served.backing.rows["feature/image"] == 7).all()
