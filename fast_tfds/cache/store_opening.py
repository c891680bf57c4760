"""Opening a picture store, the same for both back ends: its reference sizes (the output
size without a crop, the dataset's fixed stored size, else a pass over the JPEG headers
that the back end reads), and where its columns live: its persistent file with
persist=True (served, or a new one to fill), else memory, or rows on disk over the
budget. No TensorFlow."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from fast_tfds.cache import persisted, placement
from fast_tfds.cache.pictures import PictureSizes, cache_bytes
from fast_tfds.cache.store import Store


def open_store(
    slot_examples,
    slot_of: Callable[[np.ndarray], np.ndarray],
    *,
    output_size: tuple[int, int],
    shorter_side: int | None,
    features: dict[str, tuple],
    stored_size: tuple[int, int] | None,
    header_sizes: Callable[[], tuple[np.ndarray, np.ndarray]],
    origin: persisted.Origin | None,
    folder: str | os.PathLike | None,
    budget: int | None,
    what: str,
) -> Store:
    """The store of the examples `slot_examples` (slot s holds example slot_examples[s];
    `slot_of` maps example indices to slots), laid out and allocated before its fill.

    `features`: {name: (shape, dtype)} kept per slot. `stored_size`: every picture's
    reference size when the dataset's is fixed, else None; `header_sizes()` then gives
    them per slot (read only when needed). `origin`: persist=True, else None.
    """
    n = len(np.asarray(slot_examples).reshape(-1))

    def sizes():
        if shorter_side is None:  # The cache holds the output itself: windows are whole.
            return np.full(n, output_size[0]), np.full(n, output_size[1])
        if stored_size is not None:
            return np.full(n, stored_size[0]), np.full(n, stored_size[1])
        return header_sizes()  # Sizes vary (or a hook's window cuts each).

    if origin is not None:
        opened, _ = persisted.open_pictures(
            origin,
            slot_examples,
            output_size=output_size,
            shorter_side=shorter_side,
            features=features,
            sizes=sizes,
            folder=folder,
            budget=budget,
            what=what,
        )
        if opened is not None:
            return Store(
                n,
                features,
                slot_of,
                opened.backing,
                pictures=PictureSizes(opened.heights, opened.widths, output_size, shorter_side),
                filled=opened.filled,
            )
    heights, widths = sizes()
    need = cache_bytes(heights, widths, output_size, shorter_side)
    backing = placement.allocator(need, what=what, cache_budget=budget, cache_dir=folder)
    pictures = PictureSizes(heights, widths, output_size, shorter_side)
    return Store(n, features, slot_of, backing, pictures=pictures)
