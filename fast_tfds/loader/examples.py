"""Per-record work of the loader, run in its worker processes: parse, and the box of the
stored picture that a batch's windows are drawn in.

A record is a serialized `tf.train.Example`, parsed with the copy of the proto that
TFDS ships (no TensorFlow). Images are then decoded by the batch function
(`augmented.AugmentedBatches`) through the one any-size decoder the tf.data reader
uses too, `fast_tfds.core.jpeg_blocks.decode_resized_into`, so that both back ends
give the same pixels at every output size: libjpeg-turbo decodes at the smallest DCT
scale that still covers the output, which skips most of a full decode, and a resize
does the rest (see "Resizing and picture fidelity" in docs/reading.md for how close
that is to `tf.image.resize(..., antialias=True)`). A crop window from the dataset's
hook (`fast_tfds.core.dataset_hooks`) is given to the decoder, not cut afterwards, so
the DCT scale is chosen for the part that is kept. A JPEG that libjpeg-turbo rejects
is decoded by Pillow and still arrives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
from tensorflow_datasets.proto import tf_example_pb2

from fast_tfds.core import jpeg_blocks
from fast_tfds.core.dataset_hooks import ExampleParts, Window


class BadRecord(ValueError):
    """A record that is not one of this dataset's examples (a damaged file)."""


@dataclasses.dataclass(frozen=True)
class DecodeExample:
    """How the loader reads a serialized Example: its JPEG, its label int64 (or what the
    dataset's hook puts in the label's place) and the hook's window (`parse`), and the
    size the batch function decodes it at.

    Attributes:
      image_size: (height, width) of every image of a batch (the largest of a
        `ProgressiveResize`, which gives each epoch its own).
      parts: the dataset's additions (a crop window, a richer target), or None.
    """

    image_size: tuple[int, int] | None = None
    parts: ExampleParts | None = None

    def parse(self, record: bytes) -> tuple[bytes, object, Window | None]:
        """(JPEG bytes, the label or the hook's target, the hook's window or None)."""
        try:
            feature = tf_example_pb2.Example.FromString(record).features.feature
            jpeg = feature["image"].bytes_list.value[0]
            label = np.int64(feature["label"].int64_list.value[0])
            values = {} if self.parts is None else _values(feature, self.parts.keys)
        except Exception as err:  # protobuf's DecodeError, a missing key or value
            raise BadRecord(f"a record is not an image example ({err})") from None
        if self.parts is None:
            return jpeg, label, None
        return jpeg, self.parts.target(values, label), self.parts.window(values)


def _values(feature: Mapping, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The flat values of the serialized features `keys` (a missing one: KeyError)."""
    values = {}
    for key in keys:
        if key not in feature:
            raise KeyError(key)
        kind = feature[key].WhichOneof("kind")  # None: an empty list of any kind.
        values[key] = np.asarray(getattr(feature[key], kind).value if kind else [])
    return values


def reference_box(jpeg: bytes, window) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the picture windows are drawn in: the hook's
    window of the stored image, or all of it."""
    height, width = jpeg_blocks.stored_size(jpeg)
    return window(height, width) if window is not None else (0, 0, height, width)
