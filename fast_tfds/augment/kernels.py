"""Windows applied to a batch: crop + resize -> flip -> colour jitter, uint8 in and out.

The pictures are decoded already (rows of a cache, or a decoder's output), each of
its own size; the output is a preallocated [B, H, W, 3] uint8 batch, written in
place. OpenCV does the pixel work and releases the GIL, so a batch is split into
blocks that run in threads (OpenCV's own pool is set to one thread: the blocks are
the parallelism).

- Crop + resize: the window is cut in whole pixels of the picture (a view, no copy)
  and resized with the filter of the shared decoder (`jpeg_blocks.resize_into`):
  bilinear, the area filter only for shrinks past 2x, where bilinear would alias.
- Flip: `cv2.flip` in place.
- Colour jitter: brightness, contrast, saturation and hue are each linear in RGB,
  so together they are one 3x4 affine map, applied by one `cv2.transform` pass with
  saturation to 0..255 at the end (see `Augment` for the definitions). Hue is a
  rotation of the YIQ chroma plane rather than an HSV round trip: one matrix, not
  three passes with a branchy conversion, and it keeps each pixel's luma.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Sequence

import cv2
import numpy as np

from fast_tfds.augment.windows import Windows
from fast_tfds.core import jpeg_blocks

# torchvision's grey level (rgb_to_grayscale), used by contrast and saturation.
GREY = np.array([0.2989, 0.587, 0.114])
_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
_RGB = np.linalg.inv(_YIQ)


def apply_into(
    pictures: Sequence[np.ndarray],
    windows: Windows,
    out: np.ndarray,
    *,
    scale_y=None,
    scale_x=None,
    num_threads: int = 1,
) -> np.ndarray:
    """Crops windows[i] out of pictures[i], resizes it into out[i], flips and jitters it.

    `windows` are in the pixels of the pictures they were drawn for; `scale_y`,
    `scale_x` (one factor per example, or None for 1) map them to the pixels of
    `pictures`, e.g. cache height / stored height for a picture kept in a cache at
    another resolution. Returns `out`.
    """
    n = len(windows)
    if len(pictures) != n or out.shape[0] != n or out.dtype != np.uint8 or out.shape[3:] != (3,):
        raise ValueError(
            f"{len(pictures)} pictures and {n} windows for an output of "
            f"{out.dtype}{list(out.shape)}: need one picture and one window per "
            "row of a [B, H, W, 3] uint8 batch"
        )
    boxes = source_boxes(pictures, windows, scale_y, scale_x)
    _parallel(n, num_threads, lambda i: _one(pictures[i], boxes[i], windows, i, out[i]))
    return out


def source_boxes(pictures, windows: Windows, scale_y=None, scale_x=None) -> np.ndarray:
    """[n, 4] int64 (y0, y1, x0, x1): each window in whole pixels of its picture,
    at least one pixel, inside the picture."""
    n = len(windows)
    sy = np.ones(n) if scale_y is None else np.broadcast_to(np.asarray(scale_y, np.float64), n)
    sx = np.ones(n) if scale_x is None else np.broadcast_to(np.asarray(scale_x, np.float64), n)
    heights = np.array([p.shape[0] for p in pictures], np.int64)
    widths = np.array([p.shape[1] for p in pictures], np.int64)
    y0 = np.clip(np.round(windows.top * sy), 0, heights - 1).astype(np.int64)
    x0 = np.clip(np.round(windows.left * sx), 0, widths - 1).astype(np.int64)
    y1 = np.clip(np.round((windows.top + windows.height) * sy), y0 + 1, heights).astype(np.int64)
    x1 = np.clip(np.round((windows.left + windows.width) * sx), x0 + 1, widths).astype(np.int64)
    return np.stack([y0, y1, x0, x1], axis=1)


def finish_into(out: np.ndarray, windows: Windows, i: int) -> None:
    """Flip and jitter of example i on its already cropped and resized picture `out`."""
    if windows.flip[i]:
        cv2.flip(out, 1, dst=out)
    if windows.jittered(i):
        jitter_into(
            out,
            float(windows.brightness[i]),
            float(windows.contrast[i]),
            float(windows.saturation[i]),
            float(windows.hue[i]),
        )


def jitter_into(
    image: np.ndarray, brightness: float, contrast: float, saturation: float, hue: float
) -> None:
    """Colour jitter of one [h, w, 3] uint8 RGB picture, in place."""
    cv2.transform(image, jitter_matrix(image, brightness, contrast, saturation, hue), dst=image)


def jitter_matrix(
    image: np.ndarray, brightness: float, contrast: float, saturation: float, hue: float
) -> np.ndarray:
    """The 3x4 affine map (RGB -> RGB, last column the offset) of the four factors."""
    linear = np.eye(3) * brightness
    offset = np.zeros(3)
    if contrast != 1:
        # The blend's grey level is the mean of the brightness-adjusted picture.
        mean = brightness * float(np.dot(cv2.mean(image)[:3], GREY))
        linear = contrast * linear
        offset = np.full(3, (1 - contrast) * mean)
    colour = np.eye(3)
    if saturation != 1:
        colour = saturation * np.eye(3) + (1 - saturation) * np.outer(np.ones(3), GREY)
    if hue != 0:
        angle = 2 * np.pi * hue
        cos, sin = np.cos(angle), np.sin(angle)
        rotation = np.array([[1, 0, 0], [0, cos, -sin], [0, sin, cos]])
        colour = _RGB @ rotation @ _YIQ @ colour
    return np.concatenate([colour @ linear, (colour @ offset)[:, None]], axis=1)


def _one(picture: np.ndarray, box, windows: Windows, i: int, out: np.ndarray) -> None:
    y0, y1, x0, x1 = (int(v) for v in box)
    jpeg_blocks.resize_into(picture[y0:y1, x0:x1], out)
    finish_into(out, windows, i)


_pools: dict[int, concurrent.futures.ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _parallel(n: int, num_threads: int, work) -> None:
    """work(i) for i in range(n), in `num_threads` contiguous blocks."""
    if num_threads <= 1 or n <= 1:
        for i in range(n):
            work(i)
        return
    with _pools_lock:
        pool = _pools.get(num_threads)
        if pool is None:
            pool = _pools[num_threads] = concurrent.futures.ThreadPoolExecutor(
                num_threads, thread_name_prefix="fast_tfds-augment"
            )
    bounds = np.linspace(0, n, min(num_threads, n) + 1).astype(int)

    def block(start: int, stop: int) -> None:
        for i in range(start, stop):
            work(i)

    for future in [pool.submit(block, a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]:
        future.result()
