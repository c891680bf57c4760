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
        images, labels, C, mixing.Mixing(label_smoothing=0.1), seed=0, epoch=0, batch=0
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
            images.copy(), labels, C, mixing.Mixing(cutmix_alpha=1.0), seed=1, epoch=0, batch=b
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
    m = mixing.Mixing(mixup_alpha=0.8, label_smoothing=0.1)
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
        images, [0, 1, 2, 3, 4], C, mixing.Mixing(mixup_alpha=1.0), seed=0, epoch=0, batch=1
    )
    assert lam < 1 and np.array_equal(out[2], middle) and targets[2, 2] == pytest.approx(1)


def test_switch_between_mixup_and_cutmix_and_seeding():
    m = mixing.Mixing(mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.5)
    draws = [m.draw(0, 0, b, 224, 224) for b in range(400)]
    cutmix = np.mean([box is not None for _, box in draws])
    assert cutmix == pytest.approx(0.5, abs=0.08)
    assert draws == [m.draw(0, 0, b, 224, 224) for b in range(400)]
    assert draws != [m.draw(1, 0, b, 224, 224) for b in range(400)]
    never = mixing.Mixing(mixup_alpha=0.8, prob=0.0)
    assert all(never.draw(0, 0, b, 8, 8) == (1.0, None) for b in range(20))


@pytest.mark.parametrize(
    "fields, name",
    [
        ({"mixup_alpha": -1}, "mixup_alpha"),
        ({"prob": 2}, "prob"),
        ({"label_smoothing": 1.5}, "label_smoothing"),
    ],
)
def test_bad_values(fields, name):
    with pytest.raises(ValueError, match=f"{name}="):
        mixing.Mixing(**fields)
