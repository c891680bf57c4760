"""Per-record work of the loader, run in its worker processes: parse, decode, crop, resize.

A record is a serialized `tf.train.Example`, parsed with the copy of the proto that
TFDS ships (no TensorFlow). Images are decoded with simplejpeg (libjpeg-turbo),
which decodes this project's 224x224 JPEGs faster than Pillow or OpenCV, with the
same pixels. Resizing (the `original` config, crops) uses OpenCV's bilinear
resize, which matches `tf.image.resize` (half-pixel centres, no antialiasing) as
the tf.data reader uses it, to within rounding. What a dataset adds (a crop
window, boxes next to the label) comes from its hook (`fast_tfds.core.hooks`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import cv2
import numpy as np
import simplejpeg
from tensorflow_datasets.proto import tf_example_pb2

from fast_tfds.core.hooks import ExampleParts

# OpenCV's own thread pool would fight the worker processes for the cores.
cv2.setNumThreads(1)


class BadRecord(ValueError):
    """A record that is not one of this dataset's examples (a damaged file)."""


@dataclasses.dataclass(frozen=True)
class DecodeExample:
    """Serialized Example -> (image uint8 [h, w, 3], label int64), or (image, what the
    dataset's hook puts in the label's place).

    Attributes:
      image_size: (height, width) to resize to, or None to keep the stored size.
      parts: the dataset's additions (a crop window, a richer target), or None.
    """

    image_size: tuple[int, int] | None = None
    parts: ExampleParts | None = None

    def __call__(self, record: bytes):
        try:
            feature = tf_example_pb2.Example.FromString(record).features.feature
            jpeg = feature["image"].bytes_list.value[0]
            label = np.int64(feature["label"].int64_list.value[0])
            values = {} if self.parts is None else _values(feature, self.parts.keys)
        except Exception as err:  # protobuf's DecodeError, a missing key or value
            raise BadRecord(f"a record is not an image example ({err})") from None
        image = simplejpeg.decode_jpeg(jpeg, colorspace="RGB")
        if self.parts is None:
            return resize(image, self.image_size), label
        window = self.parts.window(values)
        if window is not None:
            y, x, height, width = window(image.shape[0], image.shape[1])
            image = image[y : y + height, x : x + width]
        return resize(image, self.image_size), self.parts.target(values, label)


def _values(feature: Mapping, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The flat values of the serialized features `keys` (a missing one: KeyError)."""
    values = {}
    for key in keys:
        if key not in feature:
            raise KeyError(key)
        kind = feature[key].WhichOneof("kind")  # None: an empty list of any kind.
        values[key] = np.asarray(getattr(feature[key], kind).value if kind else [])
    return values


def resize(image: np.ndarray, size: tuple[int, int] | None) -> np.ndarray:
    """Bilinear resize to (height, width), skipped when the size already matches."""
    if size is None or image.shape[:2] == tuple(size):
        return image
    return cv2.resize(image, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
