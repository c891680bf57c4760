"""The serving step (`fast_tfds.augment.step`): batches served from the picture store
are the same windows as from the JPEG, within a stated bound of the crop of the full
decode; the plain read is its identity case."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import simplejpeg

from fast_tfds.augment import Augment, erasing, recipe, step, windows
from fast_tfds.cache.pictures import PictureCache
from tests.augment.test_kernels import coordinates, smooth_photo


def filled_cache(jpegs, shorter_side=256):
    heights, widths = zip(*(simplejpeg.decode_jpeg_header(j)[:2] for j in jpegs), strict=True)
    cache = PictureCache(heights, widths, (224, 224), shorter_side)
    for i, jpeg in enumerate(jpegs):
        cache.fill(i, jpeg)
    assert cache.filled
    return cache


def test_a_served_crop_matches_the_crop_of_the_full_decode():
    # Stated bound: mean absolute difference <= 3.5 levels per crop, <= 1.5 on average.
    # The cache holds fewer pixels than the photo: a crop smaller than the output is
    # enlarged from them (a cache of the full decode's exact area resize is as far);
    # window edges are rounded to the cache's pixels.
    rng = np.random.default_rng(5)
    shapes = [(300, 400), (450, 330), (360, 360), (420, 500)]
    jpegs = [
        simplejpeg.encode_jpeg(np.ascontiguousarray(smooth_photo(rng, h, w)), quality=95)
        for h, w in shapes
    ]
    cache = filled_cache(jpegs)
    assert [cache.shape(i) for i in range(4)] == [
        (256, 341),
        (349, 256),
        (256, 256),
        (256, 305),
    ]
    differences = []
    for epoch in range(6):
        slots = np.arange(4)
        indices = slots + 10
        out = step.serve_into(
            cache,
            slots,
            windows.Draw(Augment(), 3, epoch, indices),
            np.zeros((4, 224, 224, 3), np.uint8),
        )
        sizes = cache.reference_heights[slots], cache.reference_widths[slots]
        drawn = windows.sample(
            windows.Draw(Augment(), 3, epoch, indices), *sizes, cache.output_size
        )
        for i, jpeg in enumerate(jpegs):
            full = simplejpeg.decode_jpeg(jpeg, colorspace="RGB", fastdct=True)
            top, left, height, width = drawn.window(i)
            reference = cv2.resize(
                full[top : top + height, left : left + width],
                (224, 224),
                interpolation=cv2.INTER_AREA,
            )
            if drawn.flip[i]:
                reference = reference[:, ::-1]
            differences.append(np.abs(out[i].astype(int) - reference).mean())
    assert max(differences) <= 3.5 and np.mean(differences) <= 1.5, differences


def test_serving_reads_windows_from_a_coordinate_picture_cache():
    picture = coordinates(200, 240)
    cache = PictureCache([200] * 8, [240] * 8, (32, 32), shorter_side=None)
    for i in range(8):  # shorter_side None: each picture at the output size
        assert cache.shape(i) == (32, 32)
        cache.put(i, cv2.resize(picture, (32, 32), interpolation=cv2.INTER_AREA))
    out = step.serve_into(
        cache,
        np.arange(8),
        windows.Draw(None, 0, 0, np.arange(8)),
        np.zeros((8, 32, 32, 3), np.uint8),
    )
    assert all(np.array_equal(out[i], cache.image(i)) for i in range(8))


def test_the_same_seed_serves_the_same_batch_and_another_epoch_another():
    rng = np.random.default_rng(2)
    jpegs = [
        simplejpeg.encode_jpeg(np.ascontiguousarray(smooth_photo(rng, 300, 350))) for _ in range(6)
    ]
    cache = filled_cache(jpegs)

    def serve(seed, epoch):
        out = np.zeros((6, 224, 224, 3), np.uint8)
        return step.serve_into(
            cache,
            np.arange(6),
            windows.Draw(Augment(brightness=0.3), seed, epoch, np.arange(6)),
            out,
            num_threads=2,
        )

    first = serve(0, 0)
    assert np.array_equal(first, serve(0, 0))
    assert not any(np.array_equal(first[i], serve(0, 1)[i]) for i in range(6))
    assert not any(np.array_equal(first[i], serve(1, 0)[i]) for i in range(6))


def test_the_plain_read_is_the_identity_case_of_the_kernels():
    # The gather (no augmentation, fixed rows) gives what the kernels give for a window
    # of the whole picture at the same size without flip: the stored rows.
    rng = np.random.default_rng(4)
    cache = PictureCache([40] * 5, [40] * 5, (24, 24), shorter_side=None)
    for i in range(5):
        cache.put(i, rng.integers(0, 256, (24, 24, 3), np.uint8))
    slots = np.array([3, 0, 4])
    gathered = step.serve_into(
        cache, slots, windows.Draw(None, 0, 0, slots), np.zeros((3, 24, 24, 3), np.uint8)
    )
    whole = Augment(crop="center", crop_fraction=1.0, flip=False)
    cut = step.serve_into(
        cache, slots, windows.Draw(whole, 0, 0, slots), np.zeros((3, 24, 24, 3), np.uint8)
    )
    assert np.array_equal(gathered, cache.rows()[slots])
    assert np.array_equal(cut, gathered)


def test_serving_an_unwritten_picture_is_an_error_in_both_cases():
    cache = PictureCache([40, 40], [40, 40], (8, 8), shorter_side=None)
    cache.put(0, np.ones((8, 8, 3), np.uint8))
    for augment in (None, Augment()):
        with pytest.raises(ValueError, match="picture 1 of the cache is not written"):
            step.serve_into(
                cache, [0, 1], windows.Draw(augment, 0, 0, [0, 1]), np.zeros((2, 8, 8, 3), np.uint8)
            )


def test_decoding_without_a_cache_gives_the_stored_pixels_and_names_a_bad_example():
    rng = np.random.default_rng(7)
    jpegs = [
        simplejpeg.encode_jpeg(np.ascontiguousarray(smooth_photo(rng, 300, 360)), quality=95)
        for _ in range(3)
    ]
    references = np.array([[0, 0, 300, 360]] * 3)
    indices = np.array([5, 6, 7])
    out = step.decode_into(
        jpegs, references, windows.Draw(None, 1, 2, indices), np.zeros((3, 64, 64, 3), np.uint8)
    )
    cache = PictureCache([300] * 3, [360] * 3, (64, 64), shorter_side=None)
    for i, jpeg in enumerate(jpegs):
        cache.fill(i, jpeg)
    assert np.array_equal(out, cache.rows())
    message = r"^fast_tfds: example 6 does not decode \(.*\)\. Check the files with `fast-tfds"
    with pytest.raises(ValueError, match=message):
        step.decode_into(
            [jpegs[0], b"not a jpeg"],
            references[:2],
            windows.Draw(Augment(), 1, 2, indices[:2]),
            out[:2],
        )


STRONG = Augment(rotate=15, erase=0.5)


def test_a_strong_recipe_serves_and_decodes_the_same_draws():
    # Rotation and erasing, from the store and from the JPEG: the same angles and boxes
    # (erased pixels equal to the bit: the same box, seeded alike), the rest within the
    # classic recipe's bound (mean absolute difference <= 3.5 levels per picture,
    # <= 1.5 on average).
    rng = np.random.default_rng(8)
    shapes = [(300, 400), (450, 330), (360, 360), (520, 600)]
    jpegs = [
        simplejpeg.encode_jpeg(np.ascontiguousarray(smooth_photo(rng, h, w)), quality=95)
        for h, w in shapes
    ]
    cache = filled_cache(jpegs)
    references = np.array([[0, 0, h, w] for h, w in shapes])
    slots, indices = np.arange(4), np.arange(4) + 20
    differences, erased = [], 0
    for epoch in range(4):
        served = step.serve_into(
            cache,
            slots,
            windows.Draw(STRONG, 3, epoch, indices),
            np.zeros((4, 224, 224, 3), np.uint8),
        )
        decoded = step.decode_into(
            jpegs,
            references,
            windows.Draw(STRONG, 3, epoch, indices),
            np.zeros((4, 224, 224, 3), np.uint8),
        )
        boxes = erasing.sample(0.5, 3, epoch, indices, (224, 224))
        keep = np.ones((4, 224, 224), bool)
        for i in range(4):
            top, left, h, w = (
                int(v[i]) for v in (boxes.top, boxes.left, boxes.height, boxes.width)
            )
            box = (slice(top, top + h), slice(left, left + w))
            assert np.array_equal(served[i][box], decoded[i][box])
            keep[i][box] = False
            erased += h > 0
        for i in range(4):
            differences.append(np.abs(served[i].astype(int) - decoded[i])[keep[i]].mean())
    assert erased >= 4  # some boxes were drawn
    assert max(differences) <= 3.5 and np.mean(differences) <= 1.5, differences


def test_a_served_and_a_decoded_rotation_read_back_the_drawn_angle():
    # Coordinate pictures (R = x, G = y): a row of the output follows the rotated x axis.
    picture = np.ascontiguousarray(coordinates(200, 200))
    jpeg = simplejpeg.encode_jpeg(picture, quality=100, colorsubsampling="444")
    cache = PictureCache([200] * 6, [200] * 6, (100, 100), shorter_side=None)
    for i in range(6):
        cache.fill(i, jpeg)
    augment = Augment(crop=None, flip=False, rotate=40)
    indices = np.arange(6)
    out = np.zeros((6, 100, 100, 3), np.uint8)
    served = step.serve_into(cache, indices, windows.Draw(augment, 0, 0, indices), out.copy())
    decoded = step.decode_into(
        [jpeg] * 6, [[0, 0, 200, 200]] * 6, windows.Draw(augment, 0, 0, indices), out
    )
    for batch in (served, decoded):
        for i, angle in enumerate(recipe.angles(40.0, 0, 0, indices)):
            assert abs(angle) <= 40
            row = batch[i, 50, 35:65].astype(float)
            slope = np.polyfit(row[:, 0], row[:, 1], 1)[0]
            assert np.degrees(np.arctan(slope)) == pytest.approx(angle, abs=1.0)
