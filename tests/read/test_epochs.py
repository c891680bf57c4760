"""Epochs of as_fast_dataset in every plan: each example exactly once with its own
label (and filename and boxes, where the output has them), a new order each epoch, the
same order with a seed, slices and input pipelines that partition the split, and a
cardinality that matches what is yielded."""

from __future__ import annotations

import collections
import os
import warnings

import pytest
import tensorflow as tf

import stanford_dogs_tfrecord
from fast_tfds.augment.spec import Augment
from fast_tfds.read import plans
from fast_tfds.read.options import ReadOptions
from fast_tfds.read.split_reading import Reading
from tests.pairs import Truth
from tests.read.reading import BATCH, batches_of, epoch, read

Plan = plans.Plan

# Options, and the plan they take: each plan's pipeline is code of its own.
PLANS = [
    ({}, Plan.CACHED),
    ({"batch_size": None, "dtype": tf.float32}, Plan.CACHED),
    ({"cache": False}, Plan.STREAM),
    # Another output size: decoded at a reduced scale and resized, in blocks too.
    ({"image_size": 32}, Plan.CACHED),
    ({"image_size": 32, "cache": False}, Plan.STREAM),
    # A transform works on each example: decoded one at a time.
    ({"transform": dict}, Plan.ARENA_OF_EXAMPLES),
    ({"transform": dict, "cache": False}, Plan.PER_EXAMPLE),
    # Output with filenames (strings) cannot live in an arena: Dataset.cache() keeps it.
    ({"as_supervised": False}, Plan.PER_EXAMPLE),
    ({"cache": "file"}, Plan.PER_EXAMPLE),
]

# Every mode of reading the stored 224 pixels, so that each epoch can be checked
# against what TFDS reads, example by example (other sizes: test_sizes.py).
MODES = {
    "arena": {},
    "arena, unbatched": {"batch_size": None},
    "arena, seeded": {"seed": 3},
    "arena, float32": {"dtype": tf.float32},
    "arena of examples": {"transform": dict},
    "block stream": {"cache": False},
    "block stream, unbatched": {"batch_size": None, "cache": False},
    "per example": {"transform": dict, "cache": False},
    "per example, memory cache": {"as_supervised": False, "batch_size": 7},
    "per example, file cache": {"cache": "file"},
    "per example, file cache, dicts": {"cache": "file", "as_supervised": False},
}


def _in(tmp_path, options):
    """`options` with the file cache ('file') in `tmp_path`."""
    if options.get("cache") == "file":
        return {**options, "cache": os.fspath(tmp_path / "cache")}
    return options


@pytest.mark.parametrize(("options", "plan"), PLANS, ids=[str(o) for o, _ in PLANS])
def test_the_options_choose_the_documented_plan(cats_builder, tmp_path, options, plan):
    reading = Reading.start(cats_builder, "train", ReadOptions(**_in(tmp_path, options)))
    assert plans.choose_plan(reading) is plan


@pytest.mark.parametrize("mode", MODES)
def test_each_epoch_has_every_example_once_in_a_new_order(mode, cats_data_dir, stored, tmp_path):
    options = _in(tmp_path, MODES[mode])
    ds = read(cats_data_dir, **options)
    epochs = [epoch(ds) for _ in range(3)]  # Later epochs of a cache come from the cache.
    for examples in epochs:
        stored["train"].check(examples)
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2], "each epoch should be reshuffled"
    assert int(ds.cardinality()) == batches_of(ds)
    if isinstance(options.get("cache"), str):
        assert tf.io.gfile.glob(options["cache"] + "*.index"), "the file cache was not written"


@pytest.mark.parametrize("cache", [True, False])
def test_a_seed_repeats_the_order_of_every_epoch(cats_data_dir, cache):
    first, second = (
        read(cats_data_dir, seed=11, cache=cache),
        read(cats_data_dir, seed=11, cache=cache),
    )
    assert [epoch(first) for _ in range(3)] == [epoch(second) for _ in range(3)]
    other = read(cats_data_dir, seed=12, cache=cache)
    assert epoch(other) != epoch(read(cats_data_dir, seed=11, cache=cache))


def test_slices_match_tfds_and_partition_the_split(cats_data_dir, stored):
    together = []
    for split in ("train[:40%]", "train[40%:]"):
        ds = read(cats_data_dir, split=split)
        for _ in range(2):  # The fill, then an epoch from the arena.
            examples = epoch(ds)
            stored[split].check(examples)
        assert int(ds.cardinality()) == batches_of(ds)
        together += examples
    stored["train"].check(together)


def test_input_pipelines_are_disjoint_and_complete(cats_data_dir, stored):
    together = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline, num_replicas_in_sync=2
        )
        ds = read(cats_data_dir, input_context=context, batch_size=2 * BATCH)
        images, _ = next(iter(ds))
        assert images.shape[0] == BATCH, "batch_size is global: 2 * BATCH over 2 replicas"
        first, second = epoch(ds), epoch(ds)
        assert first, f"pipeline {pipeline} read nothing"
        assert collections.Counter(first) == collections.Counter(second)
        together += first
        assert int(ds.cardinality()) == batches_of(ds)
    # Counts, not sets: the sample holds one photo in several formats that decode
    # alike. An example read by both pipelines would be counted twice.
    stored["train"].check(together)


def test_repeat_n_gives_n_complete_epochs(cats_data_dir, stored):
    n = len(stored["train"])
    ds = read(cats_data_dir, num_epochs=3)
    examples = epoch(ds)
    assert len(examples) == 3 * n
    for i in range(3):
        stored["train"].check(examples[i * n : (i + 1) * n])
    assert int(ds.cardinality()) == batches_of(ds) == 3 * -(-n // BATCH)
    assert int(read(cats_data_dir, num_epochs=None).cardinality()) == tf.data.INFINITE_CARDINALITY


@pytest.mark.parametrize("cache", [True, False])
def test_drop_remainder_drops_only_the_last_partial_batch(cache, cats_data_dir, stored):
    n = len(stored["train"])
    ds = read(cats_data_dir, cache=cache, drop_remainder=True)
    for _ in range(2):
        examples = epoch(ds)
        assert len(examples) == n // BATCH * BATCH
        expected = stored["train"].expect(examples[0].fields())
        assert not collections.Counter(examples) - expected, "only stored examples, once"
    assert int(ds.cardinality()) == batches_of(ds) == n // BATCH
    assert ds.element_spec[0].shape[0] == BATCH
    # Batches never straddle two epochs: each epoch drops its own remainder.
    repeated = read(cats_data_dir, cache=cache, drop_remainder=True, num_epochs=2)
    assert [int(images.shape[0]) for images, _ in repeated] == [BATCH] * (2 * (n // BATCH))


def test_keras_fit_without_repeat_knows_its_steps(cats_data_dir):
    ds = read(cats_data_dir, image_size=32, dtype=tf.float32)
    model = tf.keras.Sequential(
        [tf.keras.Input((32, 32, 3)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(2)]
    )
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(ds, epochs=2, verbose=0, shuffle=False)  # the dataset shuffles
    ran_out = [str(w.message) for w in caught if "ran out of data" in str(w.message)]
    assert not ran_out
    assert len(history.history["loss"]) == 2


# Stanford Dogs: dicts with filenames and boxes, the boxes with the label, and crops
# (whose pixels are the shared decoder's, at the size asked), in each plan they take.
STANFORD_MODES = {
    "dicts, memory cache": ({"as_supervised": False}, None),
    "dicts, file cache": ({"as_supervised": False, "cache": "file"}, None),
    "dicts, no cache": ({"as_supervised": False, "cache": False}, None),
    "with boxes": ({"with_boxes": True}, None),
    "with boxes, no cache": ({"with_boxes": True, "cache": False}, None),
    "crops with boxes": ({"with_boxes": True, "crop_to_box": True, "image_size": 32}, 32),
    "crops, arena": ({"crop_to_box": True, "image_size": 32}, 32),
}


@pytest.mark.parametrize("mode", STANFORD_MODES)
def test_stanford_dogs_examples_keep_their_labels_filenames_and_boxes(
    mode, stanford_tfrecord_dir, tmp_path
):
    options, size = STANFORD_MODES[mode]
    truth = Truth.of(stanford_tfrecord_dir, name="stanford_dogs_tfrecord")
    ds = stanford_dogs_tfrecord.as_fast_dataset(
        "train",
        data_dir=stanford_tfrecord_dir,
        download_and_prepare=False,
        batch_size=3,
        dtype=tf.uint8,
        **_in(tmp_path, options),
    )
    for _ in range(2):  # With a cache, the second epoch comes from it.
        examples = epoch(ds)
        truth.check(examples, size=size, crop=options.get("crop_to_box", False))
    assert (
        examples[0].fields()
        == {
            "dicts": ("digest", "label", "filename", "boxes"),
            "with boxes": ("digest", "label", "boxes"),
            "crops with boxes": ("digest", "label", "boxes"),
            "crops": ("digest", "label"),
        }[mode.split(",")[0]]
    )


@pytest.mark.parametrize("options", [{}, {"cache": False}, {"augment": Augment(), "seed": 0}])
def test_autotuning_is_off_and_stays_so_for_maps_added_after(cats_data_dir, options):
    # docs/reading.md: with it on, whole epochs of the decoding pipelines ran on one core.
    ds = read(cats_data_dir, **options)
    assert ds.options().autotune.enabled is False
    added = ds.map(lambda images, labels: (images, labels), tf.data.AUTOTUNE)
    assert added.options().autotune.enabled is False
    on = tf.data.Options()
    on.autotune.enabled = True
    assert ds.with_options(on).options().autotune.enabled is True  # as the docs show
