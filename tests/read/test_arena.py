"""The arena (cache=True): what it holds once filled, refills after a stopped epoch,
copies of resized examples, its memory, and fills whose dataset is gone."""

from __future__ import annotations

import collections
import gc
import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from fast_tfds.cache import arena
from fast_tfds.read import cached
from fast_tfds.read.decoding import BlockImages
from tests.pairs import Output
from tests.read.reading import arena_rows, digest, epoch, read


def _new_arena(before: set[int]) -> arena.Arena:
    (made,) = (a for a in arena.live_arenas() if a.key not in before)
    return made


def _keys() -> set[int]:
    return {a.key for a in arena.live_arenas()}


def test_the_arena_holds_the_split_once_filled(cats_data_dir, cats_builder, stored):
    pairs = collections.Counter(
        (digest(ex["image"].numpy()), int(ex["label"])) for ex in cats_builder.as_dataset("train")
    )
    n = sum(pairs.values())
    before, held = _keys(), arena.bytes_held()
    ds = read(cats_data_dir)
    made = _new_arena(before)
    # Reserved up front for the whole split: the images' uint8 bytes and the labels.
    assert made.num_examples == n and not made.filled
    assert arena.bytes_held() - held == made.nbytes == n * (224 * 224 * 3 + 8)

    stored["train"].check(epoch(ds))  # The fill.
    assert made.filled
    rows = made.arrays["image"]
    in_arena = collections.Counter(
        (digest(image), int(label)) for image, label in zip(rows, made.arrays["label"], strict=True)
    )
    assert in_arena == pairs, "every example of the split, once, with its label"

    # A served epoch is gathered from those rows, not decoded again: a row changed
    # in the arena arrives changed, with its label.
    label = int(made.arrays["label"][0])
    changed, rows[0] = Output(digest(rows[0]), label), 0
    served = collections.Counter(epoch(ds))
    swapped = collections.Counter({changed: -1, Output(digest(rows[0]), label): 1})
    assert served == stored["train"].expect(changed.fields()) + swapped


def test_only_flat_fixed_size_numbers_fit_an_arena():
    assert cached.supports({"image": tf.TensorSpec([224, 224, 3], tf.uint8)})
    assert not cached.supports({"image": tf.TensorSpec([None, None, 3], tf.uint8)})
    assert not cached.supports({"image/filename": tf.TensorSpec([], tf.string)})
    assert not cached.supports((tf.TensorSpec([2], tf.uint8),))


def test_an_epoch_stopped_early_is_decoded_again(cats_data_dir, stored):
    before = _keys()
    ds = read(cats_data_dir, batch_size=1)  # Many batches: prefetching cannot finish the fill.
    made = _new_arena(before)
    iterator = iter(ds)
    epoch(iterator, batches=2)  # A partial first epoch: the arena is not complete.
    del iterator
    assert not made.filled, "the first epoch should have stopped before filling the arena"
    stored["train"].check(epoch(ds))
    assert made.filled
    stored["train"].check(epoch(ds))


def test_batches_of_a_stopped_fill_keep_their_pixels(cats_data_dir, stored):
    # uint8 batches of a fill are the arena's rows, not copies. The refill after
    # a stopped epoch must not write into rows that batches still hold.
    before = _keys()
    ds = read(cats_data_dir, batch_size=1)  # Many batches: prefetching cannot finish the fill.
    made = _new_arena(before)
    iterator = iter(ds)
    held = [next(iterator)[0] for _ in range(3)]
    digests = [digest(image) for batch in held for image in batch.numpy()]
    del iterator
    assert not made.filled, "the first epoch should have stopped before filling the arena"
    for _ in range(2):  # The refill, then an epoch from the arena.
        stored["train"].check(epoch(ds))
    assert [digest(image) for batch in held for image in batch.numpy()] == digests


def test_transformed_examples_are_copied_into_the_arena(cats_data_dir, stored):
    # With a transform each example is decoded (and resized to 32x32) on its own,
    # then copied into the arena; JPEGs straight from the records decode into it.
    truth = stored["train"]
    before = _keys()
    ds = read(cats_data_dir, image_size=32, transform=dict)
    made = _new_arena(before)
    assert made.arrays["image"].shape == (len(truth), 32, 32, 3)
    epochs = [epoch(ds) for _ in range(3)]
    for examples in epochs:
        truth.check(examples, size=32)
    assert epochs[1] != epochs[2]
    truth.check(arena_rows(made), size=32)


def test_the_arena_is_freed_with_its_dataset(cats_data_dir):
    before = _keys()
    ds = read(cats_data_dir)
    made = _new_arena(before)
    key, nbytes = made.key, made.nbytes
    del made
    epoch(ds)
    epoch(ds)
    held = arena.bytes_held()
    assert key in _keys() and held >= nbytes
    del ds
    gc.collect()
    # Other tests' arenas may go in the same collection (a failed test's, kept by its
    # traceback): this one must, with all its bytes.
    assert key not in _keys()
    assert arena.bytes_held() <= held - nbytes


def _jpeg(height: int, width: int) -> bytes:
    pixels = np.random.default_rng(0).integers(0, 256, (height, width, 3), np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


def test_a_fill_whose_arena_is_gone_still_decodes():
    columns = {
        "image": arena.Column((48, 64, 3), np.dtype(np.uint8), BlockImages((48, 64, 3), False)),
        "label": arena.Column((), np.dtype(np.int64)),
    }
    key = arena.Arena(2, columns).key  # Gone at once: nothing holds it.
    gc.collect()
    assert key not in _keys()
    jpegs = np.array([_jpeg(48, 64)] * 2, dtype=object)
    decoders = {"image": columns["image"].encoded, "label": None}
    _, images = arena.write(key, decoders, 1, 0, jpegs, np.array([0, 1]))
    expected = np.stack([tf.io.decode_jpeg(j, channels=3).numpy() for j in jpegs])
    np.testing.assert_array_equal(images, expected)


def test_rows_come_from_the_allocation_given():
    # Where the memory comes from is one function: rows on disk can take its place.
    made = []

    def allocate(shape, dtype):
        made.append((shape, np.dtype(dtype)))
        return np.zeros(shape, dtype)

    columns = {"label": arena.Column((), np.dtype(np.int64))}
    store = arena.Arena(3, columns, allocate=allocate)
    assert made == [((3,), np.dtype(np.int64))]
    assert store.begin()[0] == arena.FILL
    store.write(1, 0, np.array([7, 8, 9]))
    assert store.filled and store.begin()[0] == arena.SERVE
    np.testing.assert_array_equal(store.arrays["label"], [7, 8, 9])


@pytest.mark.skipif(arena.MADVISE is None, reason="Linux only (MADV_POPULATE_WRITE)")
def test_a_block_is_backed_by_memory_before_it_is_written():
    import resource

    store = arena.Arena(16, {"image": arena.Column((224, 224, 3), np.dtype(np.uint8))})
    rows = store.arrays["image"]

    def faults_writing(block):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        block[...] = 7
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before

    arena.prefault(rows[:8])
    prefaulted = faults_writing(rows[:8])
    untouched = faults_writing(rows[8:])
    if untouched < 8 * 30:
        pytest.skip(f"this kernel backs new memory in large pages ({untouched} faults)")
    # 8 images are 294 pages: writing them after the call faults none of them, the
    # first write of the next 8 faults each page (a page each side may be shared).
    assert prefaulted <= 2 and untouched >= 8 * 36
