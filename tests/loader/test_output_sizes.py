"""The loader at any output size: every example once per epoch, decoded by the one
any-size decoder the tf.data reader shares (`jpeg_blocks.decode_resized_into`),
Stanford Dogs' crops through its window, and JPEGs libjpeg-turbo rejects still arriving.

The references decode each stored JPEG (read back raw from the ArrayRecord files)
with that function directly, so equality here is exact, pixel for pixel.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import simplejpeg
import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_datasets.proto import tf_example_pb2

import cats_vs_dogs_fast
import stanford_dogs_tfrecord
from fast_tfds.core import jpeg_blocks
from fast_tfds.loader import DecodeExample
from fast_tfds.samples import photos
from stanford_dogs_tfrecord import crops
from stanford_dogs_tfrecord.hook import BoxParts
from tests.loader.conftest import decoded
from tests.pairs import Truth, epoch

# The documented bound (docs/reading.md) on the mean absolute difference per channel
# value (0-255) from `tf.image.resize(..., antialias=True)`.
MAX_MEAN_DIFFERENCE = 3.5


def raw_examples(name: str, config: str, data_dir) -> list[dict]:
    """Every example of the train split, in file order, its image the stored JPEG."""
    source = tfds.data_source(
        f"{name}/{config}",
        split="train",
        data_dir=data_dir,
        decoders={"image": tfds.decode.SkipDecoding()},
    )
    return [source[i] for i in range(len(source))]


def shared_decoder(jpeg: bytes, size: int, window=None) -> np.ndarray:
    return jpeg_blocks.decode_resized_into(jpeg, np.empty((size, size, 3), np.uint8), window)


def cats_loader(data_dir, config: str, size: int, **options):
    options = {"batch_size": 16, "seed": 5, "num_threads": 2, **options}
    return cats_vs_dogs_fast.as_fast_loader(
        "train",
        data_dir=data_dir,
        config=config,
        image_size=size,
        download_and_prepare=False,
        **options,
    )


@pytest.mark.parametrize("config", ["224", "original"])
@pytest.mark.parametrize("size", [160, 224, 384])
def test_every_example_once_per_epoch_at_every_output_size(cats_array_record_dir, config, size):
    # Each image with its own label: the truth is TFDS's data source of the build, its
    # pixels the shared decoder's of each stored JPEG.
    truth = Truth.of(cats_array_record_dir, config=config)
    loader = cats_loader(cats_array_record_dir, config, size)
    for _ in range(2):  # each iter() is the next epoch
        batches = list(loader)
        for images, _ in batches:
            assert images.shape[1:] == (size, size, 3) and images.dtype == np.uint8
        truth.check(epoch(batches), size=size)


@pytest.mark.parametrize("config", ["224", "original"])
def test_pixels_at_160_are_the_shared_decoders(cats_array_record_dir, config):
    stored = raw_examples("cats_vs_dogs_fast", config, cats_array_record_dir)
    loader = cats_loader(cats_array_record_dir, config, 160, shuffle=False, batch_size=len(stored))
    ((images, labels),) = list(loader)  # unshuffled: in file order, as the data source
    for image, label, ex in zip(images, labels, stored, strict=True):
        assert label == ex["label"]
        np.testing.assert_array_equal(image, shared_decoder(ex["image"], 160))


def test_the_original_config_is_area_resized_close_to_tensorflows_antialiased_resize(
    cats_array_record_dir,
):
    # At 32 px (a 2.5-3x shrink of the sample's 80x96 images) a bilinear resize
    # without antialiasing differs from the antialiased one by ~7.5 on average,
    # twice the bound: this checks the filter, not only the size.
    stored = raw_examples("cats_vs_dogs_fast", "original", cats_array_record_dir)
    loader = cats_loader(
        cats_array_record_dir, "original", 32, shuffle=False, batch_size=len(stored)
    )
    ((images, _),) = list(loader)
    differences = []
    for image, ex in zip(images, stored, strict=True):
        decoded = tf.io.decode_jpeg(ex["image"], channels=3)
        assert decoded.shape[:2] != (32, 32)
        reference = tf.image.resize(decoded, (32, 32), antialias=True)
        reference = tf.cast(tf.clip_by_value(tf.round(reference), 0, 255), tf.uint8).numpy()
        differences.append(np.abs(image.astype(np.int16) - reference.astype(np.int16)).mean())
    assert np.mean(differences) <= MAX_MEAN_DIFFERENCE


def boxes_of(example: dict) -> np.ndarray:
    return np.asarray(example["objects"]["bbox"], np.float32).reshape(-1, 4)


# 24 px: libjpeg-turbo decodes the 224 images at a reduced DCT scale before the window
# is cut; 160: each window is enlarged.
@pytest.mark.parametrize("config", ["224", "original"])
@pytest.mark.parametrize("size", [24, 160])
def test_crop_to_box_is_the_shared_decoder_with_the_boxs_window(
    stanford_array_record_dir, config, size
):
    stored = raw_examples("stanford_dogs_tfrecord", config, stanford_array_record_dir)
    loader = stanford_dogs_tfrecord.as_fast_loader(
        "train",
        data_dir=stanford_array_record_dir,
        config=config,
        image_size=size,
        download_and_prepare=False,
        shuffle=False,
        batch_size=len(stored),
        crop_to_box=True,
        with_boxes=True,
        max_boxes=3,
    )
    ((images, target),) = list(loader)
    assert images.shape == (len(stored), size, size, 3)
    for i, ex in enumerate(stored):
        boxes = boxes_of(ex)
        assert target["label"][i] == ex["label"]
        np.testing.assert_array_equal(target["bbox"][i][: len(boxes)], boxes)
        window = functools.partial(crops.first_box_window, boxes)
        np.testing.assert_array_equal(images[i], shared_decoder(ex["image"], size, window))
        # The window matters: the whole image at this size is another picture.
        assert not np.array_equal(images[i], shared_decoder(ex["image"], size))


def record(image: bytes, label: int, bbox: list[float] | None = None) -> bytes:
    example = tf_example_pb2.Example()
    feature = example.features.feature
    feature["image"].bytes_list.value.append(image)
    feature["label"].int64_list.value.append(label)
    if bbox is not None:
        feature["objects/bbox"].float_list.value.extend(bbox)
    return example.SerializeToString()


# A GIF stands in for any image libjpeg-turbo (simplejpeg) rejects.
@pytest.fixture(scope="module", params=["jpeg", "gif"])
def stored_image(request) -> bytes:
    photo = photos.random_photo(np.random.default_rng(4), (120, 90))  # width, height
    if request.param == "jpeg":
        return photos.jpeg_bytes(photo)
    data = photos.encoded(photo, "GIF")
    with pytest.raises(ValueError):
        simplejpeg.decode_jpeg_header(data)
    return data


def tensorflows_pixels(data: bytes) -> np.ndarray:
    return tf.io.decode_image(data, channels=3, expand_animations=False).numpy()


def test_every_image_arrives_at_its_stored_size_or_any_other(stored_image):
    image, label = decoded(DecodeExample(image_size=(90, 120)), record(stored_image, 3))
    assert label == 3 and image.dtype == np.uint8 and image.shape == (90, 120, 3)
    np.testing.assert_array_equal(image, tensorflows_pixels(stored_image))
    image, _ = decoded(DecodeExample(image_size=(40, 50)), record(stored_image, 3))
    expected = jpeg_blocks.decode_resized_into(stored_image, np.empty((40, 50, 3), np.uint8))
    np.testing.assert_array_equal(image, expected)


def test_at_the_stored_size_a_window_is_cut_at_full_resolution(stored_image):
    bbox = [0.1, 0.2, 0.6, 0.9]  # ymin, xmin, ymax, xmax
    top, left, height, width = crops.first_box_window(np.array([bbox], np.float32), 90, 120)
    decode = DecodeExample(image_size=(height, width), parts=BoxParts(crop_to_box=True))
    image, label = decoded(decode, record(stored_image, 1, bbox))
    assert label == 1 and image.shape == (height, width, 3) != (90, 120, 3)
    whole = tensorflows_pixels(stored_image)
    np.testing.assert_array_equal(image, whole[top : top + height, left : left + width])
