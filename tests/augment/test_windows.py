"""Windows, flips and colour factors: in range and spread over it, a pure function of
(seed, epoch, example), new every epoch, and the center crop where timm puts it."""

from __future__ import annotations

import numpy as np
import pytest

from fast_tfds.augment import Augment, draws, windows

N = 20_000


TRAIN = Augment()


def draw(augment=TRAIN, seed=0, epoch=0, indices=None, height=300, width=400):
    indices = np.arange(N) if indices is None else np.asarray(indices)
    n = len(indices)
    return windows.sample(
        windows.Draw(augment, seed, epoch, indices), np.full(n, height), np.full(n, width)
    )


def test_random_resized_areas_and_ratios_are_in_range_and_spread():
    augment = Augment(scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
    w = draw(augment)
    assert (w.top >= 0).all() and (w.left >= 0).all()
    assert (w.top + w.height <= 300).all() and (w.left + w.width <= 400).all()
    area = w.height * w.width / (300 * 400)
    aspect = w.width / w.height
    # Whole pixels: a window's sides are rounded, so its area and aspect move a little.
    assert area.min() >= 0.08 * 0.9 and area.max() <= 1.0
    assert aspect.min() >= 0.75 * 0.97 and aspect.max() <= 4 / 3 * 1.03
    # Spread over the range: every tenth of the area range and of the log-aspect
    # range is hit (large areas fit less often, as in torchvision, so not evenly).
    area_bins = np.histogram(area, bins=10, range=(0.08, 1.0))[0]
    assert (area_bins > N / 100).all(), area_bins
    log_aspect = np.histogram(np.log(aspect), bins=10, range=np.log((0.75, 4 / 3)))[0]
    assert (log_aspect > N / 30).all(), log_aspect
    # Positions: both halves of the picture are used.
    centers = w.left + w.width / 2
    assert 0.4 < (centers < 200).mean() < 0.6


def test_other_ranges_are_followed():
    w = draw(Augment(scale=(0.5, 0.6), ratio=(1.0, 2.0)), height=400, width=400)
    area = w.height * w.width / 400**2
    aspect = w.width / w.height
    assert area.min() >= 0.49 and area.max() <= 0.61
    assert aspect.min() >= 0.98 and aspect.max() <= 2.02


def test_about_half_are_flipped_and_without_flip_none():
    flips = draw().flip
    assert abs(flips.mean() - 0.5) < 0.02
    assert not draw(Augment(flip=False)).flip.any()


def test_a_picture_no_window_fits_falls_back_to_its_center_clamped_to_the_ratio():
    # 40 x 1000: a window of area >= 0.9 never has an aspect ratio <= 4/3.
    w = draw(Augment(scale=(0.9, 1.0)), indices=range(100), height=40, width=1000)
    assert (w.height == 40).all() and (w.width == round(40 * 4 / 3)).all()
    assert (w.left == (1000 - 53) // 2).all() and (w.top == 0).all()


def test_same_seed_same_windows_other_epoch_or_seed_new_ones():
    a = draw(indices=range(1000))
    assert all(
        np.array_equal(getattr(a, f), getattr(draw(indices=range(1000)), f))
        for f in ("top", "left", "height", "width", "flip")
    )
    for other in (draw(epoch=1, indices=range(1000)), draw(seed=1, indices=range(1000))):
        same = (a.top == other.top) & (a.left == other.left) & (a.height == other.height)
        assert same.mean() < 0.05
        assert 0.3 < (a.flip == other.flip).mean() < 0.7


def test_an_examples_window_does_not_depend_on_its_batch():
    whole = draw(indices=range(50))
    for i in (0, 7, 49):
        alone = draw(indices=[i])
        assert alone.window(0) == whole.window(i) and alone.flip[0] == whole.flip[i]
    shuffled = np.random.default_rng(0).permutation(50)
    again = draw(indices=shuffled)
    assert [again.window(k) for k in range(50)] == [whole.window(i) for i in shuffled]


def test_the_center_crop_is_timms():
    # A 256 x 341 picture: the central 224 x 224 (crop_fraction 0.875 of the shorter side).
    w = windows.sample(
        windows.Draw(Augment.eval(), 0, 0, [0, 1]), [256, 300], [341, 200], (224, 224)
    )
    assert w.window(0) == (16, 58, 224, 224)
    assert w.window(1) == (62, 12, 175, 175)
    # A wide output keeps its aspect ratio: 0.875 of the largest 1:2 window of 300 x 400.
    w = windows.sample(windows.Draw(Augment.eval(), 0, 0, [0]), [300], [400], (100, 200))
    assert w.window(0) == (62, 25, 175, 350)
    # No randomness: any seed or epoch.
    assert windows.sample(windows.Draw(Augment.eval(), 5, 9, [0]), [300], [400], (100, 200)).window(
        0
    ) == (
        62,
        25,
        175,
        350,
    )


def test_no_crop_is_the_whole_picture():
    w = windows.sample(
        windows.Draw(Augment(crop=None), 0, 0, [0, 1]), [30, 50], [40, 20], (224, 224)
    )
    assert [w.window(0), w.window(1)] == [(0, 0, 30, 40), (0, 0, 50, 20)]


@pytest.mark.parametrize("name", ["brightness", "contrast", "saturation"])
def test_jitter_factors_are_torchvisions_ranges(name):
    w = draw(Augment(**{name: 0.4}), indices=range(5000))
    factors = getattr(w, name)
    assert factors.min() >= 0.6 and factors.max() <= 1.4
    assert factors.min() < 0.62 and factors.max() > 1.38 and abs(factors.mean() - 1) < 0.02
    others = {"brightness", "contrast", "saturation"} - {name}
    assert all((getattr(w, other) == 1).all() for other in others) and (w.hue == 0).all()
    # A factor above 1 means a range that starts at 0 (torchvision's max(0, 1 - v)).
    assert getattr(draw(Augment(**{name: 1.5}), indices=range(2000)), name).min() >= 0


def test_hue_shifts_are_within_the_range():
    hue = draw(Augment(hue=0.1), indices=range(5000)).hue
    assert hue.min() >= -0.1 and hue.max() <= 0.1 and hue.min() < -0.09 and hue.max() > 0.09


def test_uniforms_are_uniform_and_independent_across_draws():
    u = draws.uniforms(0, 0, np.arange(N), windows.DRAWS)
    assert u.shape == (N, windows.DRAWS) and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005
    correlations = np.corrcoef(u.T)[np.triu_indices(windows.DRAWS, 1)]
    assert np.abs(correlations).max() < 0.05


def test_mismatched_sizes_are_an_error():
    with pytest.raises(ValueError, match="3 indices, 2 heights"):
        windows.sample(windows.Draw(Augment(), 0, 0, [0, 1, 2]), [1, 2], [1, 2])
