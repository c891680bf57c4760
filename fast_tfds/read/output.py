"""The per-batch output: the image converted to the asked dtype, and (image, label)
tuples or the feature dict."""

from __future__ import annotations

import tensorflow as tf


@tf.function(jit_compile=True, autograph=False)  # nothing for autograph to rewrite
def to_unit_float(images: tf.Tensor) -> tf.Tensor:
    """uint8 -> float32 in [0, 1]. XLA fuses the cast and the scale into one pass over
    memory, faster in a tf.data map than the two ops apart (though slower when called
    eagerly in a loop: measure it in a pipeline; see docs/design.md)."""
    return tf.cast(images, tf.float32) * (1.0 / 255.0)


@tf.function(jit_compile=True, autograph=False)
def gathered_unit_float(column: tf.Tensor, at: tf.Tensor) -> tf.Tensor:
    """`to_unit_float(tf.gather(column, at))` in one pass: a served batch of a cache's
    uint8 rows is read once and written once, as float32, not gathered as uint8 first
    (docs/design.md)."""
    return to_unit_float(tf.gather(column, at))


INDEX_KEY = "index"


def make_output_fn(dtype: tf.DType, as_supervised: bool, supervised_keys, with_index=False):
    """fn(batch dict) -> (image, label) (`supervised_keys`: their feature names) or the
    dict, with the image converted to `dtype`; with `with_index`, (image, label, index)
    or the dict with its "index" feature (the batch dict's INDEX_KEY, which it holds
    only then)."""

    def output(example: dict):
        image = example["image"]
        if dtype == tf.float32 and image.dtype == tf.uint8:  # not served as float32 already
            image = to_unit_float(image)
        example = {**example, "image": image}
        if as_supervised:
            image_key, label_key = supervised_keys
            if with_index:
                return example[image_key], example[label_key], example[INDEX_KEY]
            return example[image_key], example[label_key]
        return example

    return output
