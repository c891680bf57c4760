"""The block decoder's edges that a mutation run (scripts/mutate.sh) found untested: each
row's own crop window, images libjpeg-turbo rejects, and the whole text of its errors.

The references are independent: TensorFlow's decoders, and Pillow/NumPy crops.
"""

from __future__ import annotations

import re

import cv2
import numpy as np
import PIL.Image
import pytest
import simplejpeg
import tensorflow as tf

from fast_tfds.core import jpeg_blocks
from fast_tfds.samples import photos


def _photo(seed: int, size: tuple[int, int], fmt: str = "JPEG", **kwargs) -> bytes:
    image = photos.random_photo(np.random.default_rng(seed), size)  # size: (width, height)
    if fmt == "JPEG":
        return photos.jpeg_bytes(image, **kwargs)
    return photos.encoded(image.convert(kwargs.pop("mode", "RGB")), fmt, **kwargs)


def _tensorflows(data: bytes) -> np.ndarray:
    return tf.io.decode_image(data, channels=3, expand_animations=False).numpy()


def _window(top: int, left: int, height: int, width: int):
    def window(image_height: int, image_width: int) -> tuple[int, int, int, int]:
        return top, left, height, width

    return window


def _linear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    return cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)


def test_each_row_of_a_block_is_decoded_with_its_own_window():
    # 80 x 108 rows from 90 x 120 images: no DCT scale covers it (7/8 would not), so the
    # whole image is decoded and the window then resized bilinearly.
    jpegs = [_photo(seed, (120, 90)) for seed in (1, 2, 3)]
    windows = [_window(10, 20, 40, 60), None, _window(30, 0, 60, 120)]
    rows = np.zeros((3, 80, 108, 3), np.uint8)
    jpeg_blocks.decode_resized_block_into(jpegs, rows, windows)
    for row, jpeg, window in zip(rows, jpegs, windows, strict=True):
        top, left, height, width = (window or _window(0, 0, 90, 120))(90, 120)
        crop = _tensorflows(jpeg)[top : top + height, left : left + width]
        np.testing.assert_array_equal(row, _linear(crop, 80, 108))


def test_a_window_at_the_output_size_is_cut_at_full_resolution():
    jpeg = _photo(4, (120, 90))
    out = jpeg_blocks.decode_resized_into(
        jpeg, np.zeros((40, 60, 3), np.uint8), _window(10, 20, 40, 60)
    )
    np.testing.assert_array_equal(out, _tensorflows(jpeg)[10:50, 20:80])


def test_a_window_of_an_image_at_the_output_size_is_enlarged_not_ignored():
    jpeg = _photo(5, (120, 90))
    window = _window(10, 20, 40, 60)
    out = jpeg_blocks.decode_resized_into(jpeg, np.zeros((90, 120, 3), np.uint8), window)
    np.testing.assert_array_equal(out, _linear(_tensorflows(jpeg)[10:50, 20:80], 90, 120))


def test_an_image_smaller_than_the_output_is_enlarged_whole():
    jpeg = _photo(6, (120, 90))
    out = jpeg_blocks.decode_resized_into(jpeg, np.zeros((180, 240, 3), np.uint8))
    np.testing.assert_array_equal(out, _linear(_tensorflows(jpeg), 180, 240))


# (output height, width) for a 180 x 240 image (height x width), and the filter the
# docstring promises: bilinear, after a Gaussian blur of (rows, columns) taps on each axis
# that shrinks past 1.5x (3 taps up to 2.5x, 5 up to 3.5x), and the area filter where both
# axes shrink past 2x.
@pytest.mark.parametrize(
    "size, blur, interpolation",
    [
        ((150, 200), None, cv2.INTER_LINEAR),  # 1.2x: bilinear alone
        ((200, 150), (1, 3), cv2.INTER_LINEAR),  # an enlargement down, 1.6x across
        ((80, 200), (3, 1), cv2.INTER_LINEAR),  # 2.25x down, 1.2x across
        ((100, 100), (3, 3), cv2.INTER_LINEAR),  # 1.8x down, 2.4x across
        ((60, 200), (5, 1), cv2.INTER_LINEAR),  # 3x down, 1.2x across
        ((60, 80), None, cv2.INTER_AREA),  # 3x and 3x: both past 2x
    ],
)
def test_the_resize_filter_follows_the_shrink_of_each_axis(size, blur, interpolation):
    image = _tensorflows(_photo(7, (240, 180)))
    out = jpeg_blocks.resize_into(image, np.zeros((*size, 3), np.uint8))
    source = image if blur is None else cv2.GaussianBlur(image, blur[::-1], 0)
    np.testing.assert_array_equal(out, cv2.resize(source, size[::-1], interpolation=interpolation))


@pytest.mark.parametrize("fmt, mode", [("GIF", "RGB"), ("PNG", "L"), ("PNG", "RGBA")])
def test_an_image_libjpeg_turbo_rejects_arrives_in_its_row(fmt, mode):
    data = _photo(8, (120, 90), fmt, mode=mode)
    with pytest.raises(ValueError):
        simplejpeg.decode_jpeg_header(data)
    pixels = _tensorflows(data)
    if mode == "RGBA":  # TensorFlow drops the alpha; Pillow's RGB does too.
        pixels = pixels[..., :3]
    at_size = jpeg_blocks.decode_resized_into(data, np.zeros((90, 120, 3), np.uint8))
    np.testing.assert_array_equal(at_size, pixels)
    rows = jpeg_blocks.decode_resized_block_into(
        [_photo(9, (120, 90)), data], np.zeros((2, 45, 60, 3), np.uint8)
    )
    # In its row, resized with the decoder's filter like any other picture.
    expected = jpeg_blocks.resize_into(pixels, np.zeros((45, 60, 3), np.uint8))
    np.testing.assert_array_equal(rows[1], expected)


def test_a_block_and_its_rows_must_be_as_many():
    jpegs = [_photo(10, (16, 16))] * 3
    rows = np.zeros((2, 16, 16, 3), np.uint8)
    with pytest.raises(ValueError, match=r"^3 JPEGs for 2 rows$"):
        jpeg_blocks.decode_jpeg_block_into(np.array(jpegs, dtype=object), rows)
    with pytest.raises(ValueError, match=r"^3 JPEGs for 2 rows$"):
        jpeg_blocks.decode_resized_block_into(jpegs, rows)


def test_an_image_that_does_not_decode_is_named_with_what_to_do():
    jpegs = [_photo(11, (16, 16)), b"neither a JPEG nor any image"]
    with pytest.raises(ValueError) as excinfo:
        jpeg_blocks.decode_resized_block_into(jpegs, np.zeros((2, 16, 24, 3), np.uint8))
    assert re.fullmatch(
        r"fast_tfds: image 1 of a block is not a 16x24 RGB JPEG as the dataset's features say: "
        r"it does not decode \(.+\)\. "
        + re.escape(
            "Check the files with `fast-tfds verify` and rebuild the dataset, "
            "or read it with image_size=None."
        ),
        str(excinfo.value),
    ), str(excinfo.value)


# A 240 x 320 photo: libjpeg-turbo's scale for each output size is the smallest n/8 that
# covers it; TensorFlow decodes at 1/ratio in the same DCT domain.
@pytest.mark.parametrize("size, ratio", [((100, 130), 2), ((50, 70), 4), ((30, 40), 8)])
def test_the_decode_is_at_the_smallest_dct_scale_that_covers_the_output(size, ratio):
    jpeg = _photo(13, (320, 240))
    scaled = tf.io.decode_jpeg(jpeg, channels=3, ratio=ratio).numpy()
    out = jpeg_blocks.decode_resized_into(jpeg, np.zeros((*size, 3), np.uint8))
    np.testing.assert_array_equal(out, _linear(scaled, *size))


def test_a_one_pixel_window_is_that_pixel_at_any_output_size():
    # Noise, taller than wide (120 x 90): each pixel differs from the ones beside it.
    noise = np.random.default_rng(12).integers(0, 256, (120, 90, 3), np.uint8)
    jpeg = photos.jpeg_bytes(PIL.Image.fromarray(noise), quality=95)
    whole = _tensorflows(jpeg)
    for top, left in [(40, 50), (119, 89), (0, 0), (119, 0)]:
        neighbours = whole[max(top - 1, 0) : top + 2, max(left - 1, 0) : left + 2]
        assert (neighbours != whole[top, left]).any(axis=-1).sum() == neighbours[..., 0].size - 1
        out = jpeg_blocks.decode_resized_into(
            jpeg, np.zeros((4, 6, 3), np.uint8), _window(top, left, 1, 1)
        )
        assert (out == whole[top, left]).all(), (top, left)


def test_a_new_block_holds_each_image_in_its_row():
    jpegs = [_photo(seed, (120, 90)) for seed in (14, 15)]
    rows = jpeg_blocks.decode_resized_block(jpegs, (80, 108, 3))
    assert rows.shape == (2, 80, 108, 3) and rows.dtype == np.uint8
    for row, jpeg in zip(rows, jpegs, strict=True):
        np.testing.assert_array_equal(row, _linear(_tensorflows(jpeg), 80, 108))
