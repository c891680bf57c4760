"""Block decoding at any output size: every image in its row, close to TensorFlow's pictures.

The reference is what a user would otherwise write with care: `tf.io.decode_jpeg` and then
`tf.image.resize(..., antialias=True)`. The block decoder decodes at a reduced DCT scale and
resizes the rest, so its pixels differ a little. Each output size has a bound on that
difference that the filters a decoder must not use fail, and the tests check that they do,
on the same pictures: a plain bilinear resize without antialiasing and a nearest-neighbour
resize (both from the full decode; they alias), and a DCT scale one step too small (it
blurs, as the result is enlarged). docs/reading.md gives the figures.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
import simplejpeg
import tensorflow as tf

from fast_tfds.core import jpeg_blocks
from fast_tfds.samples import photos

SIZES = (48, 96, 160, 224, 299, 384)
# Mean absolute difference per channel value (0-255) from the antialiased reference, over
# `detailed_jpegs(size)`, for each output size. Our decoder measured 2.4-6.2 on them, the
# wrong filters 7.7-19 (docs/reading.md).
MAX_MEAN_DIFFERENCE = {48: 8.5, 96: 7.0, 160: 5.0, 224: 6.5, 299: 7.0, 384: 5.0}
# The photos of the sample archives (300-420 px a side) are mostly smooth: on them every
# filter is within a few levels, so they hold the decoder to a looser, shared bound.
MAX_MEAN_DIFFERENCE_PHOTOS = 3.5


def detailed_picture(rng: np.random.Generator, height: int, width: int, size: int) -> np.ndarray:
    """A photo under a zone plate and a fine checkerboard, drawn for a shrink to `size`.

    The zone plate's rings reach 0.45 cycles per output pixel at its rim: the detail that
    the antialiased reference keeps and a decode at too small a scale loses. The checks
    are at 1 cycle per output pixel, past the output's Nyquist frequency, where the
    reference's triangle filter has a zero: what a filter that does not antialias folds
    back into the picture as a moire. A plain photo enlarged to these sizes has little of
    either.
    """
    photo = np.asarray(photos.random_photo(rng, (width, height)), np.float32)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    shrink = min(height, width) / size
    cy, cx = rng.uniform(0.3, 0.7) * height, rng.uniform(0.3, 0.7) * width
    radius = math.hypot(max(cy, height - cy), max(cx, width - cx))
    rings = np.cos(math.pi * 0.45 / shrink / radius * ((y - cy) ** 2 + (x - cx) ** 2))
    checks = np.cos(2 * math.pi / shrink * x) * np.cos(2 * math.pi / shrink * y)
    picture = 0.5 * photo + 64 + 40 * rings[..., None] + 40 * checks[..., None]
    return np.clip(picture, 0, 255).astype(np.uint8)


def detailed_jpegs(size: int) -> list[bytes]:
    """Pictures whose shorter side is 2.2-5.2 times the output size, so every size is a
    real shrink, and both the 4/8 and the 2/8 DCT scale are taken."""
    rng = np.random.default_rng(size)
    jpegs = []
    for short in (2.2, 2.7, 3.3, 3.9, 4.5, 5.2):
        sides = [int(size * short), int(size * short * rng.uniform(1.0, 1.25))]
        height, width = sides if rng.random() < 0.5 else sides[::-1]
        picture = detailed_picture(rng, height, width, size)
        jpegs.append(simplejpeg.encode_jpeg(picture, quality=90, colorspace="RGB"))
    return jpegs


@pytest.fixture(scope="module")
def sample_jpegs() -> list[bytes]:
    """Photos at the sizes the sample archives have (about 300-420 px a side)."""
    rng = np.random.default_rng(7)
    sizes = [(int(rng.integers(300, 420)), int(rng.integers(300, 420))) for _ in range(12)]
    return [photos.jpeg_bytes(photos.random_photo(rng, size)) for size in sizes]


def _tensorflow(data: bytes, size: int, **resize) -> np.ndarray:
    image = tf.image.resize(tf.io.decode_jpeg(data, channels=3), (size, size), **resize)
    return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8).numpy()


def _reference(data: bytes, size: int) -> np.ndarray:
    return _tensorflow(data, size, antialias=True)


def _decode_at(data: bytes, eighths: int) -> np.ndarray:
    """Decoded at the DCT scale eighths/8 (simplejpeg takes the smallest that is this large)."""
    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    image = simplejpeg.decode_jpeg(
        data,
        colorspace="RGB",
        fastdct=True,
        min_height=math.ceil(height * eighths / 8),
        min_width=math.ceil(width * eighths / 8),
    )
    assert image.shape[:2] == (math.ceil(height * eighths / 8), math.ceil(width * eighths / 8))
    return image


def _one_scale_too_small(data: bytes, size: int) -> np.ndarray:
    """Decoded at the largest of the scales 1/8, 2/8, 4/8 that does not cover the output,
    and enlarged bilinearly."""
    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    short = [n for n in (1, 2, 4) if math.ceil(min(height, width) * n / 8) < size]
    image = _decode_at(data, short[-1])
    assert min(image.shape[:2]) < size  # It is enlarged: the test picked a wrong scale.
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_LINEAR)


def _distance(images, references) -> float:
    """Mean absolute difference per channel value, over all images."""
    return float(
        np.mean(
            [
                np.abs(a.astype(np.int16) - b.astype(np.int16)).mean()
                for a, b in zip(images, references, strict=True)
            ]
        )
    )


@pytest.mark.parametrize("size", SIZES)
def test_each_size_is_within_a_bound_that_the_wrong_filters_exceed(size):
    jpegs = detailed_jpegs(size)
    sides = [simplejpeg.decode_jpeg_header(data)[:2] for data in jpegs]
    assert {jpeg_blocks.dct_eighths(s, (size, size)) for s in sides} == {2, 4}
    references = [_reference(data, size) for data in jpegs]
    rows = np.full((len(jpegs), size, size, 3), 7, np.uint8)
    jpeg_blocks.decode_resized_block_into(jpegs, rows)
    bound = MAX_MEAN_DIFFERENCE[size]
    ours = _distance(rows, references)
    wrong = {
        "plain bilinear": [_tensorflow(data, size) for data in jpegs],
        "nearest neighbour": [_tensorflow(data, size, method="nearest") for data in jpegs],
        "one DCT scale too small": [_one_scale_too_small(data, size) for data in jpegs],
    }
    for name, images in wrong.items():
        assert _distance(images, references) > bound, f"{name} passes the bound at {size}"
    assert ours <= bound, f"{ours:.2f} from the antialiased resize at {size}, bound {bound}"


def test_past_2x_after_the_smallest_scale_the_rest_is_antialiased():
    """Pictures 17-25 times the output: the 1/8 scale leaves more than a 2x shrink,
    which a bilinear resize of the 1/8 decode would alias."""
    size = 32
    rng = np.random.default_rng(3)
    jpegs = [
        simplejpeg.encode_jpeg(detailed_picture(rng, h, w, size), quality=90, colorspace="RGB")
        for h, w in ((560, 640), (700, 600), (800, 780), (620, 720))
    ]
    references = [_reference(data, size) for data in jpegs]
    ours = [jpeg_blocks.decode_resized_into(d, np.empty((size, size, 3), np.uint8)) for d in jpegs]
    eighth = [_decode_at(d, 1) for d in jpegs]
    assert all(min(image.shape[:2]) > 2 * size for image in eighth)
    aliased = [cv2.resize(image, (size, size), interpolation=cv2.INTER_LINEAR) for image in eighth]
    # Measured: 3.1 for ours, 7.6 for bilinear after the 1/8 scale.
    assert _distance(ours, references) <= 5.0
    assert _distance(aliased, references) > 5.0


@pytest.mark.parametrize("size", [48, 96, 160, 224, 299, 384])
def test_the_sample_photos_stay_close_to_tensorflows_antialiased_resize(sample_jpegs, size):
    rows = np.full((len(sample_jpegs), size, size, 3), 7, np.uint8)
    jpeg_blocks.decode_resized_block_into(sample_jpegs, rows)
    references = [_reference(d, size) for d in sample_jpegs]
    assert _distance(rows, references) <= MAX_MEAN_DIFFERENCE_PHOTOS


def test_the_scale_is_the_smallest_simd_scale_that_covers_the_part_kept():
    assert jpeg_blocks.dct_eighths((400, 400), (50, 50)) == 1
    assert jpeg_blocks.dct_eighths((400, 400), (51, 50)) == 2
    assert jpeg_blocks.dct_eighths((400, 400), (101, 100)) == 4
    assert jpeg_blocks.dct_eighths((400, 400), (200, 200)) == 4
    assert jpeg_blocks.dct_eighths((400, 400), (201, 100)) == 8  # 7/8, 6/8, 5/8 are not taken.
    assert jpeg_blocks.dct_eighths((400, 300), (224, 224)) == 8  # Enlarged.


def test_an_image_at_the_output_size_gets_tensorflows_exact_pixels():
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
    assert np.abs(rows[1].astype(float) - expected).mean() <= 2 * MAX_MEAN_DIFFERENCE_PHOTOS


def test_a_window_takes_the_scale_that_covers_the_crop():
    """The centre quarter of pictures 4.2-5 times the output a side, at 96 px (its rings
    drawn for the crop's shrink): the whole
    picture would be covered at 2/8, the crop needs 4/8. Decoding at the scale the whole
    picture needs, then cropping and enlarging, fails the bound."""
    size = 96
    rng = np.random.default_rng(11)
    sides = [[int(size * rng.uniform(4.2, 5.0)) for _ in range(2)] for _ in range(6)]
    jpegs = [
        simplejpeg.encode_jpeg(detailed_picture(rng, h, w, 2 * size), quality=90, colorspace="RGB")
        for h, w in sides
    ]

    def middle(height, width):  # (top, left, height, width): the centre quarter
        return height // 4, width // 4, height // 2, width // 2

    ours, whole_scale, references = [], [], []
    for data in jpegs:
        row = np.empty((size, size, 3), np.uint8)
        ours.append(jpeg_blocks.decode_resized_into(data, row, middle))
        full = tf.io.decode_jpeg(data, channels=3).numpy()
        top, left, h, w = middle(*full.shape[:2])
        references.append(_tensorflow_crop(full[top : top + h, left : left + w], size))
        quarter = _decode_at(data, 2)
        assert min(quarter.shape[:2]) >= size  # 2/8 covers the whole picture...
        qt, ql, qh, qw = middle(*quarter.shape[:2])
        crop = np.ascontiguousarray(quarter[qt : qt + qh, ql : ql + qw])
        assert min(crop.shape[:2]) < size  # ...not its crop.
        whole_scale.append(cv2.resize(crop, (size, size), interpolation=cv2.INTER_LINEAR))
    # Measured: 4.8 for ours, 14.9 for the scale of the whole picture.
    assert _distance(ours, references) <= 8.0
    assert _distance(whole_scale, references) > 8.0


def _tensorflow_crop(crop: np.ndarray, size: int) -> np.ndarray:
    image = tf.image.resize(crop, (size, size), antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8).numpy()


def test_bytes_that_are_no_image_name_their_position():
    rows = np.zeros((2, 32, 32, 3), np.uint8)
    rng = np.random.default_rng(3)
    good = photos.jpeg_bytes(photos.random_photo(rng, (80, 80)))
    with pytest.raises(ValueError, match="image 1 of a block"):
        jpeg_blocks.decode_resized_block_into([good, b"not an image"], rows)
