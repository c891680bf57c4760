"""Epochs are passes: an iterator starts at the epoch after the last one completed (its
last batch delivered), so a peek or a dropped iterator shifts nothing; `set_epoch`
resumes a run; `with_index` joins each example with its index in the split; and hosts
of a multi-host evaluation get the same number of full batches."""

from __future__ import annotations

import collections
import itertools
import json

import numpy as np
import pytest

import cats_vs_dogs_fast
from fast_tfds import Augment, ProgressiveResize
from fast_tfds.loader.pipeline import STATE_VERSION

BATCH = 6
# Sizes 32, 64, 96, 128 in epochs 0 to 3: the epoch of every batch is visible.
SIZES = ProgressiveResize(start=32, end=128, start_epoch=0, end_epoch=3, step=32)


def cats_loader(data_dir, **options):
    options = {"batch_size": BATCH, "seed": 3, "num_threads": 2, **options}
    return cats_vs_dogs_fast.as_fast_loader(
        "train", data_dir=data_dir, download_and_prepare=False, **options
    )


def progressive(data_dir, **options):
    return cats_loader(data_dir, augment=Augment(), image_size=SIZES, **options)


def sizes(batches) -> list[int]:
    return sorted({images.shape[1] for images, *_ in batches})


def same(a, b) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x, y) for p, q in zip(a, b, strict=True) for x, y in zip(p, q, strict=True)
    )


def test_peeks_and_dropped_iterators_do_not_move_the_epoch(cats_array_record_dir):
    loader = progressive(cats_array_record_dir)
    next(iter(loader))  # the README's peek
    iterator = iter(loader)
    next(iterator), next(iterator)  # Keras' shape reads
    del iterator
    epochs = [list(loader) for _ in range(3)]
    assert [sizes(batches) for batches in epochs] == [[32], [64], [96]]
    fresh = progressive(cats_array_record_dir)
    assert same(epochs[0], list(fresh))  # the same order and crops as without the peeks


def test_a_pass_completes_when_its_last_batch_is_delivered(cats_array_record_dir):
    loader = progressive(cats_array_record_dir)
    iterator = iter(loader)
    for _ in range(len(loader) - 1):
        next(iterator)
    assert loader.pass_clock.start().epoch == 0
    next(iterator)  # the last batch: no StopIteration asked for yet
    assert loader.pass_clock.start().epoch == 1
    assert sizes(iter(loader)) == [64]


def test_an_endless_iterator_counts_its_passes(cats_array_record_dir):
    loader = progressive(cats_array_record_dir, num_epochs=None)
    iterator = iter(loader)
    batches = [next(iterator) for _ in range(len(loader) + 2)]
    assert [b[0].shape[1] for b in batches[len(loader) - 1 : len(loader) + 1]] == [32, 64]
    del iterator  # dropped in epoch 1: the next one starts epoch 1 again
    iterator = iter(loader)
    assert same(batches[len(loader) : len(loader) + 2], [next(iterator), next(iterator)])


def test_set_epoch_resumes_where_an_uninterrupted_run_was(cats_array_record_dir):
    for options in ({}, {"cache": True}):
        run = progressive(cats_array_record_dir, **options)
        epochs = [list(run) for _ in range(3)]
        resumed = progressive(cats_array_record_dir, **options)  # a new process's loader
        resumed.set_epoch(2, batch=3)
        assert same(list(resumed), epochs[2][3:])
        assert same(list(resumed), list(run))  # then epoch 3, as the first run's next
    with pytest.raises(ValueError, match=r"^batch=99: an epoch of this reader has \d+ batches"):
        resumed.set_epoch(0, batch=99)


@pytest.mark.parametrize("workers", [0, 2])
def test_the_running_stream_carries_on_through_peeks_and_passes(cats_array_record_dir, workers):
    loader = cats_loader(cats_array_record_dir, num_workers=workers)
    peeked = list(itertools.islice(loader, 2))  # Keras' shape reads
    stream = loader._stream
    peeked[0][0][...] = 0  # what the peek does with its batches is its own business
    first = list(loader)
    assert loader._stream is stream  # replayed the peek, then continued: no restart
    second = list(loader)
    assert loader._stream is stream  # the next pass continued it too
    fresh = cats_loader(cats_array_record_dir)
    assert same(first, list(fresh)) and same(second, list(fresh))


def test_with_index_gives_each_examples_index_in_the_split(cats_array_record_dir):
    plain = cats_loader(cats_array_record_dir, shuffle=False)
    by_index = [(images[i], labels[i]) for images, labels in plain for i in range(len(labels))]
    for options in ({}, {"augment": Augment.eval(), "cache": True}, {"num_workers": 2}):
        loader = cats_loader(cats_array_record_dir, with_index=True, **options)
        seen = []
        for images, labels, indices in loader:
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
def test_hosts_of_an_evaluation_get_the_same_full_batches(cats_array_record_dir, count, options):
    loaders = [
        cats_loader(
            cats_array_record_dir,
            shuffle=False,
            with_index=True,
            shard_index=i,
            shard_count=count,
            **options,
        )
        for i in range(count)
    ]
    n = len(cats_loader(cats_array_record_dir, shuffle=False).source)
    batches = [list(loader) for loader in loaders]
    assert len({len(b) for b in batches}) == 1 == len({len(loader) for loader in loaders})
    largest = -(-n // count)
    assert len(batches[0]) == -(-largest // BATCH)  # the largest share's batches
    real = []
    for host, host_batches in enumerate(batches):
        for images, labels, indices in host_batches:
            assert len(indices) == BATCH  # every batch full
            pad = indices < 0
            assert np.all(indices[pad] == -1) and not images[pad].any() and not labels[pad].any()
            assert np.all(np.diff(np.flatnonzero(pad)) == 1)  # the padding ends the share
            real += [(host, int(i)) for i in indices[~pad]]
    assert collections.Counter(i for _, i in real) == collections.Counter(range(n))
    assert all(i % count == host for host, i in real)


def test_a_state_saved_before_the_pass_clock_still_restores(cats_array_record_dir):
    # What the previous version saved after 2 batches of epoch 1 (its keys, as JSON).
    loader = cats_loader(cats_array_record_dir, num_epochs=3)
    old = {
        "version": STATE_VERSION,
        "epoch": 1,
        "batch_in_epoch": 2,
        "stop_epoch": 3,
        "dataset": "cats_vs_dogs_fast/224/1.0.0",
        "split": "train",
        "num_examples": len(loader.source),
        "shard": [0, 1],
        "shuffle": True,
        "seed": 3,
        "batch_size": BATCH,
        "drop_remainder": False,
        "augment": None,
    }
    iterator = iter(loader)
    assert set(iterator.get_state()) == set(old)  # the same keys as before
    iterator.set_state(json.loads(json.dumps(old)))
    assert loader.pass_clock.start().epoch == 1  # epoch 0 was complete when it was saved
    resumed = list(iterator)
    run = iter(cats_loader(cats_array_record_dir, num_epochs=3))
    expected = [next(run) for _ in range(3 * len(loader))][len(loader) + 2 :]
    assert same(resumed, expected)
    assert loader.pass_clock.start().epoch == 3


def test_padding_of_richer_targets_is_zero_and_each_host_reads_its_own(stanford_array_record_dir):
    import stanford_dogs_tfrecord

    def host(i):
        return stanford_dogs_tfrecord.as_fast_loader(
            "train",
            data_dir=stanford_array_record_dir,
            download_and_prepare=False,
            batch_size=4,
            shuffle=False,
            with_index=True,
            with_boxes=True,
            max_boxes=3,
            shard_index=i,
            shard_count=3,
        )

    whole = stanford_dogs_tfrecord.as_fast_loader(
        "train",
        data_dir=stanford_array_record_dir,
        download_and_prepare=False,
        batch_size=4,
        shuffle=False,
        with_boxes=True,
        max_boxes=3,
    )
    labels = np.concatenate([target["label"] for _, target in whole])
    counts = collections.Counter()
    for i in range(3):
        for images, target, indices in host(i):
            pad = indices < 0
            counts.update(indices[~pad].tolist())
            counts["padding"] += int(pad.sum())
            assert np.array_equal(target["label"][~pad], labels[indices[~pad]])
            assert not images[pad].any() and not target["label"][pad].any()
            assert not target["bbox"][pad].any() and not target["num_boxes"][pad].any()
            assert (target["num_boxes"][~pad] >= 1).all()
    assert counts.pop("padding") > 0
    assert counts == collections.Counter(range(len(labels)))
