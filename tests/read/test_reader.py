"""The shared fast reader on a real build: exactly-once, shapes, order, errors."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
from tests.helpers import assert_exactly_once, filenames_of


def read(split="train", **options):
    options.setdefault("data_dir", None)
    return cats_vs_dogs_fast.as_fast_dataset(split, **options)


@pytest.mark.parametrize("cache", [False, True, "file"])
def test_every_example_once_per_epoch(cats_data_dir, cats_filenames, cache, tmp_path):
    if cache == "file":
        cache = os.fspath(tmp_path / "cache")
    ds = read(data_dir=cats_data_dir, cache=cache, as_supervised=False, batch_size=7)
    for _epoch in range(2):  # the second epoch of a cached dataset comes from the cache
        assert_exactly_once(filenames_of(ds), cats_filenames)
    if isinstance(cache, str):
        assert tf.io.gfile.glob(cache + "*.index"), "the file cache was not written"


def test_slices_match_tfds_and_partition_the_split(cats_data_dir, cats_builder, cats_filenames):
    halves = []
    for split in ("train[:40%]", "train[40%:]"):
        ours = filenames_of(read(split, data_dir=cats_data_dir, as_supervised=False))
        theirs = [
            ex["image/filename"].numpy().decode()
            for ex in cats_builder.as_dataset(
                split=split, decoders={"image": tfds.decode.SkipDecoding()}
            )
        ]
        assert_exactly_once(ours, theirs)
        halves.append(set(ours))
    assert not halves[0] & halves[1]
    assert sorted(halves[0] | halves[1]) == cats_filenames


def test_input_pipelines_are_disjoint_and_complete(cats_data_dir, cats_filenames):
    seen = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline_id, num_replicas_in_sync=2
        )
        ds = read(data_dir=cats_data_dir, as_supervised=False, batch_size=8, input_context=context)
        batch = next(iter(ds))
        assert batch["image"].shape[0] == 4, "batch_size is global: 8 over 2 replicas"
        seen.append(filenames_of(ds))
    assert seen[0] and seen[1]
    assert not set(seen[0]) & set(seen[1])
    assert_exactly_once(seen[0] + seen[1], cats_filenames)


def test_float_batches_are_scaled_and_uint8_batches_are_the_stored_pixels(
    cats_data_dir, cats_builder
):
    images, labels = next(iter(read(data_dir=cats_data_dir, batch_size=5)))
    assert images.shape == (5, 224, 224, 3) and images.dtype == tf.float32
    assert labels.shape == (5,) and labels.dtype == tf.int64
    assert 0.0 <= float(tf.reduce_min(images)) and float(tf.reduce_max(images)) <= 1.0
    assert float(tf.reduce_max(images)) > 0.5, "images look empty"

    ours = read(
        data_dir=cats_data_dir, dtype=tf.uint8, shuffle=False, batch_size=None, as_supervised=False
    )
    theirs = cats_builder.as_dataset(split="train", shuffle_files=False)
    by_name = {ex["image/filename"].numpy(): ex["image"].numpy() for ex in theirs}
    count = 0
    for ex in ours:
        assert ex["image"].dtype == tf.uint8
        np.testing.assert_array_equal(ex["image"].numpy(), by_name[ex["image/filename"].numpy()])
        count += 1
    assert count == len(by_name)


def test_original_config_is_resized_to_the_size_asked(cats_data_dir):
    images, _ = next(iter(read(data_dir=cats_data_dir, config="original", batch_size=3)))
    assert images.shape == (3, 224, 224, 3)
    images, _ = next(
        iter(read(data_dir=cats_data_dir, config="original", batch_size=3, image_size=(64, 48)))
    )
    assert images.shape == (3, 64, 48, 3)
    # Unbatched with image_size=None keeps the stored (original) size.
    image, _ = next(
        iter(read(data_dir=cats_data_dir, config="original", batch_size=None, image_size=None))
    )
    assert image.shape == (80, 96, 3)  # the sample's photos are 96x80


def test_same_order_twice_with_a_seed(cats_data_dir):
    def order(seed):
        return filenames_of(
            read(
                data_dir=cats_data_dir,
                as_supervised=False,
                seed=seed,
                deterministic=True,
                cache=False,
            )
        )

    first = order(seed=5)
    assert first == order(seed=5)
    assert first != order(seed=6), "a different seed should give a different order"


def test_repeat_and_drop_remainder(cats_data_dir, cats_filenames):
    n = len(cats_filenames)
    ds = read(data_dir=cats_data_dir, batch_size=10, repeat=2, drop_remainder=True)
    sizes = [int(x.shape[0]) for x, _ in ds]
    # Batches never straddle two epochs: each epoch drops its own remainder.
    assert sizes == [10] * (2 * (n // 10))
    assert ds.element_spec[0].shape == (10, 224, 224, 3)


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"split": "validation"}, "split="),
        ({"split": "train[:0%]"}, "split="),
        ({"batch_size": 0}, "batch_size="),
        ({"batch_size": 2.5}, "batch_size="),
        ({"image_size": -3}, "image_size="),
        ({"image_size": (224,)}, "image_size="),
        ({"cache": "/no/such/folder/cache"}, "cache="),
        ({"config": "512"}, "config="),
        ({"dtype": tf.float16}, "dtype="),
        ({"shuffle_buffer": 0}, "shuffle_buffer="),
        ({"repeat": -1}, "repeat="),
    ],
)
def test_bad_arguments_raise_one_line_value_errors(cats_data_dir, options, argument):
    split = options.pop("split", "train")
    with pytest.raises(ValueError) as excinfo:
        read(split, data_dir=cats_data_dir, **options)
    message = str(excinfo.value)
    assert message.startswith(argument), message
    assert "\n" not in message


def test_missing_dataset_without_download_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"^download_and_prepare=False: .* is not built"):
        read(data_dir=tmp_path, download_and_prepare=False)


def test_builder_method_and_builder_dir(cats_builder):
    images, _ = next(iter(cats_builder.as_fast_dataset("train", batch_size=2)))
    assert images.shape == (2, 224, 224, 3)
    # A built version folder alone is enough (what a collaborator receives).
    ds = read(builder_dir=cats_builder.data_dir, batch_size=2)
    images, _ = next(iter(ds))
    assert images.shape == (2, 224, 224, 3)
