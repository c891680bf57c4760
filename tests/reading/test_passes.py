"""Epochs are passes, in both back ends: a pass's epoch is the number of passes completed
before it (a pass completes when its last batch is delivered), and every epoch's order,
crops and size come from (seed, epoch).

ProgressiveResize makes the epoch visible in each batch's size. A peek, an iterator
dropped mid-epoch, or a new reader (an empty cache, as in a new process) resumed with
`set_epoch` must give the batches an uninterrupted run gives. Then what each back end
has of its own: tf.data's clock behind later transformations, its endless reads and
new processes, the loader's saved states, running stream, and hosts' padded shares.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import shutil
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf

import fast_tfds
import stanford_dogs_tfrecord
from fast_tfds.augment.progressive import ProgressiveResize
from fast_tfds.augment.spec import Augment
from fast_tfds.core.passes import find_clock
from fast_tfds.loader.pipeline import STATE_VERSION
from tests.helpers import child_env, run_ok
from tests.pairs import digest
from tests.reading.backends import numpy

BATCH = 8
SEED = 5
# Sizes 32, 64, 96, 128 in epochs 0 to 3: the epoch of every batch is visible.
SIZES = ProgressiveResize(start=32, end=128, start_epoch=0, end_epoch=3, step=32)


def read(backend, **options):
    return backend.open(**{"batch_size": BATCH, "seed": SEED, **options})


def progressive(backend, **options):
    return read(backend, image_size=SIZES, augment=Augment.train(), with_index=True, **options)


def batches(reader, count=None) -> list:
    """The batches of one pass (or `count` batches of a new iterator), as numpy."""
    out = []
    for element in reader:
        out.append(numpy(element))
        if count is not None and len(out) == count:
            break
    return out


def sizes(epoch) -> list[int]:
    return sorted({images.shape[1] for images, *_ in epoch})


def same(a, b) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x, y) for p, q in zip(a, b, strict=True) for x, y in zip(p, q, strict=True)
    )


@pytest.mark.parametrize("cache", [True, False])
def test_peeks_and_dropped_iterators_do_not_move_the_epoch(backend, cache):
    reader = progressive(backend, cache=cache)
    first = batches(reader, 1)
    next(iter(reader))  # A peek, as the README's and Keras' shape reads.
    iterator = iter(reader)
    next(iterator)
    next(iterator)
    del iterator  # Dropped mid-epoch: completes nothing.
    epochs = [batches(reader) for _ in range(3)]
    assert [sizes(e) for e in epochs] == [[32], [64], [96]]
    assert same(first, epochs[0][:1]), "a peek sees the first batch of epoch 0"
    fresh = progressive(backend, cache=cache)
    assert same(epochs[0], batches(fresh))  # the same order and crops as without the peeks


@pytest.mark.parametrize("cache", [True, False])
def test_a_resumed_run_gives_the_batches_of_an_uninterrupted_one(backend, cache):
    run = progressive(backend, cache=cache)
    epochs = [batches(run) for _ in range(3)]
    # A new reader (its cache empty, as in a new process) started at epoch 1.
    resumed = progressive(backend, cache=cache)
    fast_tfds.set_epoch(resumed, 1)
    assert same(batches(resumed), epochs[1])
    assert same(batches(resumed), epochs[2])
    assert same(batches(resumed), batches(run))  # then epoch 3, as the first run's next
    # Mid-epoch: from batch 3 of epoch 2.
    mid = progressive(backend, cache=cache)
    fast_tfds.set_epoch(mid, 2, 3)
    assert same(batches(mid)[: len(epochs[2]) - 3], epochs[2][3:])
    # Epoch 0 resumed mid-way: the fill's order is (seed, epoch 0)'s too.
    start = progressive(backend, cache=cache)
    fast_tfds.set_epoch(start, 0, 3)
    assert same(batches(start)[: len(epochs[0]) - 3], epochs[0][3:])
    with pytest.raises(ValueError, match=r"^batch=99: an epoch of this reader has \d+ batches"):
        fast_tfds.set_epoch(start, 0, 99)


def test_a_pass_from_mid_epoch_is_one_pass_of_batches_in_tf_data(tf_data):
    # tf.data's pass from a position runs one epoch's worth of batches on from it; the
    # loader's runs to the end of that epoch (test_set_epoch_ends_the_resumed_epoch_in_the_loader).
    run = progressive(tf_data)
    epochs = [batches(run) for _ in range(3)]
    mid = progressive(tf_data)
    fast_tfds.set_epoch(mid, 1, 2)
    assert same(batches(mid), epochs[1][2:] + epochs[2][:2])


def test_set_epoch_ends_the_resumed_epoch_in_the_loader(loader):
    run = progressive(loader)
    epochs = [batches(run) for _ in range(3)]
    mid = progressive(loader)
    mid.set_epoch(2, batch=3)
    assert same(batches(mid), epochs[2][3:])


# tf.data's own: its readers without augment=, Keras-style repeats, endless reads from
# a batch position, the clock behind later transformations, checkpoints, new processes
# and an arena of a transform's examples.


@pytest.mark.parametrize("options", [{}, {"cache": False}, {"persist": True}])
def test_resumed_shuffled_epochs_without_augment_repeat(options, tf_data, tmp_path):
    if options.get("persist"):
        options = {**options, "cache_dir": os.fspath(tmp_path)}
    ds = read(tf_data, seed=3, with_index=True, **options)
    epochs = [batches(ds) for _ in range(3)]
    assert not same(epochs[1], epochs[2])
    for epoch in range(3):
        resumed = read(tf_data, seed=3, with_index=True, **options)
        fast_tfds.set_epoch(resumed, epoch)
        assert same(batches(resumed), epochs[epoch]), f"epoch {epoch}"


def test_repeat_n_runs_consecutive_epochs_from_the_clock(tf_data):
    single = progressive(tf_data, cache=True)
    epochs = [batches(single) for _ in range(3)]
    repeated = progressive(tf_data, cache=True, num_epochs=3)
    assert same(batches(repeated), epochs[0] + epochs[1] + epochs[2])
    # The next iteration goes on at epoch 3: its size is epoch 3's.
    assert batches(repeated, 1)[0][0].shape[1] == 128


def test_endless_reads_resume_at_a_batch_position(tf_data):
    per_epoch = len(batches(progressive(tf_data, cache=False)))
    run = iter(progressive(tf_data, cache=False, num_epochs=None))
    uninterrupted = [next(run) for _ in range(2 * per_epoch + 3)]
    resumed = progressive(tf_data, cache=False, num_epochs=None)
    find_clock(resumed).set_position(per_epoch + 2)
    it = iter(resumed)
    for expected in uninterrupted[per_epoch + 2 :]:
        got = next(it)
        assert np.array_equal(got[0], expected[0]) and np.array_equal(got[-1], expected[-1])


def test_the_clock_is_found_through_later_transformations(tf_data):
    ds = read(tf_data, seed=1)
    later = ds.map(lambda x, y: (x, y)).prefetch(1)
    fast_tfds.set_epoch(later, 2)
    assert find_clock(ds).start().epoch == 2


def test_an_iterator_checkpoint_fails_rather_than_saving_a_wrong_position(tf_data, tmp_path):
    it = iter(read(tf_data, seed=1))
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
    image_size=ProgressiveResize(start=32, end=128, start_epoch=0, end_epoch=3, step=32),
    augment=Augment.train(), seed=5, with_index=True, cache=sys.argv[2] == "cache")
fast_tfds.set_epoch(ds, 1, 2)
print(json.dumps([[digest(x.numpy()), k.numpy().tolist()] for x, _, k in ds]))
"""


@pytest.mark.parametrize("cache", ["cache", "stream"])
def test_a_new_process_resumes_where_an_uninterrupted_run_is(cache, tf_data):
    ds = progressive(tf_data, cache=cache == "cache")
    epochs = [batches(ds) for _ in range(3)]
    out = run_ok(
        [sys.executable, "-c", RESUMED_CHILD, os.fspath(tf_data.data_dir), cache],
        env=child_env(),
        fork=True,
    )
    line = next(line for line in out.splitlines() if line.startswith("[["))
    expected = [[digest(x), i.tolist()] for x, _, i in epochs[1][2:] + epochs[2][:2]]
    assert json.loads(line) == expected


def _relabel(example):  # a user's transform: its examples go to the arena of examples
    return {**example, "label": example["label"] + 10}


def test_an_arena_of_examples_persists_under_the_one_key_and_is_served(tf_data, tmp_path):
    # A transform's output (plan: arena of examples, as tests/read/test_epochs.py checks) is
    # kept as features (the key's `pictures: false`); a new reader
    # of the same options serves each epoch from the file, with the shards zeroed (their
    # sizes and times kept, so the key still matches and no record could be read).
    from fast_tfds.cache import housekeeping, persistent_format
    from fast_tfds.cache.persistent_format import read_header
    from tests.reading.backends import Backend

    data_dir = tmp_path / "data"
    shutil.copytree(
        tf_data.data_dir / "cats_vs_dogs_fast" / "224", data_dir / "cats_vs_dogs_fast/224"
    )
    copy = Backend("tf.data", data_dir)
    options = {"seed": 3, "with_index": True, "transform": _relabel, "persist": True}
    options["cache_dir"] = os.fspath(tmp_path / "cache")
    first = read(copy, **options)
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
    served = read(copy, **options)
    assert same(batches(served), epochs[0]) and same(batches(served), epochs[1])


# The loader's own: when a pass completes, endless iterators, its running stream, its
# index, hosts' padded shares, and states saved by an earlier version.


def test_a_pass_completes_when_its_last_batch_is_delivered(loader):
    reader = progressive(loader)
    iterator = iter(reader)
    for _ in range(len(reader) - 1):
        next(iterator)
    assert reader.pass_clock.start().epoch == 0
    next(iterator)  # the last batch: no StopIteration asked for yet
    assert reader.pass_clock.start().epoch == 1
    assert sizes(iter(reader)) == [64]


def test_an_endless_iterator_counts_its_passes(loader):
    reader = progressive(loader, num_epochs=None)
    iterator = iter(reader)
    got = [numpy(next(iterator)) for _ in range(len(reader) + 2)]
    assert [b[0].shape[1] for b in got[len(reader) - 1 : len(reader) + 1]] == [32, 64]
    del iterator  # dropped in epoch 1: the next one starts epoch 1 again
    iterator = iter(reader)
    assert same(got[len(reader) : len(reader) + 2], [next(iterator), next(iterator)])


@pytest.mark.parametrize("workers", [0, 2])
def test_the_running_stream_carries_on_through_peeks_and_passes(loader, workers):
    reader = read(loader, num_workers=workers)
    peeked = list(itertools.islice(reader, 2))  # Keras' shape reads
    stream = reader._stream
    peeked[0][0][...] = 0  # what the peek does with its batches is its own business
    first = list(reader)
    assert reader._stream is stream  # replayed the peek, then continued: no restart
    second = list(reader)
    assert reader._stream is stream  # the next pass continued it too
    fresh = read(loader)
    assert same(first, list(fresh)) and same(second, list(fresh))


def test_with_index_gives_each_examples_index_in_the_split(loader):
    plain = read(loader, shuffle=False)
    by_index = [(images[i], labels[i]) for images, labels in plain for i in range(len(labels))]
    for options in ({}, {"augment": Augment.eval(), "cache": True}, {"num_workers": 2}):
        reader = read(loader, with_index=True, **options)
        seen = []
        for images, labels, indices in reader:
            assert indices.dtype == np.int64
            seen += indices.tolist()
            for image, label, index in zip(images, labels, indices, strict=True):
                assert label == by_index[index][1]
                if not options:
                    np.testing.assert_array_equal(image, by_index[index][0])
        assert sorted(seen) == list(range(len(by_index)))
        assert seen != sorted(seen)  # shuffled, and still joined


@pytest.mark.parametrize("count", [2, 3, 5])
@pytest.mark.parametrize("options", [{}, {"augment": Augment.eval()}, {"cache": True}])
def test_hosts_of_an_evaluation_get_the_same_full_batches(loader, count, options):
    readers = [
        read(loader, shuffle=False, with_index=True, shard_index=i, shard_count=count, **options)
        for i in range(count)
    ]
    n = len(read(loader, shuffle=False).source)
    hosts = [list(reader) for reader in readers]
    assert len({len(b) for b in hosts}) == 1 == len({len(reader) for reader in readers})
    largest = -(-n // count)
    assert len(hosts[0]) == -(-largest // BATCH)  # the largest share's batches
    real = []
    for host, host_batches in enumerate(hosts):
        for images, labels, indices in host_batches:
            assert len(indices) == BATCH  # every batch full
            pad = indices < 0
            assert np.all(indices[pad] == -1) and not images[pad].any() and not labels[pad].any()
            assert np.all(np.diff(np.flatnonzero(pad)) == 1)  # the padding ends the share
            real += [(host, int(i)) for i in indices[~pad]]
    assert collections.Counter(i for _, i in real) == collections.Counter(range(n))
    assert all(i % count == host for host, i in real)


def test_a_state_saved_before_the_pass_clock_still_restores(loader):
    # What the previous version saved after 2 batches of epoch 1 (its keys, as JSON).
    reader = read(loader, num_epochs=3)
    old = {
        "version": STATE_VERSION,
        "epoch": 1,
        "batch_in_epoch": 2,
        "stop_epoch": 3,
        "dataset": "cats_vs_dogs_fast/224/1.0.0",
        "split": "train",
        "num_examples": len(reader.source),
        "shard": [0, 1],
        "shuffle": True,
        "seed": SEED,
        "batch_size": BATCH,
        "drop_remainder": False,
        "augment": None,
    }
    iterator = iter(reader)
    assert set(iterator.get_state()) == set(old)  # the same keys as before
    iterator.set_state(json.loads(json.dumps(old)))
    assert reader.pass_clock.start().epoch == 1  # epoch 0 was complete when it was saved
    resumed = list(iterator)
    run = iter(read(loader, num_epochs=3))
    expected = [next(run) for _ in range(3 * len(reader))][len(reader) + 2 :]
    assert same(resumed, expected)
    assert reader.pass_clock.start().epoch == 3


def test_padding_of_richer_targets_is_zero_and_each_host_reads_its_own(stanford_array_record_dir):
    common = dict(
        data_dir=stanford_array_record_dir,
        download_and_prepare=False,
        batch_size=4,
        shuffle=False,
        with_boxes=True,
        max_boxes=3,
    )
    whole = stanford_dogs_tfrecord.as_fast_loader("train", **common)
    labels = np.concatenate([target["label"] for _, target in whole])
    counts = collections.Counter()
    for i in range(3):
        host = stanford_dogs_tfrecord.as_fast_loader(
            "train", with_index=True, shard_index=i, shard_count=3, **common
        )
        for images, target, indices in host:
            pad = indices < 0
            counts.update(indices[~pad].tolist())
            counts["padding"] += int(pad.sum())
            assert np.array_equal(target["label"][~pad], labels[indices[~pad]])
            assert not images[pad].any() and not target["label"][pad].any()
            assert not target["bbox"][pad].any() and not target["num_boxes"][pad].any()
            assert (target["num_boxes"][~pad] >= 1).all()
    assert counts.pop("padding") > 0
    assert counts == collections.Counter(range(len(labels)))
