"""The tf.data reader with `mix=`: each batch is exactly `mixing.mix` of the unmixed
batch (same seed: the same order and crops) drawn from (seed, epoch, batch index), on
every plan (cached or not, augmented or not); float32 is the uint8 blend / 255; a last
odd batch keeps its middle picture; a resumed epoch repeats its mixes; one-line errors.
What a mix does to pixels and labels (rows sum to 1, CutMix weights are the pasted
area) is tests/augment/test_mixing.py's."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import cats_vs_dogs_fast
import fast_tfds
from fast_tfds import Augment, Mix
from tests import mixing_checks

BATCH = 15  # 56 examples: 3 batches of 15 and a last, odd one of 11
CLASSES = 2
SEED = 5
TIMM = Mix(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1)


def read(data_dir, **options):
    options = {"batch_size": BATCH, "dtype": tf.uint8, "seed": SEED, **options}
    return cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=data_dir, download_and_prepare=False, **options
    )


def epochs(ds, count=2):
    """[[(images, labels), ...] of each epoch], as numpy."""
    return [[tuple(np.asarray(t) for t in batch) for batch in ds] for _ in range(count)]


@pytest.mark.parametrize("augment", [None, Augment()])
@pytest.mark.parametrize("cache", [False, True])
def test_each_batch_is_mixed_by_seed_epoch_and_batch_index(cats_data_dir, cache, augment):
    plain = epochs(read(cats_data_dir, cache=cache, augment=augment))
    mixed = epochs(read(cats_data_dir, cache=cache, augment=augment, mix=TIMM))
    mixing_checks.assert_mixed_by_seed_epoch_and_batch_index(
        plain, mixed, TIMM, seed=SEED, classes=CLASSES, batches=4, last=11
    )


def test_float_output_is_the_uint8_blend_over_255(cats_data_dir):
    as_uint8 = epochs(read(cats_data_dir, mix=TIMM), 1)[0]
    as_float = epochs(read(cats_data_dir, mix=TIMM, dtype=tf.float32), 1)[0]
    for (images, labels), (floats, float_labels) in zip(as_uint8, as_float, strict=True):
        assert floats.dtype == np.float32
        np.testing.assert_allclose(floats, images / 255.0, atol=1e-6)
        np.testing.assert_array_equal(labels, float_labels)


def test_the_last_odd_batch_keeps_its_middle_picture_and_label(cats_data_dir):
    plain = epochs(read(cats_data_dir, cache=True), 1)[0][-1]
    m = Mix(mixup_alpha=1.0, label_smoothing=0.1)
    images, targets = epochs(read(cats_data_dir, cache=True, mix=m), 1)[0][-1]
    assert len(images) == 11
    np.testing.assert_array_equal(images[5], plain[0][5])
    expected = np.full(CLASSES, 0.1 / CLASSES, np.float32)
    expected[plain[1][5]] += 0.9
    np.testing.assert_allclose(targets[5], expected, atol=1e-6)
    assert not np.array_equal(images[0], plain[0][0])  # the others are mixed


def test_a_last_batch_of_one_is_left_unmixed_with_a_smoothed_label(cats_data_dir):
    plain = epochs(read(cats_data_dir, batch_size=5), 1)[0][-1]  # 56 = 11 x 5 + 1
    m = Mix(mixup_alpha=1.0, cutmix_alpha=1.0, label_smoothing=0.1)
    images, targets = epochs(read(cats_data_dir, batch_size=5, mix=m), 1)[0][-1]
    assert len(images) == 1
    np.testing.assert_array_equal(images, plain[0])
    np.testing.assert_allclose(targets[0, plain[1][0]], 0.95, atol=1e-6)


def test_label_smoothing_alone_leaves_the_pictures(cats_data_dir):
    plain = epochs(read(cats_data_dir), 1)[0]
    smoothed = epochs(read(cats_data_dir, mix=Mix(label_smoothing=0.2)), 1)[0]
    for (images, labels), (same, rows) in zip(plain, smoothed, strict=True):
        np.testing.assert_array_equal(images, same)
        np.testing.assert_allclose(rows[np.arange(len(labels)), labels], 0.9, atol=1e-6)
        np.testing.assert_allclose(rows.sum(1), 1, atol=1e-6)


def test_features_dict_gets_one_hot_labels(cats_data_dir):
    batch = next(iter(read(cats_data_dir, mix=TIMM, as_supervised=False, with_index=True)))
    assert batch["label"].dtype == tf.float32 and batch["label"].shape == (BATCH, CLASSES)
    assert batch["index"].dtype == tf.int64 and batch["image/filename"].shape == (BATCH,)


def test_the_same_seed_repeats_and_another_differs(cats_data_dir):
    first = epochs(read(cats_data_dir, mix=Mix(mixup_alpha=1.0)), 1)[0]
    again = epochs(read(cats_data_dir, mix=Mix(mixup_alpha=1.0)), 1)[0]
    other = epochs(read(cats_data_dir, mix=Mix(mixup_alpha=1.0), seed=SEED + 1), 1)[0]
    mixing_checks.assert_same_seed_repeats_and_another_differs(first, again, other)


@pytest.mark.parametrize("cache", [False, True])
def test_a_resumed_epoch_repeats_its_mixes(cats_data_dir, cache):
    whole = epochs(read(cats_data_dir, cache=cache, augment=Augment(), mix=TIMM, num_epochs=2), 1)
    resumed_ds = read(cats_data_dir, cache=cache, augment=Augment(), mix=TIMM, num_epochs=2)
    fast_tfds.set_epoch(resumed_ds, 1, 1)  # a run stopped after 1 batch of epoch 1
    resumed = epochs(resumed_ds, 1)[0][:3]  # the rest of epoch 1
    for got, want in zip(resumed, whole[0][4 + 1 :], strict=True):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize(
    "options, message",
    [
        ({"mix": "mixup"}, r"^mix='mixup': must be a fast_tfds\.Mix"),
        ({"mix": TIMM, "shuffle": False}, r"^mix=: mixes training batches, and shuffle=False"),
        ({"mix": TIMM, "augment": Augment.eval()}, r"^mix=: .*the evaluation recipe"),
        ({"mix": TIMM, "batch_size": None}, r"^batch_size=None: mix= mixes the pictures"),
    ],
)
def test_bad_options_are_one_line(cats_data_dir, options, message):
    with pytest.raises(ValueError, match=message) as err:
        read(cats_data_dir, **options)
    assert "\n" not in str(err.value)


def test_batches_kept_keep_their_pixels_while_the_mixer_reuses_its_arrays(cats_data_dir):
    # The mixer's outputs are reused once no tensor holds them: batches kept as tensors
    # (more than the arrays it keeps) still hold what they held when they were read.
    ds = read(cats_data_dir, cache=True, augment=Augment(), mix=Mix(mixup_alpha=0.8))
    kept, copies = [], []
    for _ in range(3):
        for images, _ in ds:
            kept.append(images)
            copies.append(np.array(images))
    assert len(kept) > 8
    for tensor, copy in zip(kept, copies, strict=True):
        np.testing.assert_array_equal(tensor.numpy(), copy)


def test_the_mixers_output_arrays_are_reused_only_once_free():
    from fast_tfds.read.mixed import _Outputs

    outputs = _Outputs(keep=2)
    first = outputs.get((2, 3, 3, 3))
    second = outputs.get((2, 3, 3, 3))
    assert first is not second
    held = id(second)
    del first
    again = outputs.get((2, 3, 3, 3))  # the first one, free again
    assert id(again) != held and again is outputs._arrays[0]
    assert outputs.get((2, 3, 3, 3)) is not again  # both held: a new one, not kept
    assert len(outputs._arrays) == 2
