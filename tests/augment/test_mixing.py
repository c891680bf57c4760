"""MixUp / CutMix as timm's batch mode: rows sum to 1, CutMix weights are the pasted area,
pairs i with B - 1 - i, seeded by (seed, epoch, batch)."""

from __future__ import annotations

import numpy as np
import pytest

from fast_tfds.augment import mixing

B, C = 8, 5


def batch(seed=0, size=32):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (B, size, size, 3)).astype(np.uint8), rng.integers(0, C, B)


def test_label_smoothing_alone():
    images, labels = batch()
    before = images.copy()
    out, targets, lam = mixing.mix(
        images, labels, C, mixing.Mix(label_smoothing=0.1), seed=0, epoch=0, batch=0
    )
    assert lam == 1.0 and np.array_equal(out, before)
    assert np.allclose(targets.sum(1), 1)
    assert np.allclose(targets[np.arange(B), labels], 0.9 + 0.1 / C)


def test_cutmix_weights_are_the_pasted_area():
    seen = 0
    for b in range(20):
        images, labels = batch(b)
        # Distinct pictures: each pixel says which picture it came from.
        images[:] = np.arange(B, dtype=np.uint8)[:, None, None, None] * 10
        out, targets, lam = mixing.mix(
            images.copy(), labels, C, mixing.Mix(cutmix_alpha=1.0), seed=1, epoch=0, batch=b
        )
        if lam == 1.0:
            continue
        seen += 1
        for i in range(B):
            own = (out[i, ..., 0] == 10 * i).mean()
            partner = B - 1 - i
            assert own == pytest.approx(lam)
            assert (out[i, ..., 0] == 10 * partner).mean() == pytest.approx(1 - lam)
            expected = np.zeros(C)
            expected[labels[i]] += lam
            expected[labels[partner]] += 1 - lam
            assert np.allclose(targets[i], expected, atol=1e-6)
        assert np.allclose(targets.sum(1), 1, atol=1e-6)
    assert seen > 10


def test_mixup_blends_with_the_flipped_batch_and_float_output_is_unquantized():
    images, labels = batch(3)
    m = mixing.Mix(mixup_alpha=0.8, label_smoothing=0.1)
    floats, targets, lam = mixing.mix(
        images, labels, C, m, seed=2, epoch=1, batch=4, dtype=np.float32
    )
    assert 0 < lam < 1 and floats.dtype == np.float32
    expected = lam * images.astype(np.float32) + (1 - lam) * images[::-1].astype(np.float32)
    assert np.allclose(floats, expected, atol=1e-3)
    quantized, same_targets, same_lam = mixing.mix(
        images.copy(), labels, C, m, seed=2, epoch=1, batch=4
    )
    assert same_lam == lam and np.array_equal(targets, same_targets)
    assert np.abs(quantized - expected).max() <= 0.5 + 1e-3
    assert np.allclose(targets.sum(1), 1, atol=1e-6)


def test_odd_batch_middle_pairs_with_itself():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 16, 16, 3)).astype(np.uint8)
    middle = images[2].copy()
    out, targets, lam = mixing.mix(
        images, [0, 1, 2, 3, 4], C, mixing.Mix(mixup_alpha=1.0), seed=0, epoch=0, batch=1
    )
    assert lam < 1 and np.array_equal(out[2], middle) and targets[2, 2] == pytest.approx(1)


def test_switch_between_mixup_and_cutmix_and_seeding():
    m = mixing.Mix(mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.5)
    draws = [m.draw(0, 0, b, 224, 224) for b in range(400)]
    cutmix = np.mean([box is not None for _, box in draws])
    assert cutmix == pytest.approx(0.5, abs=0.08)
    assert draws == [m.draw(0, 0, b, 224, 224) for b in range(400)]
    assert draws != [m.draw(1, 0, b, 224, 224) for b in range(400)]
    never = mixing.Mix(mixup_alpha=0.8, prob=0.0)
    assert all(never.draw(0, 0, b, 8, 8) == (1.0, None) for b in range(20))


@pytest.mark.parametrize("fields", [{"mixup_alpha": 0.8}, {"cutmix_alpha": 1.0}, {}])
def test_mixing_into_out_reads_the_images_only_and_equals_in_place(fields):
    m = mixing.Mix(label_smoothing=0.1, **fields)
    for b in range(6):
        images, labels = batch(b)
        images.flags.writeable = False  # a tensor's buffer, as tf.numpy_function gives it
        out = np.zeros_like(images)
        got, targets, lam = mixing.mix(
            images, labels, C, m, seed=4, epoch=1, batch=b, out=out, num_threads=2
        )
        want, want_targets, want_lam = mixing.mix(
            images.copy(), labels, C, m, seed=4, epoch=1, batch=b
        )
        assert lam == want_lam and np.array_equal(targets, want_targets)
        assert np.array_equal(got, want)
        assert (got is images) == (lam == 1.0)


def test_odd_batch_into_out_keeps_the_middle_picture():
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (5, 16, 16, 3)).astype(np.uint8)
    for fields in ({"mixup_alpha": 1.0}, {"cutmix_alpha": 1.0}):
        out, _, lam = mixing.mix(
            images,
            range(5),
            C,
            mixing.Mix(**fields),
            seed=0,
            epoch=0,
            batch=3,
            out=np.empty_like(images),
        )
        assert lam < 1 and np.array_equal(out[2], images[2])


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"mixup_alpha": -1}, r"^mixup_alpha=-1: must be a number >= 0"),
        ({"cutmix_alpha": "1"}, r"^cutmix_alpha='1': must be a number >= 0"),
        ({"mixup_alpha": True}, r"^mixup_alpha=True: must be a number"),
        ({"prob": 2}, r"^prob=2: must be a number in \[0, 1\]"),
        ({"switch_prob": -0.1}, r"^switch_prob=-0.1: must be a number in \[0, 1\]"),
        ({"label_smoothing": 1.5}, r"^label_smoothing=1.5: must be a number in \[0, 1\]"),
        ({"prob": float("nan")}, r"^prob=nan: must be a number in"),
    ],
)
def test_bad_values_are_one_line_naming_the_field(fields, message):
    with pytest.raises(ValueError, match=message) as err:
        mixing.Mix(**fields)
    assert "\n" not in str(err.value)


def test_mix_is_frozen_and_public():
    import dataclasses

    import fast_tfds

    assert fast_tfds.Mix is mixing.Mix
    with pytest.raises(dataclasses.FrozenInstanceError):
        mixing.Mix().prob = 0.5
