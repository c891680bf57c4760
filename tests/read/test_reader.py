"""as_fast_dataset's front door on a real build: what a batch holds, sizes, arguments
and their errors, and the builder's own method. Epochs, order and the plans are in
test_epochs.py, the arena in test_arena.py."""

import numpy as np
import pytest
import tensorflow as tf

import cats_vs_dogs_fast


def read(split="train", **options):
    options.setdefault("data_dir", None)
    return cats_vs_dogs_fast.as_fast_dataset(split, **options)


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
