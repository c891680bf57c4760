"""A stronger recipe on a batch: today's output where it adds nothing, rotation angles in
range and read back from coordinate pictures, the same output for a seed and threads."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from fast_tfds.augment import Augment, draws, kernels, recipe, windows
from fast_tfds.samples import photos


@pytest.fixture(scope="module")
def cached():
    rng = np.random.default_rng(5)
    pics = []
    for _ in range(16):
        p = np.asarray(photos.random_photo(rng))
        h, w = p.shape[:2]
        s = 256 / min(h, w)
        pics.append(cv2.resize(p, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA))
    return pics


def _serve(pics, r, seed=0, epoch=0, threads=1, size=96):
    out = np.zeros((len(pics), size, size, 3), np.uint8)
    return recipe.apply_into(
        pics, windows.Draw(r, seed, epoch, np.arange(len(pics))), out, num_threads=threads
    )


def test_plain_recipe_is_todays_kernel(cached):
    ours = _serve(cached, Augment(), seed=3, epoch=2)
    drawn = windows.sample(
        windows.Draw(Augment(), 3, 2, np.arange(len(cached))),
        *zip(*[p.shape[:2] for p in cached], strict=True),
    )
    today = kernels.apply_into(cached, drawn, np.zeros_like(ours))
    assert np.array_equal(ours, today)


def test_rotation_angles_are_within_range_and_spread():
    a = recipe.angles(15.0, 0, 0, np.arange(10_000))
    assert np.abs(a).max() <= 15
    assert np.quantile(a, [0.05, 0.5, 0.95]) == pytest.approx([-13.5, 0, 13.5], abs=0.6)
    assert not np.array_equal(a, recipe.angles(15.0, 0, 1, np.arange(10_000)))


def test_rotation_reads_back_from_coordinate_pictures():
    y, x = np.mgrid[:200, :200]
    picture = np.stack([x, y, np.full_like(x, 128)], axis=-1).astype(np.uint8)
    pics = [picture] * 12
    r = Augment(crop=None, flip=False, rotate=40.0)
    out = _serve(pics, r, size=100)
    for i, angle in enumerate(recipe.angles(40.0, 0, 0, np.arange(12))):
        row = out[i, 50, 35:65].astype(float)
        slope = np.polyfit(row[:, 0], row[:, 1], 1)[0]
        assert np.degrees(np.arctan(slope)) == pytest.approx(angle, abs=0.6)


@pytest.mark.parametrize("name", ["trivial_augment_wide", "rand_augment", "rand-m9-mstd0.5-inc1"])
def test_policy_and_erasing_repeat_for_a_seed_and_threads(cached, name):
    r = Augment(brightness=0.2, rotate=10.0, auto_augment=name, erase=0.5)
    one = _serve(cached, r, seed=1, epoch=4)
    assert np.array_equal(one, _serve(cached, r, seed=1, epoch=4, threads=3))
    assert not np.array_equal(one, _serve(cached, r, seed=2, epoch=4))


def test_bad_rotate():
    with pytest.raises(ValueError, match="rotate=-1"):
        Augment(rotate=-1)
    with pytest.raises(ValueError, match="erase=2"):
        Augment(erase=2)


def test_the_stronger_draws_start_after_the_windows_own_columns():
    assert draws.ROTATE == draws.WINDOW_DRAWS == windows.DRAWS
    # The windows read the first DRAWS columns: the flip is column 2 * TRIES + 2.
    u = draws.uniforms(1, 2, [3, 4], windows.DRAWS)
    flips = windows.sample(windows.Draw(Augment(), 1, 2, [3, 4]), [100, 100], [100, 100]).flip
    assert np.array_equal(flips, u[:, 2 * windows.TRIES + 2] < 0.5)
