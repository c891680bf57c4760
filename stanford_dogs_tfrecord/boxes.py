"""The tf.data side of Stanford Dogs' `crop_to_box` and `with_boxes` (see `hook`).

Both run inside the shared reader's `transform` hook, on each example right
after parsing, while the image is still JPEG bytes and before the cache, so a
cached pipeline caches the crops and the boxes too. A crop is named, not cut:
the transform adds the window (`decoding.WINDOW_KEY`) and the reader's decoder
cuts it, as the Grain loader's does, so both give the same pixels.

The number of boxes varies from image to image (most have one), so boxes
cannot go through the reader's plain `batch` as dense tensors. The transform
turns each example's [n, 4] boxes into a RaggedTensor with uniform rows of 4,
which `batch` stacks into a [batch, (n), (4)] RaggedTensor; `finish` then makes
that the conventional [batch, (n), 4] (ragged_rank 1, flat_values [total, 4]),
or a dense [n, 4] tensor when the reader does not batch.
"""

from __future__ import annotations

import tensorflow as tf

from fast_tfds.read.decoding import WINDOW_KEY
from stanford_dogs_tfrecord import crops

AUTOTUNE = tf.data.AUTOTUNE


def tensorflow_ops() -> crops.ArrayOps:
    """`crops.pixel_window`'s operations as TensorFlow ops (for the graph of a tf.data map)."""
    return crops.ArrayOps(
        round=tf.round,
        minimum=tf.minimum,
        maximum=tf.maximum,
        to_float64=lambda x: tf.cast(x, tf.float64),
        to_int=lambda x: tf.cast(x, tf.int32),
    )


def crop_window(bbox: tf.Tensor, image_shape: tf.Tensor) -> tf.Tensor:
    """int32 [y, x, height, width] in pixels of the first box, or of the whole image if
    none: the window of `crops.pixel_window`, as the loader computes it in numpy.

    Args:
      bbox: float [n, 4] boxes (ymin, xmin, ymax, xmax), normalized to [0, 1].
      image_shape: int [>= 2] (height, width, ...) of the stored image, e.g.
        from `tf.io.extract_jpeg_shape`.
    """
    # The whole-image box after the image's own: row 0 is the first box, if any.
    boxes = tf.concat([tf.cast(tf.reshape(bbox, [-1, 4]), tf.float64), [crops.WHOLE_IMAGE]], 0)
    window = crops.pixel_window(boxes[0], image_shape[0], image_shape[1], tensorflow_ops())
    return tf.stack(window)


def crop_to_first_box(jpeg: tf.Tensor, bbox: tf.Tensor) -> tf.Tensor:
    """uint8 [h, w, 3]: the first box's pixels, decoded straight from the JPEG bytes, in
    graph ops only (what a tf.data service's workers can run; the reader itself hands
    the window to its decoder instead).

    `tf.image.decode_and_crop_jpeg` skips the rows outside the window, so this is
    cheaper than decoding the whole image. An image without boxes is decoded whole.
    """
    window = crop_window(bbox, tf.io.extract_jpeg_shape(jpeg))
    return tf.image.decode_and_crop_jpeg(jpeg, window, channels=3)


def to_batchable(bbox: tf.Tensor) -> tf.RaggedTensor:
    """[n, 4] boxes as a RaggedTensor with uniform rows of 4, which `batch` can stack."""
    return tf.RaggedTensor.from_uniform_row_length(tf.reshape(bbox, [-1]), 4)


def from_batchable(bbox: tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
    """Undoes `to_batchable` after the reader: [batch, (n), 4] ragged, or [n, 4] dense."""
    boxes = tf.reshape(bbox.flat_values, [-1, 4])
    if bbox.ragged_rank == 1:  # Not batched: one example's boxes.
        return boxes
    return tf.RaggedTensor.from_row_splits(boxes, bbox.row_splits, validate=False)


def reader_options(
    *, with_boxes: bool, crop_to_box: bool, as_supervised: bool
) -> dict[str, object]:
    """The `transform`, `transform_keys` and `as_supervised` to give the shared reader, for
    a read with boxes or crops, or of example dicts (the hook asks for nothing otherwise)."""

    def transform(example: dict) -> dict:
        example = dict(example)
        bbox = example["objects"]["bbox"]
        if crop_to_box:
            # The reader's decoder cuts the window (at a reduced DCT scale when the
            # output is smaller), as the Grain loader does: the same pixels in both.
            window = crop_window(bbox, tf.io.extract_jpeg_shape(example["image"]))
            example[WINDOW_KEY] = window
        if not as_supervised:
            # All features are returned: the boxes must batch.
            example["objects"] = {**example["objects"], "bbox": to_batchable(bbox)}
            return example
        # Only what the (image, label) output needs goes on to the cache and the
        # batch. The reader returns example['label'] as the second element, so
        # with boxes that element is the {'label', 'bbox'} dict.
        del example["objects"]
        if with_boxes:
            example["label"] = {"label": example["label"], "bbox": to_batchable(bbox)}
        return example

    return {"transform": transform, "transform_keys": ("objects",), "as_supervised": as_supervised}


def finish(ds: tf.data.Dataset, *, with_boxes: bool, as_supervised: bool) -> tf.data.Dataset:
    """The reader's output with boxes (if any) as [batch, (n), 4] ragged or [n, 4] dense."""
    if as_supervised and not with_boxes:
        return ds

    def unpack(*element):
        if as_supervised:
            image, target = element
            return image, {**target, "bbox": from_batchable(target["bbox"])}
        (example,) = element
        objects = {**example["objects"], "bbox": from_batchable(example["objects"]["bbox"])}
        return {**example, "objects": objects}

    return ds.map(unpack, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)
