"""Parsing a block of serialized examples at once gives TFDS's own examples."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow as tf

import cats_vs_dogs_fast
import stanford_dogs_tfrecord
from fast_tfds.read import records
from fast_tfds.read.parsing import make_batch_parser, make_parser


def _serialized(builder) -> tf.Tensor:
    instructions = records.file_instructions(builder, "train")
    ds = records.read_indexed_records(
        instructions, records.instruction_offsets(instructions), indices=False
    )
    return tf.stack(list(ds))


def test_a_parsed_block_equals_the_examples_parsed_one_by_one(cats_builder):
    features = cats_builder.info.features
    serialized = _serialized(cats_builder)
    block = make_batch_parser(features)(serialized)
    one_by_one = [make_parser(features)(s) for s in serialized]
    assert set(block) == {"image", "image/filename", "label"}
    for key, values in block.items():
        expected = tf.stack([example[key] for example in one_by_one])
        assert values.dtype == expected.dtype == features.get_serialized_info()[key].tf_dtype
        np.testing.assert_array_equal(values.numpy(), expected.numpy())
    spec = make_batch_parser(features, ["label"]).example_spec
    assert spec == {
        "image": tf.TensorSpec([], tf.string),
        "label": tf.TensorSpec([], tf.int64),
    }


def test_features_that_vary_per_example_are_parsed_one_by_one(tmp_path):
    features = stanford_dogs_tfrecord.Builder(config="224", data_dir=tmp_path).info.features
    assert make_batch_parser(features) is None, "'objects' (boxes) differ in count per example"
    assert make_batch_parser(features, ["label"]) is not None


@pytest.mark.parametrize("cache", [False, True])
def test_the_block_path_reads_tfds_examples(cats_data_dir, cats_builder, cache):
    """Every feature read through the block parser equals what TFDS reads: (image,
    label) pairs with the arena, and filenames too without a cache."""

    def key(image, label, filename=b""):
        return image.tobytes(), int(label), filename if not cache else b""

    theirs = collections.Counter(
        key(ex["image"].numpy(), ex["label"].numpy(), ex["image/filename"].numpy())
        for ex in cats_builder.as_dataset(split="train", shuffle_files=False)
    )
    ours = cats_vs_dogs_fast.as_fast_dataset(
        "train",
        data_dir=cats_data_dir,
        dtype=tf.uint8,
        batch_size=6,
        cache=cache,
        as_supervised=cache,  # strings cannot live in the arena
    )
    seen = collections.Counter()
    for batch in ours:
        if cache:
            images, labels = batch
            seen.update(key(i, n) for i, n in zip(images.numpy(), labels.numpy(), strict=True))
        else:
            columns = (batch[k].numpy() for k in ("image", "label", "image/filename"))
            seen.update(key(*example) for example in zip(*columns, strict=True))
    assert seen == theirs
