"""The ragged store (layout, writes, the allocator) and batches served from it: the
same windows as from the JPEG, within a stated bound of the crop of the full decode."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import simplejpeg

from fast_tfds.augment import Augment, cached, ragged
from tests.augment.test_kernels import coordinates, smooth_photo


def test_the_layout_packs_the_pictures_back_to_back():
    layout = ragged.RaggedLayout.of_sizes([2, 3, 1], [4, 1, 5])
    assert layout.offsets.tolist() == [0, 24, 33] and layout.nbytes == 24 + 9 + 15
    assert ragged.RaggedLayout.of_sizes([], []).nbytes == 0
    with pytest.raises(ValueError, match="one positive pair per picture"):
        ragged.RaggedLayout.of_sizes([2, 0], [1, 1])


def test_cache_sizes_keep_the_aspect_and_never_enlarge():
    heights, widths = ragged.cache_size([300, 500, 200, 1000], [400, 375, 100, 250], 256)
    assert heights.tolist() == [256, 341, 200, 1000]
    assert widths.tolist() == [341, 256, 100, 250]
    assert ragged.default_shorter_side((224, 224)) == 256
    assert ragged.default_shorter_side((160, 120)) == 183


def test_pictures_are_written_once_and_read_back_without_overlap():
    rng = np.random.default_rng(0)
    sizes = [(int(rng.integers(1, 40)), int(rng.integers(1, 40))) for _ in range(30)]
    store = ragged.RaggedImages(ragged.RaggedLayout.of_sizes(*zip(*sizes, strict=True)))
    assert store.nbytes == sum(h * w * 3 for h, w in sizes)
    pictures = [rng.integers(0, 256, (h, w, 3)).astype(np.uint8) for h, w in sizes]
    with pytest.raises(ValueError, match="picture 3 of the cache is not written yet"):
        store.image(3)
    for i in rng.permutation(len(sizes)):
        assert not store.filled
        store.put(int(i), pictures[i])
    assert store.filled
    assert all(np.array_equal(store.image(i), pictures[i]) for i in range(len(sizes)))


def test_the_buffer_comes_from_the_allocator(tmp_path):
    path = tmp_path / "rows"

    def on_disk(shape, dtype):
        return np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)

    store = ragged.RaggedImages(ragged.RaggedLayout.of_sizes([4, 2], [3, 5]), on_disk)
    store.put(1, np.full((2, 5, 3), 7, np.uint8))
    store.buffer.flush()
    assert (np.load(path)[36:] == 7).all() and store.nbytes == 66

    with pytest.raises(ValueError, match=r"allocate gave float32\[66\], not uint8\[66\]"):
        ragged.RaggedImages(
            ragged.RaggedLayout.of_sizes([4, 2], [3, 5]), lambda s, d: np.zeros(s, np.float32)
        )


def filled_cache(jpegs, shorter_side=256):
    heights, widths = zip(*(simplejpeg.decode_jpeg_header(j)[:2] for j in jpegs), strict=True)
    cache = cached.PictureCache(heights, widths, (224, 224), shorter_side)
    for i, jpeg in enumerate(jpegs):
        cache.fill(i, jpeg)
    assert cache.images.filled
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
    assert [cache.images.shape(i) for i in range(4)] == [
        (256, 341),
        (349, 256),
        (256, 256),
        (256, 305),
    ]
    differences = []
    for epoch in range(6):
        slots = np.arange(4)
        indices = slots + 10
        out = cache.serve_into(
            slots, Augment(), 3, epoch, indices, np.zeros((4, 224, 224, 3), np.uint8)
        )
        drawn = cache.windows(slots, Augment(), 3, epoch, indices)
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
    cache = cached.PictureCache([200] * 8, [240] * 8, (32, 32), shorter_side=None)
    for i in range(8):  # shorter_side None: each picture at the output size
        assert cache.images.shape(i) == (32, 32)
        cache.images.put(i, cv2.resize(picture, (32, 32), interpolation=cv2.INTER_AREA))
    out = cache.serve_into(
        np.arange(8), None, 0, 0, np.arange(8), np.zeros((8, 32, 32, 3), np.uint8)
    )
    assert all(np.array_equal(out[i], cache.images.image(i)) for i in range(8))


def test_the_same_seed_serves_the_same_batch_and_another_epoch_another():
    rng = np.random.default_rng(2)
    jpegs = [
        simplejpeg.encode_jpeg(np.ascontiguousarray(smooth_photo(rng, 300, 350))) for _ in range(6)
    ]
    cache = filled_cache(jpegs)

    def serve(seed, epoch):
        out = np.zeros((6, 224, 224, 3), np.uint8)
        return cache.serve_into(
            np.arange(6), Augment(brightness=0.3), seed, epoch, np.arange(6), out, num_threads=2
        )

    first = serve(0, 0)
    assert np.array_equal(first, serve(0, 0))
    assert not any(np.array_equal(first[i], serve(0, 1)[i]) for i in range(6))
    assert not any(np.array_equal(first[i], serve(1, 0)[i]) for i in range(6))
