"""The picture store (`fast_tfds.cache.pictures`): the layout, writes, the allocator, and
fixed rows as the case where every picture is the output size."""

from __future__ import annotations

import numpy as np
import pytest

from fast_tfds.cache import pictures as ragged


def _as_given(heights, widths, buffer=None) -> ragged.PictureCache:
    """Pictures kept at the sizes given: a shorter side none of them reaches."""
    return ragged.PictureCache(heights, widths, (1, 1), 1 << 20, buffer)


def test_the_layout_packs_the_pictures_back_to_back():
    layout = _as_given([2, 3, 1], [4, 1, 5])
    assert layout.offsets.tolist() == [0, 24, 33] and layout.nbytes == 24 + 9 + 15
    assert _as_given([], []).nbytes == 0
    with pytest.raises(ValueError, match="one positive pair per picture"):
        ragged.PictureCache([2, 0], [1, 1], (1, 1), shorter_side=None)


def test_cache_sizes_keep_the_aspect_and_never_enlarge():
    heights, widths = ragged.cache_size([300, 500, 200, 1000], [400, 375, 100, 250], 256)
    assert heights.tolist() == [256, 341, 200, 1000]
    assert widths.tolist() == [341, 256, 100, 250]
    assert ragged.shorter_side(True, None, (224, 224)) == 256
    assert ragged.shorter_side(True, None, (160, 120)) == 183


def test_pictures_are_written_once_and_read_back_without_overlap():
    rng = np.random.default_rng(0)
    sizes = [(int(rng.integers(1, 40)), int(rng.integers(1, 40))) for _ in range(30)]
    store = _as_given(*zip(*sizes, strict=True))
    assert store.nbytes == sum(h * w * 3 for h, w in sizes)
    pictures = [rng.integers(0, 256, (h, w, 3)).astype(np.uint8) for h, w in sizes]
    with pytest.raises(ValueError, match="picture 3 of the cache is not written yet"):
        store.image(3)
    for i in rng.permutation(len(sizes)):
        assert not store.filled
        store.put(int(i), pictures[i])
    assert store.filled
    assert all(np.array_equal(store.image(i), pictures[i]) for i in range(len(sizes)))


def test_the_buffer_is_the_one_given(tmp_path):
    path = tmp_path / "rows"
    on_disk = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(66,))
    store = _as_given([4, 2], [3, 5], on_disk)
    store.put(1, np.full((2, 5, 3), 7, np.uint8))
    store.buffer.flush()
    assert (np.load(path)[36:] == 7).all() and store.nbytes == 66

    with pytest.raises(ValueError, match=r"the buffer is float32\[66\], not uint8\[66\]"):
        _as_given([4, 2], [3, 5], np.zeros(66, np.float32))


def test_pictures_at_the_output_size_are_fixed_rows_of_the_same_buffer():
    store = ragged.PictureCache([300, 200], [400, 100], (8, 6), shorter_side=None)
    assert store.uniform and [store.shape(i) for i in range(2)] == [(8, 6), (8, 6)]
    rows = store.rows()
    assert rows.shape == (2, 8, 6, 3) and np.shares_memory(rows, store.buffer)
    store.put(1, np.full((8, 6, 3), 7, np.uint8))
    assert (rows[1] == 7).all() and (rows[0] == 0).all()
    with pytest.raises(ValueError, match="vary in size"):
        ragged.PictureCache([300], [400], (8, 6), shorter_side=10).rows()
