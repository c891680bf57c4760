"""The pixel window of `crop_to_box`, written once for both back ends.

The tf.data reader computes it in the graph (TensorFlow ops), the Grain loader
in numpy, and both must cut exactly the same pixels: so the arithmetic is one
function, `pixel_window`, over the few array operations it needs (`ArrayOps`),
which each back end supplies (`NUMPY` here, `tensorflow_ops()` in
`stanford_dogs_tfrecord.boxes`).

The window is that of the image's first box (the annotated dog), or of the
whole image when it has none: box edges rounded to the nearest pixel (half to
even, as both numpy and TensorFlow round), kept inside the image, at least 1x1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

# (ymin, xmin, ymax, xmax): the box of an image without one, whose window is all of it.
WHOLE_IMAGE = (0.0, 0.0, 1.0, 1.0)


@dataclasses.dataclass(frozen=True)
class ArrayOps:
    """The array operations `pixel_window` uses, from one array library."""

    round: Callable  # half to even
    minimum: Callable
    maximum: Callable
    to_float64: Callable
    to_int: Callable


NUMPY = ArrayOps(
    round=np.round,
    minimum=np.minimum,
    maximum=np.maximum,
    to_float64=lambda x: np.asarray(x, np.float64),
    to_int=lambda x: np.asarray(x, np.int64),
)


def pixel_window(box, height, width, ops: ArrayOps):
    """(y, x, height, width) in pixels of `box` (ymin, xmin, ymax, xmax in [0, 1])
    in an image of `height` x `width`, as values of `ops`' array library."""
    fheight, fwidth = ops.to_float64(height), ops.to_float64(width)

    def edge(value, size):
        return ops.to_int(ops.round(ops.to_float64(value) * size))

    ymin, xmin = edge(box[0], fheight), edge(box[1], fwidth)
    ymax, xmax = edge(box[2], fheight), edge(box[3], fwidth)
    height, width = ops.to_int(height), ops.to_int(width)
    y = ops.minimum(ops.maximum(ymin, 0), height - 1)
    x = ops.minimum(ops.maximum(xmin, 0), width - 1)
    y_end = ops.minimum(ops.maximum(ymax, y + 1), height)
    x_end = ops.minimum(ops.maximum(xmax, x + 1), width)
    return y, x, y_end - y, x_end - x


def first_box_window(bbox: np.ndarray, height: int, width: int) -> tuple[int, int, int, int]:
    """(y, x, height, width) of the first of `bbox` ([n, 4], numpy), or of the whole image.

    With `functools.partial(first_box_window, bbox)` it is a window function of the
    image size, the form `fast_tfds.core.dataset_hooks.Window` takes.
    """
    box = bbox[0] if len(bbox) else WHOLE_IMAGE
    return tuple(int(v) for v in pixel_window(box, height, width, NUMPY))
