"""shuffle=False is the split's record order: the order of TFDS's own reader with
`shuffle_files=False` and one file at a time, compared label by label and pixel by
pixel, on every path of the loader (no cache, the cache, a persistent file a shuffled
run filled, augment=, hosts' shares, worker processes), on every pass and in a new
process."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
from fast_tfds import Augment
from fast_tfds.cache import persistent
from tests.loader.new_process import run
from tests.loader.test_augment import expected_epoch
from tests.pairs import digest

BATCH = 6


def cats_loader(data_dir, **options):
    options = {"batch_size": BATCH, "shuffle": False, "num_threads": 2, **options}
    return cats_vs_dogs_fast.as_fast_loader(
        "train", data_dir=data_dir, download_and_prepare=False, **options
    )


@pytest.fixture(scope="module")
def record_split(cats_data_dir):
    """(pixels, labels) of every example in the order `tfds.load` reads the TFRecord
    build of the same sample unshuffled, one shard file after the other."""
    ds = tfds.load(
        "cats_vs_dogs_fast/224",
        split="train",
        data_dir=cats_data_dir,
        shuffle_files=False,
        read_config=tfds.ReadConfig(interleave_cycle_length=1),
    )
    examples = [(ex["image"].numpy(), int(ex["label"])) for ex in ds]
    return [e[0] for e in examples], [e[1] for e in examples]


@pytest.fixture(scope="module")
def record_order(record_split):
    """(pixels digest, label) of every example, in that order."""
    images, labels = record_split
    return [(digest(image), label) for image, label in zip(images, labels, strict=True)]


def examples(batches) -> list[tuple[str, int]]:
    return [
        (digest(image), int(label))
        for images, labels, *_ in batches
        for image, label in zip(images, labels, strict=True)
    ]


@pytest.mark.parametrize(
    "options",
    [{}, {"cache": True}, {"num_workers": 2}, {"num_threads": 1}],
    ids=["plain", "cache", "workers", "one-thread"],
)
def test_every_pass_is_the_record_order(cats_array_record_dir, record_order, options):
    loader = cats_loader(cats_array_record_dir, **options)
    assert len(record_order) > 16  # the build has 16 shard files: several examples' worth
    for _ in range(3):  # the fill, then served (with the cache)
        assert examples(loader) == record_order


@pytest.mark.parametrize("count", [2, 3])
def test_each_hosts_share_is_every_countth_example_in_record_order(
    cats_array_record_dir, record_order, count
):
    for index in range(count):
        for options in ({}, {"cache": True}):
            loader = cats_loader(
                cats_array_record_dir, shard_index=index, shard_count=count, **options
            )
            assert examples(loader) == record_order[index::count]
            assert examples(loader) == record_order[index::count]


def test_a_persistent_file_a_shuffled_run_filled_serves_the_record_order(
    cats_array_record_dir, record_order, tmp_path
):
    persist = {"cache": True, "persist": True, "cache_dir": tmp_path}
    shuffled = cats_loader(cats_array_record_dir, shuffle=True, seed=7, **persist)
    assert examples(shuffled) != record_order  # the fill ran in another order
    backing = shuffled.cache.backing  # The file is written out in a thread of its own:
    assert isinstance(backing, persistent.FileFill)  # worker processes below map it whole.
    backing.writing.join(timeout=120)
    assert backing.persisted and list(tmp_path.rglob("*")), "the shuffled run wrote no file"
    served = cats_loader(cats_array_record_dir, **persist)
    for _ in range(2):
        assert examples(served) == record_order
    # Worker processes map the same file.
    workers = cats_loader(cats_array_record_dir, num_workers=2, **persist)
    assert examples(workers) == record_order
    # And a new process, from the file and from the records.
    for mode in ("persist", "records"):
        passes = run("order", cats_array_record_dir, tmp_path, mode)["passes"]
        assert [[tuple(e) for e in p] for p in passes] == [record_order, record_order]


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("augment", [Augment.eval(), Augment()], ids=["eval", "train"])
def test_augmented_passes_are_the_record_order(cats_array_record_dir, record_split, augment, cache):
    loader = cats_loader(cats_array_record_dir, augment=augment, cache=cache, seed=5)
    order = list(range(len(record_split[1])))
    for epoch in range(2):
        expected = expected_epoch(augment, 5, epoch, record_split, cache=cache, order=order)
        got = list(loader)
        assert len(got) == len(expected)
        for (images, labels), (want, want_labels, _) in zip(got, expected, strict=True):
            assert labels.tolist() == want_labels
            np.testing.assert_array_equal(images, want)
