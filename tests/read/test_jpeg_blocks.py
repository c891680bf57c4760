"""Block decoding with simplejpeg: TensorFlow's own pixels, and clear errors."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from fast_tfds.core import jpeg_blocks
from fast_tfds.read import records


def _jpeg(height, width, mode="RGB", **save) -> bytes:
    rng = np.random.default_rng(height * width)
    channels = 1 if mode == "L" else 3
    pixels = rng.integers(0, 256, (height, width, channels), np.uint8)
    # Smooth, photo-like content: random noise alone would hide chroma subsampling.
    pixels = np.cumsum(pixels, axis=1, dtype=np.uint16).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels.squeeze(), mode).save(out, "JPEG", quality=90, **save)
    return out.getvalue()


def test_the_pixels_of_the_built_dataset_are_tensorflows(cats_builder):
    instructions = records.file_instructions(cats_builder, "train")
    spec = {"image": tf.io.FixedLenFeature([], tf.string)}
    serialized = records.read_indexed_records(
        instructions, records.instruction_offsets(instructions), indices=False
    )
    jpegs = np.array([tf.io.parse_single_example(s, spec)["image"].numpy() for s in serialized])
    assert len(jpegs) > 20
    got = jpeg_blocks.decode_jpeg_block(jpegs, (224, 224, 3))
    expected = np.stack([tf.io.decode_jpeg(j, channels=3).numpy() for j in jpegs])
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "mode, save",
    [("RGB", {}), ("RGB", {"subsampling": 0}), ("L", {}), ("RGB", {"progressive": True})],
    ids=["rgb 4:2:0", "rgb 4:4:4", "grayscale", "progressive"],
)
def test_other_jpeg_kinds_match_tensorflow(mode, save):
    jpegs = np.array([_jpeg(48, 64, mode, **save) for _ in range(3)], dtype=object)
    got = jpeg_blocks.decode_jpeg_block(jpegs, (48, 64, 3))
    expected = np.stack([tf.io.decode_jpeg(j, channels=3).numpy() for j in jpegs])
    np.testing.assert_array_equal(got, expected)


def test_rows_are_decoded_in_place():
    rows = np.zeros((2, 48, 64, 3), np.uint8)
    out = jpeg_blocks.decode_jpeg_block_into(np.array([_jpeg(48, 64)] * 2, dtype=object), rows)
    assert out is rows and rows.any()


@pytest.mark.parametrize(
    "jpeg, problem",
    [(_jpeg(40, 64), "is 40x64"), (_jpeg(96, 64), "does not decode"), (b"GIF89a", "does not")],
    ids=["smaller", "larger", "not a jpeg"],
)
def test_an_image_of_another_size_or_kind_is_a_clear_error(jpeg, problem):
    jpegs = np.array([_jpeg(48, 64), jpeg], dtype=object)
    with pytest.raises(ValueError, match=f"image 1 of a block is not a 48x64 RGB JPEG.*{problem}"):
        jpeg_blocks.decode_jpeg_block(jpegs, (48, 64, 3))


def test_the_error_reaches_the_dataset_user_with_its_message():
    images = tf.data.Dataset.from_tensor_slices({"image": [_jpeg(48, 64), b"not a jpeg"]})
    ds = images.batch(2).map(
        lambda batch: tf.numpy_function(
            lambda jpegs: jpeg_blocks.decode_jpeg_block(jpegs, (48, 64, 3)),
            [batch["image"]],
            tf.uint8,
            stateful=False,
        )
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="fast-tfds verify"):
        list(ds)
