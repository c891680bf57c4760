"""Reading a tiny real build the way the read tests compare epochs: by pixel digests.

Examples are told apart by a digest of their decoded pixels, so that every plan,
the arena included (it holds only pixels and labels), is checked the same way.
"""

from __future__ import annotations

import hashlib

import numpy as np
import tensorflow as tf

import cats_vs_dogs_fast

BATCH = 8


def read(data_dir, split="train", **options):
    """`as_fast_dataset` of a built split: uint8 batches of BATCH unless told otherwise."""
    options = {"batch_size": BATCH, "dtype": tf.uint8, **options}
    return cats_vs_dogs_fast.as_fast_dataset(
        split, data_dir=data_dir, download_and_prepare=False, **options
    )


def digest(image) -> str:
    return hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest()


def epoch(iterator_or_ds, batches: int | None = None) -> list[str]:
    """Pixel digests in the order yielded; `batches` from an open iterator, else all.
    Works for (image, label) and dict output, batched or not."""
    digests = []
    source = iterator_or_ds if batches is None else (next(iterator_or_ds) for _ in range(batches))
    for element in source:
        image = (element["image"] if isinstance(element, dict) else element[0]).numpy()
        digests.extend(digest(i) for i in ([image] if image.ndim == 3 else image))
    return digests


def batches_of(ds) -> int:
    return sum(1 for _ in ds)
