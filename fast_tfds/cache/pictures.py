"""The picture store: each example's decoded picture, addressed by its slot, in one
flat uint8 buffer, at the resolution its reads need.

A random-resized crop needs the whole picture, at a resolution that serves the
output: a fixed-size cache row (the output size) would lose what lies outside the
crop, and the stored 'original' size costs several times the bytes. So each
picture is kept with its aspect ratio at a shorter side a little above the output
(`cache_size`), each at its own offset in one buffer, with its height and width.

The layout (every picture's offset and shape) is known before anything is decoded:
the byte total comes from the pictures' sizes (the dataset's fixed size, or each
JPEG's header), so the buffer is allocated once, by the store's backing
(`fast_tfds.cache.memory.Backing`: memory, rows on disk, a persistent file), and is only
written, never grown. Fixed-size rows are the case where every picture has the same size
(`shorter_side` None: exactly the output size); `PictureCache.rows()` then views the
buffer as `[n, height, width, 3]`, so a plain read is a gather.

How a batch is served from the store (window, resize, flip, colour) is the serving
step, `fast_tfds.augment.step`; both back ends call it. Nothing here imports
TensorFlow.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from fast_tfds.cache.memory import allocate_in_memory, prefault
from fast_tfds.core import jpeg_blocks
from fast_tfds.core.dataset_hooks import Window

# The column names in a table (a persistent file keeps its columns under them): each
# feature's (FEATURE + its name), and the picture column's: the pictures' bytes, and per
# slot the size windows are drawn in.
FEATURE = "feature/"
PICTURES, HEIGHTS, WIDTHS = "pictures", "reference_heights", "reference_widths"
# Bytes of the buffer whose pages `PictureCache.fill` backs at once: ~28 pictures at 224.
BACKED_CHUNK = 4 << 20


def shorter_side(crops: bool, asked: int | None, output_size: tuple[int, int]) -> int | None:
    """The stored pictures' shorter side, as both back ends choose it: None (each picture
    whole at exactly the output size) for a read that draws no crop; else `asked` (the
    read's `cache_shorter_side`), or by default output * 8/7 (256 for 224), the
    resize-then-crop ratio of the evaluation recipe (crop_fraction 0.875), so that a
    center crop is served at full resolution and random crops shrink little."""
    return (asked or math.ceil(max(output_size) * 8 / 7)) if crops else None


def cache_size(height, width, shorter_side: int | None, output_size=None):
    """(height, width) of a `height` x `width` picture kept at `shorter_side`, aspect
    ratio kept, never enlarged (arrays or ints); `shorter_side` None: exactly
    `output_size`, whatever its own size (see `PictureCache`)."""
    height, width = np.asarray(height, np.int64), np.asarray(width, np.int64)
    if shorter_side is None:
        return np.full_like(height, output_size[0]), np.full_like(width, output_size[1])
    scale = np.minimum(1.0, shorter_side / np.minimum(height, width))
    return (
        np.maximum(1, np.round(height * scale)).astype(np.int64),
        np.maximum(1, np.round(width * scale)).astype(np.int64),
    )


class PictureSizes(NamedTuple):
    """What a table's picture column is laid out by: `PictureCache`'s arguments before
    its buffer."""

    reference_heights: np.ndarray
    reference_widths: np.ndarray
    output_size: tuple[int, int]
    shorter_side: int | None

    @property
    def nbytes(self) -> int:
        """The bytes of the cached pictures: what a `PictureCache` of these sizes allocates."""
        heights, widths = cache_size(*self[:2], self.shorter_side, self.output_size)
        return int(np.sum(heights * widths * 3))


class PictureCache:
    """Pictures at the cache resolution, each with the size its windows are drawn in, in
    one buffer: each picture at its own offset (`offsets`, bytes), with its cached
    `heights` and `widths`, written once (`put`, or `view` then `mark`), then read as
    [h, w, 3] views (`image`).

    The reference size is the size of the picture the windows are drawn for (the
    stored image, or the part of it a dataset's hook keeps): windows are drawn in it,
    as they are when the JPEG itself is decoded, and scaled to the cached picture, so
    the same (seed, epoch, example) crops the same part of the picture from the cache
    and from the JPEG, and from either back end.

    Which pictures are written is kept per picture, so a fill that stops half-way
    (an iterator dropped in epoch 1) leaves the written ones served and the rest
    decoded when they come again.

    Args:
      reference_heights, reference_widths: per slot, the size of the picture that
        windows are drawn for (stored image or hook window).
      output_size: (height, width) of the served batches.
      shorter_side: the cached pictures' shorter side (aspect ratio kept, never
        enlarged); None: exactly `output_size` per picture, for reading without a
        crop (nothing outside the output is ever needed).
      buffer: the pictures' memory (default: anonymous memory).
      written: which are written, one flag per picture (a table's bitmap, shared with
        its other columns; default: none yet).
    """

    def __init__(
        self,
        reference_heights,
        reference_widths,
        output_size: tuple[int, int],
        shorter_side: int | None,
        buffer: np.ndarray | None = None,
        *,
        written: np.ndarray | None = None,
    ):
        self.reference_heights = np.asarray(reference_heights, np.int64).reshape(-1)
        self.reference_widths = np.asarray(reference_widths, np.int64).reshape(-1)
        self.output_size = tuple(output_size)
        self.shorter_side = shorter_side
        given = (self.reference_heights, self.reference_widths)
        if len(given[0]) != len(given[1]) or (len(given[0]) and min(map(np.min, given)) < 1):
            raise ValueError("heights and widths: one positive pair per picture")
        self.heights, self.widths = cache_size(*given, shorter_side, output_size)
        sizes = self.heights * self.widths * 3
        self.offsets = np.cumsum(sizes) - sizes
        # The buffer's size: the pictures' pixel bytes, nothing else.
        self.nbytes = int(sizes.sum())
        self.buffer = allocate_in_memory((self.nbytes,), np.uint8) if buffer is None else buffer
        if self.buffer.shape != (self.nbytes,) or self.buffer.dtype != np.uint8:
            raise ValueError(
                f"the buffer is {self.buffer.dtype}{list(self.buffer.shape)}, "
                f"not uint8[{self.nbytes}]"
            )
        self.written = np.zeros(len(sizes), bool) if written is None else written
        self._backed = np.zeros(-(-self.nbytes // BACKED_CHUNK), bool)  # per chunk (`fill`)

    def __len__(self) -> int:
        return len(self.offsets)

    def shape(self, i: int) -> tuple[int, int]:
        return int(self.heights[i]), int(self.widths[i])

    def view(self, i: int) -> np.ndarray:
        """Picture i's place, [h, w, 3] uint8, for a decoder to write into."""
        height, width = self.shape(i)
        start = int(self.offsets[i])
        return self.buffer[start : start + height * width * 3].reshape(height, width, 3)

    def mark(self, i: int) -> None:
        """Picture i is written (after its pixels are in its view)."""
        self.written[i] = True

    @property
    def filled(self) -> bool:
        """Whether every picture is written."""
        return bool(self.written.all())

    def put(self, i: int, picture: np.ndarray) -> None:
        self.view(i)[...] = picture
        self.mark(i)

    def image(self, i: int) -> np.ndarray:
        """Picture i, [h, w, 3] uint8 (a view: no copy)."""
        if not self.written[i]:
            raise ValueError(f"picture {i} of the cache is not written yet")
        return self.view(i)

    def fill(self, slot: int, jpeg: bytes, window: Window | None = None) -> None:
        """Decodes `jpeg` (cut to `window`, in the stored image's pixels: the part the
        reference size describes) into `slot` at the cache resolution, and marks it."""
        place = self.view(slot)
        # The buffer's pages are backed (`memory.prefault`: one system call, not a page
        # fault per 4 KiB) a chunk at a time, when the first picture in the chunk is
        # written. The fill writes pictures by slot in a random order, so a call per
        # picture cannot cover a block, and its ~7 us of fixed overhead was paid on
        # every picture (docs/design.md).
        start = int(self.offsets[slot])
        for chunk in range(start // BACKED_CHUNK, (start + place.nbytes - 1) // BACKED_CHUNK + 1):
            if not self._backed[chunk]:
                prefault(self.buffer[chunk * BACKED_CHUNK : (chunk + 1) * BACKED_CHUNK])
                self._backed[chunk] = True  # Two threads backing one chunk: harmless.
        jpeg_blocks.decode_resized_into(jpeg, place, window)
        self.mark(slot)

    @property
    def uniform(self) -> bool:
        """Whether every picture is exactly the output size (fixed rows)."""
        return self.shorter_side is None

    def rows(self) -> np.ndarray:
        """The buffer as fixed rows, [n, height, width, 3] (a view), for a store whose
        pictures are all the output size."""
        if not self.uniform:
            raise ValueError("the pictures of this store vary in size: it has no fixed rows")
        return self.buffer.reshape(len(self), *self.output_size, 3)
