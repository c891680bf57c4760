"""Decoding pictures: JPEG bytes (parsed by `parsing`) -> uint8 images of the output size.

Images of a fixed output size are decoded by `fast_tfds.core.jpeg_blocks`, the decoder
the Grain loader uses too, so both back ends give the same pixels: at a reduced DCT
scale where that pays, then resized (docs/reading.md compares it with
`tf.image.resize`). It runs in `tf.numpy_function`s, a block of JPEGs per call where
the reader batches before decoding. Only output that varies in size, and examples
decoded on a tf.data service (whose workers run graph ops only), use TensorFlow's
decoder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection

import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.core import aligned, jpeg_blocks
from fast_tfds.core.dataset_hooks import Window
from fast_tfds.core.sizes import as_hw
from fast_tfds.read.parsing import make_parser

# A `transform` may name the part of the image to keep, int32 [top, left, height,
# width] in the stored image's pixels, instead of decoding and cutting it itself:
# the decoder then picks its DCT scale for that part, as the Grain loader does with
# the same window, and both give the same pixels.
WINDOW_KEY = "image/window"


def make_decoder(
    features: tfds.features.FeaturesDict,
    image_size: int | tuple[int, int] | None,
    transform: Callable[[dict], dict] | None = None,
    keys: Collection[str] | None = None,
    *,
    graph_ops_only: bool = False,
) -> Callable[[tf.Tensor], dict]:
    """fn(serialized example) -> dict with 'image' as uint8 [H, W, 3] and the other features.

    With a fixed `image_size` the image is decoded (or, if `transform` decoded it,
    resized) by `jpeg_blocks`, as on the block paths; `graph_ops_only` (for a tf.data
    service, which cannot ship Python functions to its workers) uses TensorFlow's
    decoder and antialiased resize instead.
    """
    parse = make_parser(features, transform, keys)
    target = as_hw(image_size)
    # A transform (a crop) changes the size, so the stored size is known only without one.
    stored = features["image"].shape[:2] if transform is None else (None, None)

    def decode(serialized: tf.Tensor) -> dict:
        example = parse(serialized)
        image, window = example["image"], example.pop(WINDOW_KEY, None)
        if target is not None and not graph_ops_only:
            example["image"] = decode_resized(image, target, window)
            return example
        if window is not None:
            image = tf.image.decode_and_crop_jpeg(image, window, channels=3)
        elif image.dtype == tf.string:
            image = tf.io.decode_jpeg(image, channels=3)
        example["image"] = resize_uint8(image, target, stored)
        return example

    return decode


@dataclasses.dataclass(frozen=True)
class BlockImages:
    """Stored JPEGs that decode to one output shape, each where it is needed: the
    reader keeps them encoded (`SplitReading.encoded`) for the picture store or the
    stream to decode (at the smallest DCT scale that covers the output, and resized
    where the stored size is not the output's: `jpeg_blocks.decode_resized_into`).
    """

    shape: tuple[int, int, int]

    @property
    def spec(self) -> tf.TensorSpec:
        return tf.TensorSpec(self.shape, tf.uint8)


def block_images(
    features: tfds.features.FeaturesDict,
    image_size: int | tuple[int, int] | None,
    transform: Callable[[dict], dict] | None,
) -> BlockImages | None:
    """How the stored images decode in blocks to one output shape, or None when they
    cannot: the output size varies (`image_size=None` on the `original` config), the
    images are not RGB JPEGs, or a `transform` works on each example first."""
    image = features["image"]
    stored = tuple(image.shape)
    target = as_hw(image_size)
    if getattr(image, "encoding_format", None) != "jpeg" or transform is not None:
        return None
    if len(stored) != 3 or stored[2] != 3:
        return None
    if target is None:
        return None if None in stored else BlockImages(stored)
    return BlockImages((*target, 3))


def decode_resized(
    image: tf.Tensor, target: tuple[int, int], window: tf.Tensor | None = None
) -> tf.Tensor:
    """uint8 [*target, 3] from JPEG bytes (cut to `window`, if given) or from a decoded
    uint8 image, by `jpeg_blocks`."""
    shape = (*target, 3)
    decoded = image.dtype != tf.string

    def run(data, *box):
        out = aligned.empty(shape)
        if decoded:
            return jpeg_blocks.resize_into(data, out)
        return jpeg_blocks.decode_resized_into(data, out, fixed_window(box[0] if box else ()))

    inputs = [image] if window is None else [image, window]
    resized = tf.numpy_function(run, inputs, tf.uint8, stateful=False)
    return tf.ensure_shape(resized, shape)


def fixed_window(box) -> Window | None:
    """The window that keeps `box` (top, left, height, width: in the stored pixels) of a
    picture, as `jpeg_blocks` takes one; None for an empty box (the whole picture)."""
    if len(box) == 0:
        return None
    top, left, height, width = (int(v) for v in box)
    return lambda _h, _w: (top, left, height, width)


def resize_uint8(
    image: tf.Tensor, target: tuple[int, int] | None, stored=(None, None)
) -> tf.Tensor:
    """Antialiased bilinear resize to `target` in graph ops (the nearest TensorFlow has
    to the filter of `jpeg_blocks`), skipped when the stored size already matches."""
    if target is None:
        return image
    if tuple(stored) == tuple(target):
        return tf.ensure_shape(image, (*target, 3))

    def resized():
        scaled = tf.image.resize(image, target, antialias=True)
        return tf.cast(tf.round(tf.clip_by_value(scaled, 0, 255)), tf.uint8)

    same = tf.reduce_all(tf.equal(tf.shape(image)[:2], target))
    image = tf.cond(same, lambda: image, resized)
    return tf.ensure_shape(image, (*target, 3))
