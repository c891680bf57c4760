"""Serving augmented batches from a cache of decoded pictures, without decoding.

`PictureCache` is the ragged store (`ragged.RaggedImages`) plus, for each picture,
the size of the picture it was made from (the stored image, or the part of it a
dataset's hook keeps). Windows are drawn in that reference size, as they are when
the JPEG itself is decoded, and scaled to the cached picture: the same
(seed, epoch, example) crops the same part of the picture from the cache and from
the JPEG, and from either back end.

`serve_into` is the whole served step for one batch of cache slots, vectorized and
TensorFlow-free, so that a tf.data reader can call it from one `tf.numpy_function`
per batch and the Grain loader from its batch function.
"""

from __future__ import annotations

import numpy as np

from fast_tfds.augment import kernels, ragged, windows
from fast_tfds.augment.spec import Augment
from fast_tfds.core import jpeg_blocks
from fast_tfds.core.dataset_hooks import Window


class PictureCache:
    """Pictures at the cache resolution, each with the size its windows are drawn in.

    Args:
      reference_heights, reference_widths: per slot, the size of the picture that
        windows are drawn for (stored image or hook window).
      output_size: (height, width) of the served batches.
      shorter_side: the cached pictures' shorter side (aspect ratio kept, never
        enlarged); None: exactly `output_size` per picture, for reading without a
        crop (nothing outside the output is ever needed).
      allocate: where the buffer's memory comes from (see `ragged.RaggedImages`).
      filled: the buffer with every picture written (a persistent cache's file).
    """

    def __init__(
        self,
        reference_heights,
        reference_widths,
        output_size: tuple[int, int],
        shorter_side: int | None,
        allocate: ragged.Allocate | None = None,
        *,
        filled: np.ndarray | None = None,
    ):
        self.reference_heights = np.asarray(reference_heights, np.int64).reshape(-1)
        self.reference_widths = np.asarray(reference_widths, np.int64).reshape(-1)
        self.output_size = tuple(output_size)
        self.shorter_side = shorter_side
        heights, widths = cache_sizes(
            self.reference_heights, self.reference_widths, output_size, shorter_side
        )
        self.images = ragged.RaggedImages(
            ragged.RaggedLayout.of_sizes(heights, widths), allocate, filled=filled
        )

    def __len__(self) -> int:
        return len(self.images)

    def fill(self, slot: int, jpeg: bytes, window: Window | None = None) -> None:
        """Decodes `jpeg` (cut to `window`, in the stored image's pixels: the part the
        reference size describes) into `slot` at the cache resolution, and marks it."""
        jpeg_blocks.decode_resized_into(jpeg, self.images.view(slot), window)
        self.images.mark(slot)

    @property
    def nbytes(self) -> int:
        return self.images.nbytes

    def serve_into(
        self,
        slots,
        augment: Augment | None,
        seed: int,
        epoch: int,
        indices,
        out: np.ndarray,
        *,
        num_threads: int = 1,
    ) -> np.ndarray:
        """Batch `out[i]` from cache slot `slots[i]`, augmented as example `indices[i]`
        of `epoch` (every slot must be written)."""
        slots = np.asarray(slots, np.int64).reshape(-1)
        drawn = self.windows(slots, augment, seed, epoch, indices, out.shape[1:3])
        layout = self.images.layout
        kernels.apply_into(
            [self.images.image(int(s)) for s in slots],
            drawn,
            out,
            scale_y=layout.heights[slots] / self.reference_heights[slots],
            scale_x=layout.widths[slots] / self.reference_widths[slots],
            num_threads=num_threads,
        )
        return out

    def windows(
        self, slots, augment: Augment | None, seed: int, epoch: int, indices, output_size=None
    ):
        """The windows of `slots` (drawn as examples `indices`) for batches of
        `output_size` (default: the cache's), in reference pixels."""
        slots = np.asarray(slots, np.int64).reshape(-1)
        return windows.sample(
            augment or NO_AUGMENT,
            seed,
            epoch,
            indices,
            self.reference_heights[slots],
            self.reference_widths[slots],
            self.output_size if output_size is None else tuple(output_size),
        )


def cache_sizes(reference_heights, reference_widths, output_size, shorter_side):
    """(heights, widths) of the cached pictures (see `PictureCache`)."""
    n = len(np.asarray(reference_heights).reshape(-1))
    if shorter_side is None:
        return np.full(n, output_size[0], np.int64), np.full(n, output_size[1], np.int64)
    return ragged.cache_size(reference_heights, reference_widths, shorter_side)


def cache_bytes(reference_heights, reference_widths, output_size, shorter_side) -> int:
    """The bytes of the cached pictures: what a `PictureCache` of these sizes allocates."""
    heights, widths = cache_sizes(reference_heights, reference_widths, output_size, shorter_side)
    return int(np.sum(heights * widths * 3))


# The whole picture, resized; no randomness (reading through a cache without augment=).
NO_AUGMENT = Augment(crop=None, flip=False)
