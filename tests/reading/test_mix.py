"""`mix=` in both back ends: each batch is exactly `mixing.mix` of the unmixed batch (same
seed: the same order and crops) drawn from (seed, epoch, batch index), on every path
(cached or not, augmented or not); a last odd batch keeps its middle picture; a resumed
epoch repeats its mixes; one-line errors. tf.data's float32 is the uint8 blend / 255; the
loader's saved state names the mix. What a mix does to pixels and labels (rows sum to 1,
CutMix weights are the pasted area) is tests/augment/test_mixing.py's."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

import fast_tfds
from fast_tfds import Augment, Mix
from fast_tfds.augment import mixing

BATCH = 15  # 56 examples: 3 batches of 15 and a last, odd one of 11
CLASSES = 2
SEED = 5
TIMM = Mix(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1)


def read(backend, **options):
    return backend.open(**{"batch_size": BATCH, "seed": SEED, **options})


def epochs(backend, count=2, **options):
    """[[(images, labels), ...] of each epoch] of a new reader with `options`."""
    return backend.epochs(read(backend, **options), count)


@pytest.mark.parametrize("augment", [None, Augment()], ids=["plain", "augment"])
@pytest.mark.parametrize("cache", [False, True])
def test_each_batch_is_mixed_by_seed_epoch_and_batch_index(backend, cache, augment):
    plain = epochs(backend, cache=cache, augment=augment)
    mixed = epochs(backend, cache=cache, augment=augment, mix=TIMM)
    kinds = set()
    for epoch, (plain_batches, mixed_batches) in enumerate(zip(plain, mixed, strict=True)):
        assert len(mixed_batches) == 4 and len(mixed_batches[-1][0]) == 11
        for index, ((images, labels), (got, targets)) in enumerate(
            zip(plain_batches, mixed_batches, strict=True)
        ):
            want, want_targets, lam = mixing.mix(
                images.copy(), labels, CLASSES, TIMM, seed=SEED, epoch=epoch, batch=index
            )
            kinds.add(TIMM.draw(SEED, epoch, index, *images.shape[1:3])[1] is not None)
            np.testing.assert_array_equal(got, want)
            assert targets.dtype == np.float32 and targets.shape == (len(images), CLASSES)
            np.testing.assert_allclose(targets, want_targets, atol=1e-6)
            np.testing.assert_allclose(targets.sum(1), 1, atol=1e-6)
            assert lam < 1
        # The odd last batch's middle picture is its own partner: it stays.
        np.testing.assert_array_equal(mixed_batches[-1][0][5], plain_batches[-1][0][5])
    assert kinds == {False, True}  # both MixUp and CutMix batches were checked


def test_the_last_odd_batch_keeps_its_middle_picture_and_label(backend):
    (plain,) = epochs(backend, 1, cache=True)
    m = Mix(mixup_alpha=1.0, label_smoothing=0.1)
    images, targets = epochs(backend, 1, cache=True, mix=m)[0][-1]
    assert len(images) == 11
    np.testing.assert_array_equal(images[5], plain[-1][0][5])
    expected = np.full(CLASSES, 0.1 / CLASSES, np.float32)
    expected[plain[-1][1][5]] += 0.9
    np.testing.assert_allclose(targets[5], expected, atol=1e-6)
    assert not np.array_equal(images[0], plain[-1][0][0])  # the others are mixed


def test_a_last_batch_of_one_is_left_unmixed_with_a_smoothed_label(backend):
    plain = epochs(backend, 1, batch_size=5)[0][-1]  # 56 = 11 x 5 + 1
    m = Mix(mixup_alpha=1.0, cutmix_alpha=1.0, label_smoothing=0.1)
    images, targets = epochs(backend, 1, batch_size=5, mix=m)[0][-1]
    assert len(images) == 1
    np.testing.assert_array_equal(images, plain[0])
    np.testing.assert_allclose(targets[0, plain[1][0]], 0.95, atol=1e-6)


def test_label_smoothing_alone_leaves_the_pictures(backend):
    (plain,) = epochs(backend, 1)
    (smoothed,) = epochs(backend, 1, mix=Mix(label_smoothing=0.2))
    for (images, labels), (same, rows) in zip(plain, smoothed, strict=True):
        np.testing.assert_array_equal(images, same)
        np.testing.assert_allclose(rows[np.arange(len(labels)), labels], 0.9, atol=1e-6)
        np.testing.assert_allclose(rows.sum(1), 1, atol=1e-6)


def test_the_same_seed_repeats_and_another_differs(backend):
    m = Mix(mixup_alpha=1.0)
    (first,) = epochs(backend, 1, mix=m)
    (again,) = epochs(backend, 1, mix=m)
    (other,) = epochs(backend, 1, mix=m, seed=SEED + 1)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    assert sum(np.array_equal(a[0], c[0]) for a, c in zip(first, other, strict=True)) == 0


@pytest.mark.parametrize("cache", [False, True])
def test_a_resumed_epoch_repeats_its_mixes(backend, cache):
    options = {"cache": cache, "augment": Augment(), "mix": TIMM, "num_epochs": 2}
    (whole,) = epochs(backend, 1, **options)
    resumed = read(backend, **options)
    fast_tfds.set_epoch(resumed, 1, 1)  # a run stopped after 1 batch of epoch 1
    rest = backend.epochs(resumed, 1)[0][:3]  # the rest of epoch 1
    for got, want in zip(rest, whole[4 + 1 :], strict=True):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize(
    "options, message",
    [
        ({"mix": "mixup"}, r"^mix='mixup': must be a fast_tfds\.Mix"),
        ({"mix": {"mixup_alpha": 1}}, r"^mix=\{'mixup_alpha': 1\}: must be a fast_tfds\.Mix"),
        ({"mix": TIMM, "shuffle": False}, r"^mix=: mixes training batches, and shuffle=False"),
        ({"mix": TIMM, "augment": Augment.eval()}, r"^mix=: .*the evaluation recipe"),
    ],
)
def test_bad_options_are_one_line(backend, options, message):
    with pytest.raises(ValueError, match=message) as err:
        read(backend, **options)
    assert "\n" not in str(err.value)


# tf.data's own: float32 output, unbatched examples, dict output, tensors kept.


def test_float_output_is_the_uint8_blend_over_255(tf_data):
    (as_uint8,) = epochs(tf_data, 1, mix=TIMM)
    (as_float,) = epochs(tf_data, 1, mix=TIMM, dtype=tf.float32)
    for (images, labels), (floats, float_labels) in zip(as_uint8, as_float, strict=True):
        assert floats.dtype == np.float32
        np.testing.assert_allclose(floats, images / 255.0, atol=1e-6)
        np.testing.assert_array_equal(labels, float_labels)


def test_unbatched_reads_refuse_mix_in_one_line(tf_data):
    with pytest.raises(ValueError, match=r"^batch_size=None: mix= mixes the pictures") as err:
        read(tf_data, mix=TIMM, batch_size=None)
    assert "\n" not in str(err.value)


def test_features_dict_gets_one_hot_labels(tf_data):
    batch = next(iter(read(tf_data, mix=TIMM, as_supervised=False, with_index=True)))
    assert batch["label"].dtype == tf.float32 and batch["label"].shape == (BATCH, CLASSES)
    assert batch["index"].dtype == tf.int64 and batch["image/filename"].shape == (BATCH,)


def test_batches_kept_keep_their_pixels_while_the_mixer_reuses_its_arrays(tf_data):
    # The mixer's outputs are reused once no tensor holds them: batches kept as tensors
    # (more than the arrays it keeps) still hold what they held when they were read.
    ds = read(tf_data, cache=True, augment=Augment(), mix=Mix(mixup_alpha=0.8))
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


# The loader's own: its saved state, and the state's key.


@pytest.mark.parametrize("cache", [False, True])
def test_a_resumed_iterator_continues_with_the_same_mixes(loader, cache):
    options = {"augment": Augment(), "cache": cache, "mix": TIMM, "num_epochs": 2}
    (whole,) = epochs(loader, 1, **options)
    stopped = iter(read(loader, **options))
    for _ in range(5):  # epoch 0 and one batch of epoch 1
        next(stopped)
    state = json.loads(json.dumps(stopped.get_state()))
    assert state["mix"] == repr(TIMM)
    restored = iter(read(loader, **options))
    restored.set_state(state)
    rest = [tuple(np.array(t) for t in batch) for batch in restored]
    assert len(rest) == 3
    for got, want in zip(rest, whole[5:], strict=True):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_the_state_key_is_unchanged_without_mix(loader):
    state = iter(read(loader)).get_state()
    assert "mix" not in state  # a state saved before mix= existed has the same key
    iter(read(loader)).set_state(state)
    with pytest.raises(ValueError, match="mix: None vs"):
        iter(read(loader, mix=TIMM)).set_state(state)
