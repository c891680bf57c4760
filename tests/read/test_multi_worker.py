"""Multi-worker input: input_context (or shard_index/shard_count) shards files; the
example trains on two real workers."""

import json
import os
import socket
import subprocess
import sys

import pytest
import tensorflow as tf

import cats_vs_dogs_fast
import fast_tfds
from fast_tfds.building import MIN_SHARDS_PER_SPLIT
from tests.helpers import REPO, child_env
from tests.pairs import Truth, epoch

EXAMPLE = REPO / "examples" / "multi_worker_training.py"


@pytest.fixture(scope="module")
def shard_of(cats_builder) -> dict[str, str]:
    """{example filename: the shard file holding it}, read straight from the TFRecords."""
    split = cats_builder.info.splits["train"]
    assert split.num_shards == MIN_SHARDS_PER_SPLIT, "the fixture should have the full shards"
    spec = {"image/filename": tf.io.FixedLenFeature([], tf.string)}
    shard_of = {}
    for instruction in split.file_instructions:
        path = os.fspath(instruction.filename)
        for record in tf.data.TFRecordDataset(path):
            name = tf.io.parse_single_example(record, spec)["image/filename"].numpy().decode()
            shard_of[name] = os.path.basename(path)
    return shard_of


@pytest.mark.parametrize("via", ["input_context", "shard_index"])
@pytest.mark.parametrize("pipelines", [2, 3, 4, MIN_SHARDS_PER_SPLIT])
def test_each_pipeline_reads_its_own_files_and_together_every_example_once(
    cats_data_dir, shard_of, pipelines, via
):
    names_per_pipeline, everything = [], []
    for pipeline_id in range(pipelines):
        context = tf.distribute.InputContext(
            num_input_pipelines=pipelines,
            input_pipeline_id=pipeline_id,
            num_replicas_in_sync=pipelines,
        )
        share = (
            {"input_context": context}
            if via == "input_context"
            else {"shard_index": pipeline_id, "shard_count": pipelines}
        )
        ds = cats_vs_dogs_fast.as_fast_dataset(
            "train",
            data_dir=cats_data_dir,
            download_and_prepare=False,
            **share,
            batch_size=None,
            image_size=32,
            cache=False,
            as_supervised=False,
        )
        examples = epoch(ds)
        names_per_pipeline.append([ex.filename for ex in examples])
        everything += examples
    files_per_pipeline = [{shard_of[n] for n in names} for names in names_per_pipeline]
    for i, files in enumerate(files_per_pipeline):
        assert files, f"pipeline {i} of {pipelines} read nothing"
        for j in range(i):
            assert not files & files_per_pipeline[j], f"pipelines {j} and {i} share files"
    assert len(set().union(*files_per_pipeline)) == MIN_SHARDS_PER_SPLIT
    # Together: every example once, with its own label, filename and pixels.
    Truth.of(cats_data_dir).check(everything, size=32)
    # Files are dealt out evenly: 16 over 3 pipelines is 6, 5, 5.
    sizes = sorted(len(files) for files in files_per_pipeline)
    assert sizes[-1] - sizes[0] <= 1


def test_more_pipelines_than_files_is_a_clear_error(cats_data_dir):
    too_many = MIN_SHARDS_PER_SPLIT + 1
    context = tf.distribute.InputContext(
        num_input_pipelines=too_many, input_pipeline_id=0, num_replicas_in_sync=too_many
    )
    with pytest.raises(ValueError) as excinfo:
        cats_vs_dogs_fast.as_fast_dataset(
            "train", data_dir=cats_data_dir, download_and_prepare=False, input_context=context
        )
    message = str(excinfo.value)
    assert message.startswith(
        f"input_context: {too_many} input pipelines but only {MIN_SHARDS_PER_SPLIT} shard files"
    )
    assert "\n" not in message
    with pytest.raises(ValueError, match=f"^shard_count={too_many}: {too_many} input pipelines"):
        cats_vs_dogs_fast.as_fast_dataset(
            "train", data_dir=cats_data_dir, download_and_prepare=False, shard_count=too_many
        )


def test_input_context_gives_the_shard_and_a_different_shard_is_refused(cats_data_dir):
    context = tf.distribute.InputContext(
        num_input_pipelines=3, input_pipeline_id=1, num_replicas_in_sync=3
    )
    opts = fast_tfds.ReadOptions(input_context=context)
    assert (opts.shard_index, opts.shard_count) == (1, 3)
    assert fast_tfds.ReadOptions(input_context=context, shard_index=1, shard_count=3) == opts
    with pytest.raises(ValueError, match=r"^shard_index=0, shard_count=2: input_context gives 1"):
        fast_tfds.ReadOptions(input_context=context, shard_count=2)


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_the_example_trains_on_two_workers(cats_data_dir):
    """Two processes with TF_CONFIG, as on two machines: collectives and input sharding."""
    cluster = {"worker": [f"localhost:{port}" for port in free_ports(2)]}
    procs = []
    for index in range(2):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = child_env(TF_CONFIG=json.dumps(tf_config))
        command = [
            *(sys.executable, os.fspath(EXAMPLE), "--data-dir", os.fspath(cats_data_dir)),
            *("--steps", "2", "--epochs", "2", "--image-size", "32", "--batch-size", "8"),
        ]
        procs.append(
            subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        )
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=240)[0])
    finally:
        for proc in procs:
            proc.kill()
    for index, (proc, output) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode == 0, output[-3000:]
        assert "workers: 2, replicas in sync: 2" in output
        assert f"input pipeline {index} of 2: batches of 4 per replica" in output
    losses = [[line for line in out.splitlines() if line.startswith("epoch ")] for out in outputs]
    assert len(losses[0]) == 2
    assert losses[0] == losses[1], "the workers' losses are all-reduced, so they must agree"
