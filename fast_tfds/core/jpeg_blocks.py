"""Decoding a block of same-size JPEGs at once, with simplejpeg (libjpeg-turbo).

Where every stored image already has the output size (config '224' read at 224),
each decoded image has a place before it is decoded: its row of the reader's
in-memory cache, or of a batch. Decoding there skips a tensor allocation and a
copy per image. simplejpeg (libjpeg-turbo) releases the GIL while it decodes, so
the reader's parallel map keeps every core busy. With the fast integer DCT and
smooth ("fancy") chroma upsampling it gives exactly the pixels of
`tf.io.decode_jpeg(channels=3)` with TensorFlow's defaults, which every other path
of the reader (and `tfds.load`) uses; `tests/read/test_jpeg_blocks.py` checks it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import cv2
import numpy as np
import PIL.Image
import simplejpeg

from fast_tfds.core.dataset_hooks import Window

# The version of the pixels this module makes. Bump it with any change that alters a
# decoded pixel (scale choice, filter, rounding, a library's decoding options): the
# persistent caches (`fast_tfds.cache.persistent`) are keyed by it, so files of the
# old pixels are never served.
DECODER_VERSION = 1


def decode_jpeg_block_into(jpegs: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Decodes `jpegs[i]` into `rows[i]` ([n, H, W, 3] uint8) and returns `rows`.

    An image that is not a JPEG of exactly H x W is an error that says which,
    never a row left with stale pixels.
    """
    if len(jpegs) != len(rows):
        raise ValueError(f"{len(jpegs)} JPEGs for {len(rows)} rows")
    for i, data in enumerate(jpegs):
        try:
            image = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=True, buffer=rows[i])
        except ValueError as err:  # simplejpeg's errors for bad data and small buffers.
            raise ValueError(_message(i, rows, f"it does not decode ({err})")) from None
        if image.shape != rows.shape[1:]:
            raise ValueError(_message(i, rows, f"it is {image.shape[0]}x{image.shape[1]}"))
    return rows


def decode_jpeg_block(jpegs: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """Decodes a block of JPEGs of one known shape into a new [n, *shape] uint8 array."""
    return decode_jpeg_block_into(jpegs, np.empty((len(jpegs), *shape), np.uint8))


def decode_resized_into(data: bytes, out: np.ndarray, window: Window | None = None) -> np.ndarray:
    """Decodes one JPEG into `out` ([H, W, 3] uint8), resized to exactly H x W.

    libjpeg-turbo decodes at a scale of n/8 in the DCT domain: asking for the smallest
    scale whose result still covers the output skips most of the work of a full
    decode. The rest (less than a 2x shrink) is a bilinear resize (OpenCV's INTER_LINEAR;
    its area filter past 2x), close to `tf.image.resize(..., antialias=True)`; docs/reading.md
    gives the measured difference. An image already at the output size is decoded
    straight into `out`, with exactly TensorFlow's pixels. `window`, if given, picks
    the part of the image to keep (a crop to a box) before the resize. A JPEG that
    libjpeg-turbo rejects is decoded by Pillow, so it still arrives in its place.
    """
    out_height, out_width = out.shape[:2]
    try:
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
        if window is None and (height, width) == (out_height, out_width):
            simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=True, buffer=out)
            return out
        top, left, crop_height, crop_width = (window or _whole)(height, width)
        scale = min(1.0, max(out_height / crop_height, out_width / crop_width))
        image = simplejpeg.decode_jpeg(
            data,
            colorspace="RGB",
            fastdct=True,
            min_height=math.ceil(height * scale),
            min_width=math.ceil(width * scale),
        )
    except ValueError:  # simplejpeg's error for data it cannot decode.
        image = _decode_with_pillow(data)
        height, width = image.shape[:2]
        top, left, crop_height, crop_width = (window or _whole)(height, width)
    # The window in the pixels of the decoded (scaled) image.
    fy, fx = image.shape[0] / height, image.shape[1] / width
    y0, x0 = min(int(top * fy), image.shape[0] - 1), min(int(left * fx), image.shape[1] - 1)
    y1 = max(y0 + 1, min(image.shape[0], round((top + crop_height) * fy)))
    x1 = max(x0 + 1, min(image.shape[1], round((left + crop_width) * fx)))
    _resize_into(image[y0:y1, x0:x1], out)
    return out


def decode_resized_block_into(
    jpegs: Sequence[bytes], rows: np.ndarray, windows: Sequence[Window | None] | None = None
) -> np.ndarray:
    """`decode_resized_into` for each JPEG of a block, into `rows[i]`; returns `rows`."""
    if len(jpegs) != len(rows):
        raise ValueError(f"{len(jpegs)} JPEGs for {len(rows)} rows")
    for i, data in enumerate(jpegs):
        try:
            decode_resized_into(data, rows[i], None if windows is None else windows[i])
        except (OSError, ValueError) as err:
            raise ValueError(_message(i, rows, f"it does not decode ({err})")) from None
    return rows


def decode_resized_block(jpegs: Sequence[bytes], shape: tuple[int, int, int]) -> np.ndarray:
    """`decode_resized_block_into` a new [n, *shape] uint8 array."""
    return decode_resized_block_into(jpegs, np.empty((len(jpegs), *shape), np.uint8))


def resize_into(image: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Resizes a decoded [h, w, 3] uint8 image into `out` with the filter of
    `decode_resized_into` (bilinear, or the area filter for shrinks past 2x)."""
    _resize_into(image, out)
    return out


def _whole(height: int, width: int) -> tuple[int, int, int, int]:
    return 0, 0, height, width


_opencv_single_threaded = False


def _resize_into(image: np.ndarray, out: np.ndarray) -> None:
    global _opencv_single_threaded
    if not _opencv_single_threaded:
        # The readers resize in parallel threads or processes of their own, and
        # OpenCV's pool would compete with them for the same cores. Set on first
        # use, not at import: importing our packages changes nothing in a process.
        cv2.setNumThreads(1)
        _opencv_single_threaded = True
    height, width = out.shape[:2]
    if image.shape[:2] == (height, width):
        out[...] = image
        return
    # After the DCT-scaled decode, which already averaged 8/n pixels into one, at most
    # a 2x shrink is left (n/(n-1) < 2 for scales n/8 > 1/8): bilinear there stays
    # within a few levels of an antialiased resize of the full image, at a fraction of
    # the cost of OpenCV's area filter for fractional ratios. Larger shrinks (past
    # the 1/8 scale) take the area filter, so they do not alias.
    far = image.shape[0] > 2 * height or image.shape[1] > 2 * width
    cv2.resize(
        np.ascontiguousarray(image),
        (width, height),
        dst=out,
        interpolation=cv2.INTER_AREA if far else cv2.INTER_LINEAR,
    )


def _decode_with_pillow(data: bytes) -> np.ndarray:
    with PIL.Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def _message(i: int, rows: np.ndarray, problem: str) -> str:
    height, width = rows.shape[1:3]
    return (
        f"fast_tfds: image {i} of a block is not a {height}x{width} RGB JPEG as the "
        f"dataset's features say: {problem}. Check the files with `fast-tfds verify` "
        "and rebuild the dataset, or read it with image_size=None."
    )
