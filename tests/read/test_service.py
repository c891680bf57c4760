"""as_fast_dataset(service=...) on a real tf.data service: in-process servers and the CLI."""

import collections
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf

import cats_vs_dogs_fast
from fast_tfds.cli import service as data_service
from tests.children import Child
from tests.helpers import child_env, filenames_of
from tests.pairs import Truth, epoch


def times_read(names) -> collections.Counter:
    """{times an example was read: how many examples were read that many times}."""
    return collections.Counter(collections.Counter(names).values())


@pytest.fixture(scope="module")
def cluster():
    """'grpc://localhost:PORT' of an in-process dispatcher with two registered workers."""
    dispatcher = data_service.start_dispatcher(port=0)
    address = dispatcher.target.removeprefix("grpc://")
    # A short heartbeat: stopping a worker otherwise waits up to ~20 s after the jobs.
    workers = [
        data_service.start_worker(address, port=0, advertise="localhost", heartbeat_interval_ms=200)
        for _ in range(2)
    ]
    deadline = time.monotonic() + 60
    while dispatcher._num_workers() < 2:  # Workers register asynchronously.
        assert time.monotonic() < deadline, "the workers did not register"
        time.sleep(0.1)
    yield dispatcher.target
    for worker in workers:
        worker._stop()
    dispatcher._stop()


def read(cats_data_dir, split="train", **options):
    return cats_vs_dogs_fast.as_fast_dataset(
        split, data_dir=cats_data_dir, download_and_prepare=False, as_supervised=False, **options
    )


@pytest.mark.parametrize("cache", [True, False])
def test_dynamic_sharding_reads_every_example_once_per_epoch(
    cluster, cats_data_dir, cats_filenames, cache
):
    # With the cache the second epoch comes from the client's memory, without
    # it from a second service job.
    ds = read(cats_data_dir, service=cluster, cache=cache, batch_size=7, num_epochs=2)
    assert ds.element_spec["image"].shape[1:] == (224, 224, 3)
    assert ds.element_spec["image"].dtype == tf.float32
    # Read to the end: a worker stops slowly while a job is unfinished.
    examples = epoch(ds)
    assert times_read(ex.filename for ex in examples) == {2: len(cats_filenames)}
    Truth.of(cats_data_dir).check(examples, times=2)


def test_sharding_off_makes_every_worker_read_everything(cluster, cats_data_dir, cats_filenames):
    # The counterpart of the test above: proof that two workers served the job,
    # and that the exactly-once check would catch duplicates.
    names = filenames_of(read(cats_data_dir, service=cluster, service_sharding="off", cache=False))
    assert times_read(names) == {2: len(cats_filenames)}


def test_slices_and_input_pipelines_through_the_service(cluster, cats_data_dir, cats_filenames):
    local = filenames_of(read(cats_data_dir, "train[:40%]", cache=False))
    remote = filenames_of(read(cats_data_dir, "train[:40%]", service=cluster, cache=False))
    assert sorted(remote) == sorted(local) and len(set(remote)) == len(remote)

    seen = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline_id, num_replicas_in_sync=2
        )
        ds = read(cats_data_dir, service=cluster, input_context=context, batch_size=4)
        seen.append(filenames_of(ds))
    assert seen[0] and seen[1] and not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == cats_filenames


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("options", "message_start"),
    [
        ({"service": "localhost"}, "service='localhost': expected"),
        ({"service": "http://localhost:5050"}, "service='http://localhost:5050': expected"),
        ({"service": "localhost:99999"}, "service='localhost:99999': expected"),
        ({"service": 5050}, "service=5050: expected"),
        ({"service": "CLUSTER", "service_sharding": "file"}, "service_sharding='file'"),
        ({"service": "CLUSTER", "deterministic": True}, "deterministic=True"),
        ({"service": "NOBODY"}, "service='grpc://localhost:"),
    ],
)
def test_bad_service_options_raise_one_line_value_errors(
    cluster, cats_data_dir, options, message_start
):
    if options["service"] == "CLUSTER":
        options["service"] = cluster
    elif options["service"] == "NOBODY":
        options["service"] = f"grpc://localhost:{free_port()}"  # Nothing listens there.
    with pytest.raises(ValueError) as excinfo:
        read(cats_data_dir, **options)
    message = str(excinfo.value)
    assert message.startswith(message_start) and "\n" not in message, message
    if message_start.startswith("service='grpc"):
        assert "no dispatcher answers" in message and "fast-tfds service dispatcher" in message


# -- the command line ----------------------------------------------------------


def spawn(*args: str) -> Child:
    """Starts `fast-tfds service ...` in its own process."""
    return Child(
        [sys.executable, "-m", "fast_tfds.cli", "service", *args],
        stderr=subprocess.STDOUT,
        env=child_env(),
    )


def started_line(proc: Child) -> str:
    """The server's 'tf.data service ... at HOST:PORT' line, once it is up."""
    return proc.line_starting("tf.data service")[0]


def test_cli_dispatcher_and_worker_serve_an_epoch(cats_data_dir, cats_filenames):
    port = free_port()
    # Both at once, as on a cluster: the worker retries until the dispatcher is up.
    # --advertise localhost: the machine's own name may not resolve on CI.
    procs = [
        spawn("dispatcher", "--port", str(port)),
        spawn(
            "worker", "--dispatcher", f"localhost:{port}", "--port", "0", "--advertise", "localhost"
        ),
    ]
    try:
        assert started_line(procs[0]).startswith("tf.data service dispatcher listening at grpc://")
        assert started_line(procs[1]).startswith("tf.data service worker at localhost:")
        # The test process runs no worker: the epoch can only come from the CLI's.
        names = filenames_of(read(cats_data_dir, service=f"localhost:{port}", cache=False))
        assert sorted(names) == cats_filenames
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(timeout=30)


def test_cli_rejects_a_bad_dispatcher_address():
    done = subprocess.run(
        [sys.executable, "-m", "fast_tfds.cli", "service", "worker", "--dispatcher", "nope"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("--dispatcher='nope': expected")
