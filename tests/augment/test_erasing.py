"""Random erasing: timm's area and aspect ranges, per-pixel values of ImageNet's mean and
spread in uint8 terms, draws from (seed, epoch, example)."""

from __future__ import annotations

import numpy as np
import pytest

from fast_tfds.augment import erasing

N = 5000


def test_erased_areas_and_aspects_are_within_range():
    boxes = erasing.sample(1.0, 0, 0, np.arange(N), (224, 224))
    on = boxes.height > 0
    assert on.mean() > 0.95  # almost always one of 10 tries fits
    area = boxes.height[on] * boxes.width[on] / 224**2
    aspect = boxes.height[on] / boxes.width[on]
    # Rounding the sides to whole pixels moves an area or aspect slightly past its range.
    assert area.min() >= 0.02 * 0.9 and area.max() <= 1 / 3 * 1.1
    assert aspect.min() >= 0.3 * 0.9 and aspect.max() <= 1 / 0.3 * 1.1
    assert area.max() > 0.3 and area.min() < 0.03  # spread over the range
    assert np.log(aspect).mean() == pytest.approx(0, abs=0.05)  # log-uniform, symmetric
    assert (boxes.top + boxes.height <= 224).all() and (boxes.left + boxes.width <= 224).all()


def test_probability():
    boxes = erasing.sample(0.25, 1, 0, np.arange(N), (224, 224))
    assert (boxes.height > 0).mean() == pytest.approx(0.25, abs=0.03)
    assert not (erasing.sample(0.0, 1, 0, np.arange(100), (224, 224)).height > 0).any()


def test_pixels_follow_imagenet_mean_and_spread_and_repeat():
    boxes = erasing.sample(1.0, 2, 3, np.arange(8), (224, 224))
    i = int(np.argmax(boxes.height * boxes.width))
    out = np.zeros((224, 224, 3), np.uint8)
    erasing.erase_into(out, boxes, i)
    t, x, h, w = (int(v[i]) for v in (boxes.top, boxes.left, boxes.height, boxes.width))
    patch = out[t : t + h, x : x + w].reshape(-1, 3).astype(float)
    assert np.allclose(patch.mean(0), erasing.MEAN, atol=2)
    assert np.allclose(patch.std(0), erasing.STD, rtol=0.1)  # less the clip at 0 and 255
    outside = np.ones((224, 224), bool)
    outside[t : t + h, x : x + w] = False
    assert not out[outside].any()
    again = np.zeros_like(out)
    erasing.erase_into(again, erasing.sample(1.0, 2, 3, np.arange(8), (224, 224)), i)
    assert np.array_equal(out, again)
    other = erasing.sample(1.0, 9, 3, np.arange(8), (224, 224))
    assert not np.array_equal(other.top, boxes.top)


@pytest.mark.parametrize("value", [-0.1, 1.5, True])
def test_bad_probability(value):
    with pytest.raises(ValueError, match="erase="):
        erasing.sample(value, 0, 0, [0], (224, 224))


def test_boxes_are_per_example_whatever_the_batch():
    whole = erasing.sample(0.5, 4, 1, np.arange(50), (224, 224))
    alone = erasing.sample(0.5, 4, 1, [37], (224, 224))
    for field in ("top", "left", "height", "width", "seeds"):
        assert getattr(whole, field)[37] == getattr(alone, field)[0]
