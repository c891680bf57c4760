"""The caches of a tf.data read (cache=True): the picture store of a plain read (what
it holds once filled, a stopped fill completed, its memory) and the fallback's arena of
examples (copies of transformed examples, refills after a stopped epoch, its memory,
fills whose dataset is gone)."""

from __future__ import annotations

import collections
import gc

import numpy as np
import pytest
import tensorflow as tf

from fast_tfds.cache import memory
from fast_tfds.cache import store as stores
from fast_tfds.read import cached
from tests.pairs import Output
from tests.read.reading import arena_rows, bytes_held, digest, epoch, read


def _new_arena(before: set[int]) -> stores.Store:
    """The arena of examples made since `before`: a table of fixed columns."""
    (made,) = (c for c in stores.live_caches() if id(c) not in before)
    assert isinstance(made, stores.Store) and made.pictures is None
    return made


def _new_store(before: set[int]) -> stores.Store:
    """The picture store made since `before`: a table with a picture column."""
    (made,) = (c for c in stores.live_caches() if id(c) not in before)
    assert isinstance(made, stores.Store) and made.pictures is not None
    return made


def _keys() -> set[int]:
    return {id(c) for c in stores.live_caches()}


def test_the_store_holds_the_split_once_filled(cats_data_dir, cats_builder, stored):
    pairs = collections.Counter(
        (digest(ex["image"].numpy()), int(ex["label"])) for ex in cats_builder.as_dataset("train")
    )
    n = sum(pairs.values())
    before, held = _keys(), bytes_held()
    ds = read(cats_data_dir)
    made = _new_store(before)
    # Reserved up front for the whole split: each picture at the output size, in uint8,
    # its reference size and its label (int64s).
    assert len(made.written) == n and not made.filled
    assert made.pictures.uniform
    assert bytes_held() - held == made.nbytes == n * (224 * 224 * 3 + 3 * 8)

    stored["train"].check(epoch(ds))  # The fill.
    assert made.filled
    rows, labels = made.pictures.rows(), made.features["label"]
    in_store = collections.Counter(
        (digest(image), int(label)) for image, label in zip(rows, labels, strict=True)
    )
    assert in_store == pairs, "every example of the split, once, with its label"

    # A served epoch is gathered from those rows, not decoded again: a row changed
    # in the store arrives changed, with its label.
    label = int(labels[0])
    changed, rows[0] = Output(digest(rows[0]), label), 0
    served = collections.Counter(epoch(ds))
    swapped = collections.Counter({changed: -1, Output(digest(rows[0]), label): 1})
    assert served == stored["train"].expect(changed.fields()) + swapped


def test_only_flat_fixed_size_numbers_fit_an_arena():
    assert cached.supports({"image": tf.TensorSpec([224, 224, 3], tf.uint8)})
    assert not cached.supports({"image": tf.TensorSpec([None, None, 3], tf.uint8)})
    assert not cached.supports({"image/filename": tf.TensorSpec([], tf.string)})
    assert not cached.supports((tf.TensorSpec([2], tf.uint8),))


def test_a_fill_stopped_early_is_completed_by_the_next_epoch(cats_data_dir, stored):
    before = _keys()
    ds = read(cats_data_dir, batch_size=1)  # Many batches: prefetching cannot finish the fill.
    made = _new_store(before)
    iterator = iter(ds)
    epoch(iterator, batches=2)  # A partial first epoch: the store is not complete.
    del iterator
    written = made.pictures.written
    assert 0 < written.sum() < len(written), "the first epoch should have stopped mid-fill"
    stored["train"].check(epoch(ds))  # Fills the rest, serving every example once.
    assert made.filled
    stored["train"].check(epoch(ds))


def test_batches_of_a_stopped_fill_keep_their_pixels(cats_data_dir, stored):
    # The batches a fill hands on are copies cut from the store: the epoch after a
    # stopped one writes the store, never what batches still hold.
    before = _keys()
    ds = read(cats_data_dir, batch_size=1)  # Many batches: prefetching cannot finish the fill.
    made = _new_store(before)
    iterator = iter(ds)
    held = [next(iterator)[0] for _ in range(3)]
    digests = [digest(image) for batch in held for image in batch.numpy()]
    del iterator
    assert not made.filled, "the first epoch should have stopped before filling the store"
    for _ in range(2):  # The rest of the fill, then an epoch from the store.
        stored["train"].check(epoch(ds))
    assert [digest(image) for batch in held for image in batch.numpy()] == digests


def test_an_epoch_of_examples_stopped_early_is_decoded_again(cats_data_dir, stored):
    # The arena of examples (a transform) refills a stopped fill from the start.
    before = _keys()
    ds = read(cats_data_dir, batch_size=1, transform=dict)
    made = _new_arena(before)
    iterator = iter(ds)
    epoch(iterator, batches=2)
    del iterator
    assert not made.filled, "the first epoch should have stopped before filling the arena"
    stored["train"].check(epoch(ds))
    assert made.filled
    stored["train"].check(epoch(ds))


def test_transformed_examples_are_copied_into_the_arena(cats_data_dir, stored):
    # With a transform each example is decoded (and resized to 32x32) on its own,
    # then copied into the arena; JPEGs straight from the records decode into it.
    truth = stored["train"]
    before = _keys()
    ds = read(cats_data_dir, image_size=32, transform=dict)
    made = _new_arena(before)
    assert made.features["image"].shape == (len(truth), 32, 32, 3)
    epochs = [epoch(ds) for _ in range(3)]
    for examples in epochs:
        truth.check(examples, size=32)
    assert epochs[1] != epochs[2]
    truth.check(arena_rows(made), size=32)


@pytest.mark.parametrize("options", [{}, {"transform": dict}], ids=["store", "arena"])
def test_the_cache_is_freed_with_its_dataset(cats_data_dir, options):
    before = _keys()
    ds = read(cats_data_dir, **options)
    (made,) = (c for c in stores.live_caches() if id(c) not in before)
    key, nbytes = id(made), made.nbytes
    del made
    epoch(ds)
    epoch(ds)
    held = bytes_held()
    assert key in _keys() and held >= nbytes
    del ds
    gc.collect()
    # Other tests' caches may go in the same collection (a failed test's, kept by its
    # traceback): this one must, with all its bytes.
    assert key not in _keys()
    assert bytes_held() <= held - nbytes


def test_a_fill_whose_arena_is_gone_still_runs():
    # An iterator may outlive its dataset (and so the arena): its writes are dropped.
    key = stores.register(stores.Store(2, {"label": ((), np.int64)}))  # Gone at once.
    gc.collect()
    assert key not in _keys()
    assert stores.if_alive(key, stores.Store.write, np.arange(2), np.array([0, 1])) == 0


def test_rows_come_from_the_backing_given_which_is_told_once_filled():
    # Where the memory comes from is the backing: rows on disk can take its place.
    made, told = [], []

    class Recorded(memory.InMemory):
        def columns(self, wanted):
            made.append(wanted)
            return {k: np.zeros(shape, dtype) for k, (shape, dtype) in wanted.items()}

        def filled(self, arrays, replace):
            told.append(arrays)

    store = stores.Store(3, {"label": ((), np.int64)}, None, Recorded())
    assert made == [{"feature/label": ((3,), np.dtype(np.int64))}]
    assert store.begin(True) == stores.FILL
    store.write(np.arange(3), np.array([7, 8, 9]))
    assert store.filled and store.begin(True) == stores.SERVE
    np.testing.assert_array_equal(store.features["label"], [7, 8, 9])
    assert len(told) == 1 and told[0] is store.arrays


@pytest.mark.skipif(memory.MADVISE is None, reason="Linux only (MADV_POPULATE_WRITE)")
def test_a_block_is_backed_by_memory_before_it_is_written():
    import resource

    store = stores.Store(16, {"image": ((224, 224, 3), np.uint8)})
    rows = store.features["image"]

    def faults_writing(block):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        block[...] = 7
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before

    memory.prefault(rows[:8])
    prefaulted = faults_writing(rows[:8])
    untouched = faults_writing(rows[8:])
    if untouched < 8 * 30:
        pytest.skip(f"this kernel backs new memory in large pages ({untouched} faults)")
    # 8 images are 294 pages: writing them after the call faults none of them, the
    # first write of the next 8 faults each page (a page each side may be shared).
    assert prefaulted <= 2 and untouched >= 8 * 36
