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

import numpy as np
import simplejpeg


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


def _message(i: int, rows: np.ndarray, problem: str) -> str:
    height, width = rows.shape[1:3]
    return (
        f"fast_tfds: image {i} of a block is not a {height}x{width} RGB JPEG as the "
        f"dataset's features say: {problem}. Check the files with `fast-tfds verify` "
        "and rebuild the dataset, or read it with image_size=None."
    )
