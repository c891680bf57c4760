"""Parsing serialized examples: only the features the output needs, a block of records
at a time where every feature is one fixed-size value (`make_batch_parser`), else one
record at a time (`make_parser`); images stay JPEG bytes for `decoding`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection

import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_datasets.core import example_parser

# Examples per block (a parse, a decode call, a write into the arena) when the reader
# does not batch (batch_size=None): large enough that the per-call cost is shared.
UNBATCHED_BLOCK = 64


def make_parser(
    features: tfds.features.FeaturesDict,
    transform: Callable[[dict], dict] | None = None,
    keys: Collection[str] | None = None,
) -> Callable[[tf.Tensor], dict]:
    """fn(serialized example) -> dict with 'image' still JPEG bytes (after `transform`).

    Only `keys` (default: all features) are parsed: skipping the filename string
    of every example is measurable at thousands of images per second. Labels,
    filenames and boxes go through TFDS's own feature decoders.
    """
    keys = set(features.keys() if keys is None else keys) | {"image"}
    serialized_info = features.get_serialized_info()
    parser = example_parser.ExampleParser({k: serialized_info[k] for k in keys})
    other = {k: features[k] for k in keys if k != "image"}

    def parse(serialized: tf.Tensor) -> dict:
        raw = parser.parse_example(serialized)
        example = {k: feature.decode_example(raw[k]) for k, feature in other.items()}
        example["image"] = raw["image"]  # Still JPEG bytes: `transform` may crop them.
        if transform is not None:
            example = transform(example)
        return example

    return parse


class BatchParser:
    """fn(serialized examples [n]) -> dict of [n, ...] features, 'image' still JPEG
    bytes; `example_spec` is the spec of one example of its output."""

    def __init__(self, parse: Callable[[tf.Tensor], dict]):
        self._parse = parse

    def __call__(self, serialized: tf.Tensor) -> dict:
        return self._parse(serialized)

    @functools.cached_property
    def example_spec(self) -> dict[str, tf.TensorSpec]:
        # Traced once: the reader checks it against the arena, the arena lays out by it.
        traced = tf.function(self._parse).get_concrete_function(tf.TensorSpec([None], tf.string))
        outputs = traced.structured_outputs
        return {k: tf.TensorSpec(v.shape[1:], v.dtype) for k, v in outputs.items()}


def make_batch_parser(
    features: tfds.features.FeaturesDict, keys: Collection[str] | None = None
) -> BatchParser | None:
    """A `BatchParser` for `keys` (default: all features) and 'image'; None when a
    needed feature is not one fixed-shape value per example.

    One `tf.io.parse_example` per block instead of a parse per example: parsing
    one record costs several times its share of a block's parse, and shuffling
    parsed dicts costs more than shuffling the serialized records, so the reader
    shuffles the records and parses them in blocks where it can (figures in
    docs/design.md).
    """
    keys = set(features.keys() if keys is None else keys) | {"image"}
    serialized_info = features.get_serialized_info()
    specs = {}
    for key in sorted(keys):
        info, feature = serialized_info[key], features[key]
        fixed = isinstance(info, tfds.features.TensorInfo) and None not in info.shape
        if (
            not fixed
            or info.sequence_rank
            or not isinstance(feature, (tfds.features.Image, tfds.features.Tensor))
        ):
            return None
        specs[key] = tf.io.FixedLenFeature(
            info.shape, _example_dtype(info.tf_dtype), default_value=info.default_value
        )

    # Plain Python control flow (over the features, not tensors): autograph's rewrite
    # of it is time at every opening, and changes nothing (see epochs.NO_AUTOGRAPH).
    @tf.autograph.experimental.do_not_convert
    def parse(serialized: tf.Tensor) -> dict:
        raw = tf.io.parse_example(serialized, specs)
        batch = {}
        for key, values in raw.items():
            dtype = serialized_info[key].tf_dtype
            values = values if values.dtype == dtype else tf.cast(values, dtype)
            # Labels and filenames through TFDS's own (vectorized) feature decoders.
            batch[key] = values if key == "image" else features[key].decode_batch_example(values)
        return batch

    return BatchParser(parse)


def _example_dtype(dtype: tf.DType) -> tf.DType:
    """The dtype a tf.train.Example stores `dtype` as (int64, float32 or bytes)."""
    if dtype.is_integer or dtype.is_bool:
        return tf.int64
    return tf.float32 if dtype.is_floating else tf.string
