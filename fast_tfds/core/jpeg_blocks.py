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

import functools
import io
import math
from collections.abc import Sequence

import cv2
import numpy as np
import PIL.Image
import simplejpeg

from fast_tfds.core import aligned
from fast_tfds.core.dataset_hooks import Window

# The version of the pixels this module makes. Bump it with any change that alters a
# decoded pixel (scale choice, filter, rounding, a library's decoding options): the
# persistent caches (`fast_tfds.cache.persisted`) are keyed by it, so files of the
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
    return decode_jpeg_block_into(jpegs, aligned.empty((len(jpegs), *shape)))


def stored_size(data: bytes) -> tuple[int, int]:
    """(height, width) of a stored JPEG, from its header alone (Pillow's for a JPEG that
    libjpeg-turbo rejects, as the decoders here fall back to Pillow). Both back ends draw
    windows in it and lay out their picture caches by it."""
    try:
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:
        with PIL.Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    return height, width


def decode_resized_into(data: bytes, out: np.ndarray, window: Window | None = None) -> np.ndarray:
    """Decodes one JPEG into `out` ([H, W, 3] uint8), resized to exactly H x W.

    libjpeg-turbo decodes at a scale of n/8 in the DCT domain, which skips work and
    averages 8/n pixels into one (the antialiasing a shrink needs). Only the scales it
    runs with SIMD code (1/8, 2/8, 4/8 and 8/8; see `dct_eighths`) are used: the
    smallest of them whose result still covers the output, or the part of it that
    `window` keeps. The rest (less than a 2x shrink on one side at least) is a bilinear
    resize (OpenCV's INTER_LINEAR) after a small Gaussian blur where a side shrinks past
    1.5x (OpenCV's area filter where both shrink past 2x), close to
    `tf.image.resize(..., antialias=True)`; docs/reading.md compares the two.
    An image already at the output size is decoded straight into `out`, with exactly
    TensorFlow's pixels. `window`, if given, picks the part of the image to keep (a crop
    to a box) before the resize. A JPEG that libjpeg-turbo rejects is decoded by Pillow,
    so it still arrives in its place.
    """
    out_height, out_width = out.shape[:2]
    try:
        stored = simplejpeg.decode_jpeg_header(data)[:2]
        # A window of the whole picture keeps it all, as no window does.
        whole = window is None or tuple(window(*stored)) == (0, 0, *stored)
        if whole and stored == (out_height, out_width):
            simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=True, buffer=out)
            return out
    except ValueError:  # simplejpeg's error for data it cannot decode: Pillow below.
        pass
    image, (top, left, crop_height, crop_width), (height, width) = decode_covering(
        data, (out_height, out_width), window
    )
    # The window in the pixels of the decoded (scaled) image.
    fy, fx = image.shape[0] / height, image.shape[1] / width
    y0, x0 = min(int(top * fy), image.shape[0] - 1), min(int(left * fx), image.shape[1] - 1)
    y1 = max(y0 + 1, min(image.shape[0], round((top + crop_height) * fy)))
    x1 = max(x0 + 1, min(image.shape[1], round((left + crop_width) * fx)))
    _resize_into(image[y0:y1, x0:x1], out)
    return out


def decode_covering(
    data: bytes, output_size: tuple[int, int], window: Window | None = None
) -> tuple[np.ndarray, tuple[int, int, int, int], tuple[int, int]]:
    """(image, window, stored size): one JPEG decoded whole at the smallest of
    `DCT_EIGHTHS` at which the part `window` keeps ((top, left, height, width) in the
    stored pixels, from the stored (height, width); default: all of it) still covers
    `output_size`, for a caller that cuts the part itself (`decode_resized_into`, the
    warp of the stronger recipes). A JPEG that libjpeg-turbo rejects is decoded whole
    by Pillow."""
    try:
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
        part = (window or _whole)(height, width)
        eighths = dct_eighths(part[2:], output_size)
        # simplejpeg takes the smallest scale whose result is at least this large:
        # exactly eighths/8 (for a side of 8 pixels or more, (eighths - 1)/8 gives fewer).
        image = simplejpeg.decode_jpeg(
            data,
            colorspace="RGB",
            fastdct=True,
            min_height=math.ceil(height * eighths / 8),
            min_width=math.ceil(width * eighths / 8),
        )
    except ValueError:  # simplejpeg's error for data it cannot decode.
        image = _decode_with_pillow(data)
        height, width = image.shape[:2]
        part = (window or _whole)(height, width)
    return image, tuple(int(v) for v in part), (height, width)


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
    return decode_resized_block_into(jpegs, aligned.empty((len(jpegs), *shape)))


def resize_into(image: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Resizes a decoded [h, w, 3] uint8 image into `out` with the filter of
    `decode_resized_into` (bilinear, blurred first past 1.5x; the area filter past 2x)."""
    _resize_into(image, out)
    return out


# The DCT scales (in eighths) for which libjpeg-turbo has SIMD inverse DCTs. The others
# run plain C: 5/8, 6/8 and 7/8 decode slower than the full image, and 3/8 slower than
# 4/8, so the next of these scales up (plus a resize) beats them (docs/design.md).
DCT_EIGHTHS = (1, 2, 4, 8)


def dct_eighths(part: tuple[int, int], out: tuple[int, int]) -> int:
    """The DCT scale, n of n/8, at which to decode a JPEG of which `part` ((height,
    width), the whole image or a crop window) is resized to `out`: the smallest of
    `DCT_EIGHTHS` at which the part still covers the output, else 8 (a full decode,
    and an enlargement)."""
    (height, width), (out_height, out_width) = part, out
    for n in DCT_EIGHTHS:
        if height * n >= 8 * out_height and width * n >= 8 * out_width:
            return n
    return 8


def _whole(height: int, width: int) -> tuple[int, int, int, int]:
    return 0, 0, height, width


@functools.cache  # once per process
def one_opencv_thread() -> None:
    """Makes OpenCV run on the calling thread only, once per process.

    The readers resize, and the augmentation kernels work, in parallel threads or processes
    of their own, and OpenCV's pool would compete with them for the same cores. Set on first
    use, not at import: importing our packages changes nothing in a process.
    """
    cv2.setNumThreads(1)


def _resize_into(image: np.ndarray, out: np.ndarray) -> None:
    one_opencv_thread()
    height, width = out.shape[:2]
    if image.shape[:2] == (height, width):
        out[...] = image
        return
    # After the DCT-scaled decode, which already averaged 8/n pixels into one, less than a
    # 2x shrink is left on the shorter side (the next smaller scale, half this one, did not
    # cover the output). Bilinear alone there folds the detail between the output's
    # Nyquist frequency and the decoded image's back into the picture; a small Gaussian
    # blur first, sized per axis for what that axis shrinks (the longer side of a picture
    # whose aspect differs from the output's shrinks more), removes most of it, for a
    # fraction of the cost of OpenCV's area filter at fractional ratios. Past 2x on both
    # sides (only past the 1/8 scale) the area filter does it; its cost there is small
    # beside the decode of so large a picture.
    shrink_y, shrink_x = image.shape[0] / height, image.shape[1] / width
    image = np.ascontiguousarray(image)
    if shrink_y > 2 and shrink_x > 2:
        cv2.resize(image, (width, height), dst=out, interpolation=cv2.INTER_AREA)
        return
    taps_y, taps_x = _blur_taps(shrink_y), _blur_taps(shrink_x)
    if taps_y > 1 or taps_x > 1:
        image = cv2.GaussianBlur(image, (taps_x, taps_y), 0)
    cv2.resize(image, (width, height), dst=out, interpolation=cv2.INTER_LINEAR)


def _blur_taps(shrink: float) -> int:
    """Taps of the Gaussian blur before a bilinear shrink: none up to 1.5x, where bilinear
    alone stays close to an antialiased resize, then 3, 5, 7, ... for each further 1x."""
    return 1 if shrink <= 1.5 else 2 * math.ceil(shrink - 0.5) - 1


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
