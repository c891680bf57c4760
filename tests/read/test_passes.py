"""Epochs are passes: a pass's epoch is the number of passes completed before it, and
every epoch's order, crops and size come from (seed, epoch).

ProgressiveResize makes the epoch visible in each batch's size. A peek, an iterator
dropped mid-epoch, or a new dataset (an empty cache, as in a new process) resumed with
`set_epoch` must give the batches an uninterrupted run gives.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf

import fast_tfds
from fast_tfds.augment.progressive import ProgressiveResize
from fast_tfds.augment.spec import Augment
from fast_tfds.core.passes import find_clock
from tests.helpers import child_env, run_ok
from tests.pairs import digest
from tests.read.reading import read

SIZES = ProgressiveResize(start=32, end=96, start_epoch=0, end_epoch=2, step=32)


def progressive(data_dir, cache, **options):
    return read(
        data_dir,
        image_size=SIZES,
        augment=Augment.train(),
        cache=cache,
        seed=5,
        with_index=True,
        **options,
    )


def batches(ds, count=None):
    """[(images, index)] of one pass (or of `count` batches of a new iterator)."""
    it = iter(ds)
    out = []
    for element in it:
        out.append((element[0].numpy(), element[-1].numpy()))
        if count is not None and len(out) == count:
            break
    return out


def same(a, b) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x, y) and np.array_equal(i, j) for (x, i), (y, j) in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("cache", [True, False])
def test_peeks_and_dropped_iterators_do_not_move_the_epoch(cache, cats_data_dir):
    ds = progressive(cats_data_dir, cache)
    first = batches(ds, 1)
    next(iter(ds))  # A peek, as the README's and Keras' shape reads.
    it = iter(ds)
    next(it)
    next(it)
    del it  # Dropped mid-epoch: completes nothing.
    epochs = [batches(ds) for _ in range(3)]
    assert [e[0][0].shape[1] for e in epochs] == [32, 64, 96]
    assert same(first, epochs[0][:1]), "a peek sees the first batch of epoch 0"


@pytest.mark.parametrize("cache", [True, False])
def test_a_resumed_run_gives_the_batches_of_an_uninterrupted_one(cache, cats_data_dir):
    ds = progressive(cats_data_dir, cache)
    epochs = [batches(ds) for _ in range(3)]
    # A new dataset (its cache empty, as in a new process) started at epoch 1.
    resumed = progressive(cats_data_dir, cache)
    fast_tfds.set_epoch(resumed, 1)
    assert same(batches(resumed), epochs[1])
    assert same(batches(resumed), epochs[2])
    # Mid-epoch: from batch 2 on, and one pass's worth of batches from there.
    mid = progressive(cats_data_dir, cache)
    fast_tfds.set_epoch(mid, 1, 2)
    assert same(batches(mid), epochs[1][2:] + epochs[2][:2])
    # Epoch 0 resumed mid-way: the fill's order is (seed, epoch 0)'s too.
    start = progressive(cats_data_dir, cache)
    fast_tfds.set_epoch(start, 0, 3)
    assert same(batches(start)[: len(epochs[0]) - 3], epochs[0][3:])


@pytest.mark.parametrize("options", [{}, {"cache": False}, {"persist": True}])
def test_resumed_shuffled_epochs_without_augment_repeat(options, cats_data_dir, tmp_path):
    if options.get("persist"):
        options = {**options, "cache_dir": os.fspath(tmp_path)}
    ds = read(cats_data_dir, seed=3, with_index=True, **options)
    epochs = [batches(ds) for _ in range(3)]
    assert not same(epochs[1], epochs[2])
    for epoch in range(3):
        resumed = read(cats_data_dir, seed=3, with_index=True, **options)
        fast_tfds.set_epoch(resumed, epoch)
        assert same(batches(resumed), epochs[epoch]), f"epoch {epoch}"


def test_repeat_n_runs_consecutive_epochs_from_the_clock(cats_data_dir):
    single = progressive(cats_data_dir, True)
    epochs = [batches(single) for _ in range(3)]
    repeated = progressive(cats_data_dir, True, num_epochs=3)
    assert same(batches(repeated), epochs[0] + epochs[1] + epochs[2])
    # The next iteration goes on at epoch 3: the size stays the largest.
    assert batches(repeated, 1)[0][0].shape[1] == 96


def test_endless_reads_resume_at_a_batch_position(cats_data_dir):
    per_epoch = len(batches(progressive(cats_data_dir, False)))
    run = iter(progressive(cats_data_dir, False, num_epochs=None))
    uninterrupted = [next(run) for _ in range(2 * per_epoch + 3)]
    resumed = progressive(cats_data_dir, False, num_epochs=None)
    find_clock(resumed).set_position(per_epoch + 2)
    it = iter(resumed)
    for expected in uninterrupted[per_epoch + 2 :]:
        got = next(it)
        assert np.array_equal(got[0], expected[0]) and np.array_equal(got[-1], expected[-1])


def test_the_clock_is_found_through_later_transformations(cats_data_dir):
    ds = read(cats_data_dir, seed=1)
    later = ds.map(lambda x, y: (x, y)).prefetch(1)
    fast_tfds.set_epoch(later, 2)
    assert find_clock(ds).start().epoch == 2


def test_an_iterator_checkpoint_fails_rather_than_saving_a_wrong_position(cats_data_dir, tmp_path):
    it = iter(read(cats_data_dir, seed=1))
    next(it)
    checkpoint = tf.train.Checkpoint(iterator=it)
    with pytest.raises(tf.errors.FailedPreconditionError, match="is stateful"):
        checkpoint.save(os.fspath(tmp_path / "ckpt"))


RESUMED_CHILD = """
import json, sys
import cats_vs_dogs_fast, fast_tfds
from fast_tfds.augment.progressive import ProgressiveResize
from fast_tfds.augment.spec import Augment
from tests.pairs import digest
ds = cats_vs_dogs_fast.as_fast_dataset(
    "train", data_dir=sys.argv[1], download_and_prepare=False, batch_size=8, dtype="uint8",
    image_size=ProgressiveResize(start=32, end=96, start_epoch=0, end_epoch=2, step=32),
    augment=Augment.train(), seed=5, with_index=True, cache=sys.argv[2] == "cache")
fast_tfds.set_epoch(ds, 1, 2)
print(json.dumps([[digest(x.numpy()), k.numpy().tolist()] for x, _, k in ds]))
"""


@pytest.mark.parametrize("cache", ["cache", "stream"])
def test_a_new_process_resumes_where_an_uninterrupted_run_is(cache, cats_data_dir):
    ds = progressive(cats_data_dir, cache == "cache")
    epochs = [batches(ds) for _ in range(3)]
    out = run_ok(
        [sys.executable, "-c", RESUMED_CHILD, os.fspath(cats_data_dir), cache], env=child_env()
    )
    line = next(line for line in out.splitlines() if line.startswith("[["))
    expected = [[digest(x), i.tolist()] for x, i in epochs[1][2:] + epochs[2][:2]]
    assert json.loads(line) == expected


def _relabel(example):  # a user's transform: its examples go to the arena of examples
    return {**example, "label": example["label"] + 10}


def test_an_arena_of_examples_persists_under_the_one_key_and_is_served(cats_data_dir, tmp_path):
    # A transform's output (plan: arena of examples, as tests/read/test_epochs.py checks) is
    # kept as features (the key's `pictures: false`); a new reader
    # of the same options serves each epoch from the file, with the shards zeroed (their
    # sizes and times kept, so the key still matches and no record could be read).
    from fast_tfds.cache import housekeeping, persistent_format
    from fast_tfds.cache.persistent_format import read_header

    data_dir = tmp_path / "data"
    shutil.copytree(cats_data_dir / "cats_vs_dogs_fast" / "224", data_dir / "cats_vs_dogs_fast/224")
    options = {"seed": 3, "with_index": True, "transform": _relabel, "persist": True}
    options["cache_dir"] = os.fspath(tmp_path / "cache")
    first = read(data_dir, **options)
    epochs = [batches(first) for _ in range(2)]
    for thread in threading.enumerate():  # the file is written out after the fill
        if thread.name == "fast_tfds persist":
            thread.join(timeout=300)
    (found,) = housekeeping.find(tmp_path / "cache", persistent_format.PERSISTENT)
    fd = os.open(found.where, os.O_RDONLY)
    assert found.spent is None and read_header(fd).layout.key["kind"] == "pictures"
    os.close(fd)
    for shard in (data_dir / "cats_vs_dogs_fast/224").glob("*/*.tfrecord*"):
        stat = shard.stat()
        shard.write_bytes(bytes(stat.st_size))
        os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    served = read(data_dir, **options)
    assert same(batches(served), epochs[0]) and same(batches(served), epochs[1])
