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
  saturation to 0..255 at the end (see `Augment` for the definitions). A per-pixel
  affine map commutes with the resize and the flip up to rounding, so it runs on
  whichever of the crop and the output has fewer pixels. Hue is a
  rotation of the YIQ chroma plane rather than an HSV round trip: one matrix, not
  three passes with a branchy conversion, and it keeps each pixel's luma.
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
from collections.abc import Sequence

import cv2
import numpy as np

from fast_tfds.augment import affine
from fast_tfds.augment.windows import Windows
from fast_tfds.core import jpeg_blocks

# torchvision's grey level (rgb_to_grayscale), used by contrast and saturation.
GREY = np.array([0.2989, 0.587, 0.114])
_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
_RGB = np.linalg.inv(_YIQ)


def check_batch(pictures: Sequence[np.ndarray], n: int, out: np.ndarray, what: str) -> None:
    """One picture and one `what` (window, plan) per row of `out`, a [B, H, W, 3] uint8
    batch, or a one-line ValueError."""
    if len(pictures) != n or out.shape[0] != n or out.dtype != np.uint8 or out.shape[3:] != (3,):
        raise ValueError(
            f"{len(pictures)} pictures and {n} {what}s for an output of "
            f"{out.dtype}{list(out.shape)}: need one picture and one {what} per "
            "row of a [B, H, W, 3] uint8 batch"
        )


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
    check_batch(pictures, n, out, "window")
    boxes = source_boxes(pictures, windows, scale_y, scale_x).tolist()
    jitter = Jitter(windows) if windows.jittered_mask.any() else None
    _parallel(n, num_threads, lambda i: _one(pictures[i], boxes[i], windows, i, out[i], jitter))
    return out


def source_boxes(pictures, windows: Windows, scale_y=None, scale_x=None) -> np.ndarray:
    """[n, 4] int64 (y0, y1, x0, x1): each window in whole pixels of its picture,
    at least one pixel, inside the picture."""
    n = len(windows)
    sy, sx = affine.per_example(scale_y, n), affine.per_example(scale_x, n)
    heights = np.array([p.shape[0] for p in pictures], np.int64)
    widths = np.array([p.shape[1] for p in pictures], np.int64)
    y0 = np.clip(np.round(windows.top * sy), 0, heights - 1).astype(np.int64)
    x0 = np.clip(np.round(windows.left * sx), 0, widths - 1).astype(np.int64)
    y1 = np.clip(np.round((windows.top + windows.height) * sy), y0 + 1, heights).astype(np.int64)
    x1 = np.clip(np.round((windows.left + windows.width) * sx), x0 + 1, widths).astype(np.int64)
    return np.stack([y0, y1, x0, x1], axis=1)


class Jitter:
    """The colour maps of a batch, built once for all its examples (numpy work on tiny
    matrices holds the GIL, so it is done batched, before the threads start).

    Each example's map is `linear[i] @ rgb + offset[i] * mean_grey`, where
    mean_grey is the mean grey level of its picture, known only once it is cut.
    """

    def __init__(self, windows: Windows):
        b = windows.brightness.astype(np.float64)
        c = windows.contrast.astype(np.float64)
        s = windows.saturation.astype(np.float64)[:, None, None]
        colour = s * np.eye(3) + (1 - s) * np.outer(np.ones(3), GREY)
        angle = 2 * np.pi * windows.hue.astype(np.float64)
        rotation = np.zeros((len(angle), 3, 3))
        rotation[:, 0, 0] = 1
        rotation[:, 1, 1] = rotation[:, 2, 2] = np.cos(angle)
        rotation[:, 1, 2], rotation[:, 2, 1] = -np.sin(angle), np.sin(angle)
        colour = _RGB @ rotation @ _YIQ @ colour
        self.linear = colour * (c * b)[:, None, None]
        # Contrast blends with the mean grey level of the brightness-adjusted picture.
        self.offset = colour.sum(axis=2) * ((1 - c) * b)[:, None]
        self.uses_mean = c != 1
        self.on = windows.jittered_mask

    def matrix(self, i: int, image: np.ndarray) -> np.ndarray:
        """Example i's 3x4 affine map for its cut picture `image`."""
        matrix = np.empty((3, 4))
        matrix[:, :3] = self.linear[i]
        # The mean over every 4th row: the same level within a fraction of one, at a
        # quarter of the cost (OpenCV takes the strided rows without a copy).
        grey = float(np.dot(cv2.mean(image[::4])[:3], GREY)) if self.uses_mean[i] else 0.0
        matrix[:, 3] = self.offset[i] * grey
        return matrix

    def apply(self, i: int, image: np.ndarray, argument: float = 0.0) -> None:
        """Example i's map on its cut picture `image`, in place (`functools.partial(
        jitter.apply, i)` is a pixel step of the warp kernel, whose ops take an argument)."""
        cv2.transform(image, self.matrix(i, image), dst=image)


def finish_into(out: np.ndarray, windows: Windows, i: int, jitter: Jitter | None = None) -> None:
    """Flip and jitter of example i on its already cropped and resized picture `out`
    (`jitter`: the batch's `Jitter`, made here if not given)."""
    if windows.flip[i]:
        cv2.flip(out, 1, dst=out)
    if windows.jittered_mask[i]:
        (jitter or Jitter(windows)).apply(i, out)


def _one(picture, box, windows: Windows, i: int, out: np.ndarray, jitter: Jitter | None):
    y0, y1, x0, x1 = box
    crop = picture[y0:y1, x0:x1]
    colour = jitter is not None and jitter.on[i]
    if colour and crop.shape[0] * crop.shape[1] < out.shape[0] * out.shape[1]:
        # An enlarged crop: the colour map costs less on its fewer pixels, and being
        # per pixel and affine it commutes with the resize (and the flip) up to
        # rounding, so it runs first, on a copy (the cache is never written; and
        # OpenCV's transform runs several times slower on a strided view).
        copy = scratch("crop", crop.shape)
        np.copyto(copy, crop)
        jitter.apply(i, copy)
        crop = copy
        colour = False
    _resize_into(crop, out)
    if windows.flip[i]:
        cv2.flip(out, 1, dst=out)
    if colour:
        jitter.apply(i, out)


_local = threading.local()
# Large enough for most pictures and crops of a 224-px read in 4 channels: few regrow.
_LEAST_SCRATCH = 264 * 352 * 4


def scratch(name: str, shape: tuple[int, ...], dtype=np.uint8) -> np.ndarray:
    """This thread's reused buffer `name` viewed as `shape` of `dtype` (a fresh allocation
    per picture would be a new mapping, whose page faults cost more than the work). It
    holds zeros until a caller writes it."""
    size = math.prod(shape) * np.dtype(dtype).itemsize
    buffers = _local.__dict__.setdefault("buffers", {})
    buffer = buffers.get(name)
    if buffer is None or buffer.size < size:
        buffer = buffers[name] = np.zeros(max(size, _LEAST_SCRATCH), np.uint8)
    return buffer[:size].view(dtype).reshape(shape)


def _resize_into(crop: np.ndarray, out: np.ndarray) -> None:
    """`jpeg_blocks.resize_into`'s filters (bilinear; the area filter for shrinks past
    2x), without its copy to contiguous memory: a crop of a cached picture is a view
    with the picture's row stride, which OpenCV reads as it is. A crop of the output's
    size is copied as it is (OpenCV's resize copies when the sizes are equal)."""
    height, width = out.shape[:2]
    far = crop.shape[0] > 2 * height or crop.shape[1] > 2 * width
    cv2.resize(
        crop, (width, height), dst=out, interpolation=cv2.INTER_AREA if far else cv2.INTER_LINEAR
    )


_pools: dict[int, concurrent.futures.ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _parallel(n: int, num_threads: int, work) -> None:
    """work(i) for i in range(n), in `num_threads` contiguous blocks."""
    jpeg_blocks.one_opencv_thread()  # The blocks are the parallelism.
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
