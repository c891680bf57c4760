"""The warp kernel: today's crop + flip where there is no geometry, today's crop within a
stated bound where one warp replaces it, rotations read off pictures whose pixels are
their coordinates.

Single warp vs today's crop + resize, on random-resized crops of 256-px photos: where the
crop shrinks by 2x or less, interior pixels differ by at most 1 level (mean about 0.12;
the outermost row and column differ more where the warp reads the neighbouring picture
pixels that today's resize of the cut window replicates instead). Past 2x a single
bilinear warp aliases (up to 104 levels, mean 3 at a 64-px output), so the kernel
resizes those crops as today and warps the result: identical to today.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from fast_tfds.augment import Augment, affine, kernels, warp, windows
from fast_tfds.samples import photos


@pytest.fixture(scope="module")
def cached():
    """Photos at cache resolution: shorter side 256, aspect kept."""
    rng = np.random.default_rng(2)
    pics = []
    for _ in range(24):
        p = np.asarray(photos.random_photo(rng))
        h, w = p.shape[:2]
        s = 256 / min(h, w)
        pics.append(cv2.resize(p, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA))
    return pics


def _sizes(pics):
    return [p.shape[0] for p in pics], [p.shape[1] for p in pics]


@pytest.mark.parametrize("num_threads", [1, 2])
def test_without_geometry_it_is_todays_kernel(cached, num_threads):
    n = len(cached)
    drawn = windows.sample(windows.Draw(Augment(), 3, 1, np.arange(n)), *_sizes(cached))
    recipes = [[("identity", 0)] if i % 2 else [] for i in range(n)]
    plan = warp.plan(cached, drawn, recipes, (224, 224))
    ours = warp.apply_into(cached, plan, np.zeros((n, 224, 224, 3), np.uint8), num_threads=2)
    today = kernels.apply_into(cached, drawn, np.zeros((n, 224, 224, 3), np.uint8))
    assert not plan.warped.any()
    assert np.array_equal(ours, today)


@pytest.mark.parametrize("size", [224, 112, 64])
def test_one_warp_is_within_the_bound_of_todays_crop(cached, size):
    n = len(cached)
    worst, total, count = {}, {}, {}
    for epoch in range(3):
        drawn = windows.sample(windows.Draw(Augment(), 0, epoch, np.arange(n)), *_sizes(cached))
        today = kernels.apply_into(cached, drawn, np.zeros((n, size, size, 3), np.uint8))
        m = affine.window_matrices(drawn, (size, size))
        boxes = kernels.source_boxes(cached, drawn)
        for i in range(n):
            out = np.empty((size, size, 3), np.uint8)
            scales = (abs(m[i, 0, 0]), m[i, 1, 1])
            warp.warp_into(cached[i], m[i], scales, out, boxes[i])
            diff = np.abs(out.astype(int) - today[i])[1:-1, 1:-1]
            far = max(scales) > warp.AREA_SHRINK
            worst[far] = max(worst.get(far, 0), int(diff.max()))
            total[far] = total.get(far, 0) + diff.mean()
            count[far] = count.get(far, 0) + 1
    assert worst.get(False, 0) <= 1 and total.get(False, 0) <= 0.2 * count.get(False, 1)
    assert worst.get(True, 0) == 0
    if size == 64:
        assert count[True] > 10  # the shrinking path was exercised


def coordinates(height: int, width: int) -> np.ndarray:
    """R = x, G = y (both below 256), B = 128."""
    y, x = np.mgrid[:height, :width]
    return np.stack([x, y, np.full_like(x, 128)], axis=-1).astype(np.uint8)


@pytest.mark.parametrize("degrees", [-40.0, -7.5, 12.0, 33.0])
def test_rotation_angle_reads_back_from_coordinates(degrees):
    """A whole-picture crop rotated by `degrees`: the source coordinates at the output's
    center row move along the rotated axis."""
    picture = coordinates(200, 200)
    drawn = windows.sample(windows.Draw(Augment(crop=None, flip=False), 0, 0, [0]), [200], [200])
    plan = warp.plan([picture], drawn, [[("rotate", degrees)]], (100, 100))
    out = warp.apply_into([picture], plan, np.zeros((1, 100, 100, 3), np.uint8))[0]
    xs = out[50, 30:70, 0].astype(float)
    ys = out[50, 30:70, 1].astype(float)
    slope = np.polyfit(xs, ys, 1)[0]  # source dy / dx along an output row
    # PIL's rotate turns the content counter-clockwise on screen, so an output row reads
    # a source line at +degrees in y-down coordinates.
    assert np.degrees(np.arctan(slope)) == pytest.approx(degrees, abs=0.5)


def test_fill_outside_the_rotated_frame():
    picture = np.full((100, 100, 3), 200, np.uint8)
    drawn = windows.sample(windows.Draw(Augment(crop=None, flip=False), 0, 0, [0]), [100], [100])
    plan = warp.plan([picture], drawn, [[("rotate", 45.0)]], (100, 100), fill=(1, 2, 3))
    out = warp.apply_into([picture], plan, np.zeros((1, 100, 100, 3), np.uint8))[0]
    assert (out[0, 0] == (1, 2, 3)).all() and (out[50, 50] == 200).all()
    # The frame and itself rotated by 45 degrees overlap in a regular octagon: 2(sqrt 2 - 1).
    kept = (out == 200).all(-1).mean()
    assert kept == pytest.approx(2 * np.sqrt(2) - 2, abs=0.02)


def test_bad_op_name_is_one_line_error():
    picture = np.zeros((10, 10, 3), np.uint8)
    drawn = windows.sample(windows.Draw(Augment(crop=None, flip=False), 0, 0, [0]), [10], [10])
    with pytest.raises(ValueError, match="op 'spin'"):
        warp.plan([picture], drawn, [[("spin", 1.0)]], (10, 10))


def test_crop_flip_rotate_in_one_warp_matches_pils_three_steps(cached):
    """The composition: PIL's crop, bilinear resize, flip and rotate, one after the other,
    against one warp. The reference interpolates twice (and PIL's resize filters a shrink
    more widely), so pixels differ by a mean of up to ~3 levels on these photos; the
    fill, which a composition in the wrong order would misplace, lands on the same pixels."""
    from PIL import Image

    pics = cached[:12]
    n, size = len(pics), 160
    drawn = windows.sample(windows.Draw(Augment(), 1, 0, np.arange(n)), *_sizes(pics))
    assert drawn.flip.any() and not drawn.flip.all()
    angles = np.linspace(-40, 40, n)
    fill = (1, 254, 3)  # a colour no photo here has
    plan = warp.plan(pics, drawn, [[("rotate", a)] for a in angles], (size, size), fill=fill)
    out = warp.apply_into(pics, plan, np.zeros((n, size, size, 3), np.uint8))
    for i in range(n):
        top, left, height, width = drawn.window(i)
        image = Image.fromarray(pics[i]).crop((left, top, left + width, top + height))
        image = image.resize((size, size), Image.BILINEAR)
        if drawn.flip[i]:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        theirs = np.asarray(image.rotate(angles[i], Image.BILINEAR, fillcolor=fill))
        assert np.abs(out[i].astype(int) - theirs).mean() <= 3.5
        ours_filled, their_filled = (out[i] == fill).all(-1), (theirs == fill).all(-1)
        assert their_filled.mean() > 0.02
        assert (ours_filled != their_filled).mean() <= 0.001


@pytest.mark.parametrize(
    "steps",
    [
        [("translate_x", -12.0)],
        [("translate_y", 30.0), ("brightness", 1.3), ("translate_x", 7.0)],
        [("translate_x", 300.0)],  # past the frame: all fill
    ],
)
def test_whole_pixel_translations_are_shifted_crops_with_the_warps_fill(cached, steps):
    # Cut, resized and shifted instead of warped: the fill is the warp's, pixel for
    # pixel, and the rest within the warp's bound of today's crop (1 level inside, 2
    # after brightness 1.3; more along the edges, where the warp reads the picture
    # beyond the window).
    pics = cached[:8]
    drawn = windows.sample(windows.Draw(Augment(), 1, 0, np.arange(8)), *_sizes(pics))
    plan = warp.plan(pics, drawn, [steps] * 8, (96, 96), fill=(124, 116, 104))
    assert plan.shifted.all()
    shifted = warp.apply_into(pics, plan, np.zeros((8, 96, 96, 3), np.uint8))
    plan.shifted[:] = False
    warped = warp.apply_into(pics, plan, np.zeros((8, 96, 96, 3), np.uint8))
    fill = (shifted == (124, 116, 104)).all(-1)
    assert np.array_equal(fill, (warped == (124, 116, 104)).all(-1))
    inside = cv2.erode((~fill).astype(np.uint8).transpose(1, 2, 0), np.ones((5, 5))) > 0
    inside = inside.reshape(96, 96, -1).transpose(2, 0, 1)
    difference = np.abs(shifted.astype(int) - warped)[inside]
    assert difference.size == 0 or (difference.max() <= 2 and difference.mean() <= 0.25)
    shift = warp._whole_shift(affine.chain([np.eye(3)]))
    assert shift == (0, 0)
