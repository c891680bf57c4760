"""Block decoding at any output size: every image in its row, close to TensorFlow's pictures.

The reference is what a user would otherwise write: `tf.io.decode_jpeg` and then
`tf.image.resize(..., antialias=True)`. The block decoder decodes at a reduced DCT
scale and resizes the rest, so its pixels differ a little; the bound below is
the contract documented in docs/reading.md.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from fast_tfds.core import jpeg_blocks
from fast_tfds.samples import photos

# Mean absolute difference per channel value (0-255) against decode + antialiased resize,
# over the sample's photos. Single detailed photos differ more (up to ~10 at 48 px), since
# libjpeg-turbo's scaled IDCT is a different low-pass filter from a triangle filter.
MAX_MEAN_DIFFERENCE = 3.5


@pytest.fixture(scope="module")
def sample_jpegs() -> list[bytes]:
    """Photos at the sizes the sample archives have (about 300-420 px a side)."""
    rng = np.random.default_rng(7)
    sizes = [(int(rng.integers(300, 420)), int(rng.integers(300, 420))) for _ in range(12)]
    return [photos.jpeg_bytes(photos.random_photo(rng, size)) for size in sizes]


def _tensorflow_reference(data: bytes, size: int) -> np.ndarray:
    image = tf.image.resize(tf.io.decode_jpeg(data, channels=3), (size, size), antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8).numpy()


# 48 and 96: DCT scales of 1/4 and 1/2 of ~350 px photos; 384: larger than the photos.
@pytest.mark.parametrize("size", [48, 96, 160, 224, 299, 384])
def test_pictures_stay_close_to_tensorflows_antialiased_resize(sample_jpegs, size):
    rows = np.full((len(sample_jpegs), size, size, 3), 7, np.uint8)
    jpeg_blocks.decode_resized_block_into(sample_jpegs, rows)
    reference = np.stack([_tensorflow_reference(d, size) for d in sample_jpegs])
    difference = np.abs(rows.astype(np.int16) - reference.astype(np.int16)).mean()
    assert difference <= MAX_MEAN_DIFFERENCE


def test_an_image_at_the_output_size_gets_tensorflows_exact_pixels(sample_jpegs):
    rng = np.random.default_rng(1)
    data = photos.jpeg_bytes(photos.random_photo(rng, (224, 224)))
    row = np.empty((224, 224, 3), np.uint8)
    jpeg_blocks.decode_resized_into(data, row)
    np.testing.assert_array_equal(row, tf.io.decode_jpeg(data, channels=3).numpy())


def test_a_jpeg_libjpeg_turbo_rejects_still_arrives_in_its_row(sample_jpegs):
    """A GIF stands in for any image simplejpeg refuses: Pillow decodes it instead."""
    rng = np.random.default_rng(2)
    odd = photos.encoded(photos.random_photo(rng, (200, 260)), "GIF")
    block = [sample_jpegs[0], odd, sample_jpegs[1]]
    rows = np.zeros((3, 64, 64, 3), np.uint8)
    jpeg_blocks.decode_resized_block_into(block, rows)
    for i, data in enumerate([sample_jpegs[0], None, sample_jpegs[1]]):
        if data is not None:  # Its neighbours are where they belong.
            np.testing.assert_array_equal(
                rows[i], jpeg_blocks.decode_resized_into(data, np.empty_like(rows[i]))
            )
    expected = tf.image.resize(tf.io.decode_gif(odd)[0], (64, 64), antialias=True).numpy()
    assert np.abs(rows[1].astype(float) - expected).mean() <= 2 * MAX_MEAN_DIFFERENCE


def test_a_window_crops_before_the_resize(sample_jpegs):
    def middle(height, width):  # (top, left, height, width): the centre quarter
        return height // 4, width // 4, height // 2, width // 2

    differences = []
    for data in sample_jpegs:
        row = np.empty((64, 64, 3), np.uint8)
        jpeg_blocks.decode_resized_into(data, row, middle)
        full = tf.io.decode_jpeg(data, channels=3).numpy()
        top, left, h, w = middle(*full.shape[:2])
        crop = full[top : top + h, left : left + w]
        expected = tf.image.resize(crop, (64, 64), antialias=True).numpy()
        differences.append(np.abs(row.astype(float) - expected).mean())
    assert np.mean(differences) <= MAX_MEAN_DIFFERENCE


def test_bytes_that_are_no_image_name_their_position():
    rows = np.zeros((2, 32, 32, 3), np.uint8)
    rng = np.random.default_rng(3)
    good = photos.jpeg_bytes(photos.random_photo(rng, (80, 80)))
    with pytest.raises(ValueError, match="image 1 of a block"):
        jpeg_blocks.decode_resized_block_into([good, b"not an image"], rows)
