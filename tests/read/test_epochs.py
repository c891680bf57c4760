"""Epochs of as_fast_dataset in every mode: each example exactly once, a new order
each epoch, the same order with a seed, and a cardinality that matches what is yielded.

Examples are told apart by a digest of their decoded pixels, so the arena
cache (which holds only pixels and labels) is checked like the other modes.
"""

from __future__ import annotations

import collections
import hashlib
import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
from fast_tfds.read import memory_cache

BATCH = 8


@pytest.fixture(scope="module")
def stored(cats_data_dir):
    """{split or slice: Counter of pixel digests} through TFDS's own reader."""

    def digests(split):
        ds = tfds.builder("cats_vs_dogs_fast", config="224", data_dir=cats_data_dir).as_dataset(
            split=split
        )
        return collections.Counter(_digest(ex["image"].numpy()) for ex in ds)

    return {split: digests(split) for split in ("train", "train[:50%]")}


def _digest(image: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest()


def read(data_dir, split="train", **options):
    options = {"batch_size": BATCH, "dtype": tf.uint8, **options}
    return cats_vs_dogs_fast.as_fast_dataset(
        split, data_dir=data_dir, download_and_prepare=False, **options
    )


def epoch(iterator_or_ds, batches: int | None = None) -> list[str]:
    """Pixel digests in the order yielded; `batches` from an open iterator, else all."""
    images = []
    source = iterator_or_ds if batches is None else (next(iterator_or_ds) for _ in range(batches))
    for image, _ in source:
        image = image.numpy()
        images.extend([image] if image.ndim == 3 else list(image))
    return [_digest(i) for i in images]


def batches_of(ds) -> int:
    return sum(1 for _ in ds)


MODES = {
    "memory arena": {},
    "no cache": {"cache": False},
    "unbatched arena": {"batch_size": None},
    "unbatched, no cache": {"batch_size": None, "cache": False},
    "seeded arena": {"seed": 3},
}


@pytest.mark.parametrize("mode", MODES)
def test_each_epoch_has_every_example_once_in_a_new_order(mode, cats_data_dir, stored):
    ds = read(cats_data_dir, **MODES[mode])
    epochs = [epoch(ds) for _ in range(3)]
    for digests in epochs:
        assert collections.Counter(digests) == stored["train"]
    assert epochs[1] != epochs[2], "served epochs should be reshuffled"
    assert epochs[0] != epochs[1]
    assert int(ds.cardinality()) == batches_of(ds)


def test_the_arena_holds_the_split_once_filled(cats_data_dir, cats_builder, stored):
    from fast_tfds.read import reader, records

    instructions = records.file_instructions(cats_builder, "train")
    examples = reader.read_split(cats_builder, "train", cache=False, batch_size=None)
    assert memory_cache.supports({"image": tf.TensorSpec([224, 224, 3], tf.uint8)})
    assert not memory_cache.supports({"image": tf.TensorSpec([None, None, 3], tf.uint8)})
    assert not memory_cache.supports({"image/filename": tf.TensorSpec([], tf.string)})
    n = records.num_examples(instructions)
    assert n == sum(stored["train"].values()) == batches_of(examples)


def test_a_seed_repeats_the_order_of_every_epoch(cats_data_dir):
    first, second = read(cats_data_dir, seed=11), read(cats_data_dir, seed=11)
    assert [epoch(first) for _ in range(3)] == [epoch(second) for _ in range(3)]
    other = read(cats_data_dir, seed=12)
    assert epoch(other) != epoch(read(cats_data_dir, seed=11))


def test_an_epoch_stopped_early_is_decoded_again(cats_data_dir, stored):
    before = set(memory_cache._live_arenas)
    ds = read(cats_data_dir, batch_size=1)  # Many batches: prefetching cannot finish the fill.
    (arena,) = (memory_cache._live_arenas[k] for k in set(memory_cache._live_arenas) - before)
    iterator = iter(ds)
    epoch(iterator, batches=2)  # A partial first epoch: the arena is not complete.
    del iterator
    assert not arena._filled, "the first epoch should have stopped before filling the arena"
    assert collections.Counter(epoch(ds)) == stored["train"]
    assert collections.Counter(epoch(ds)) == stored["train"]


def test_batches_of_a_stopped_fill_keep_their_pixels(cats_data_dir, stored):
    # uint8 batches of a fill are the arena's rows, not copies. The refill after
    # a stopped epoch must not write into rows that batches still hold.
    before = set(memory_cache._live_arenas)
    ds = read(cats_data_dir, batch_size=1)  # Many batches: prefetching cannot finish the fill.
    (arena,) = (memory_cache._live_arenas[k] for k in set(memory_cache._live_arenas) - before)
    iterator = iter(ds)
    held = [next(iterator)[0] for _ in range(3)]
    digests = [_digest(image) for batch in held for image in batch.numpy()]
    del iterator
    assert not arena._filled, "the first epoch should have stopped before filling the arena"
    for _ in range(2):  # The refill, then an epoch from the arena.
        assert collections.Counter(epoch(ds)) == stored["train"]
    assert [_digest(image) for batch in held for image in batch.numpy()] == digests


def test_resized_examples_are_copied_into_the_arena(cats_data_dir):
    # Stored 224 JPEGs read at 32x32 are decoded and resized by TensorFlow, then
    # copied into the arena (only same-size JPEGs are decoded into it).
    expected = collections.Counter(epoch(read(cats_data_dir, image_size=32, cache=False)))
    ds = read(cats_data_dir, image_size=32)
    epochs = [epoch(ds) for _ in range(3)]
    assert all(collections.Counter(digests) == expected for digests in epochs)
    assert epochs[1] != epochs[2]
    assert memory_cache.bytes_held() >= len(epochs[0]) * 32 * 32 * 3


def test_file_cache_epochs(cats_data_dir, stored, tmp_path):
    ds = read(cats_data_dir, cache=tmp_path / "cache")
    for _ in range(2):
        assert collections.Counter(epoch(ds)) == stored["train"]
    assert int(ds.cardinality()) == batches_of(ds)


def test_slices(cats_data_dir, stored):
    ds = read(cats_data_dir, split="train[:50%]")
    for _ in range(2):
        assert collections.Counter(epoch(ds)) == stored["train[:50%]"]
    assert int(ds.cardinality()) == batches_of(ds)


def test_input_pipelines_are_disjoint_and_complete(cats_data_dir, stored):
    together = collections.Counter()
    for pipeline in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline, num_replicas_in_sync=2
        )
        ds = read(cats_data_dir, input_context=context, batch_size=2 * BATCH)
        first, second = epoch(ds), epoch(ds)
        assert collections.Counter(first) == collections.Counter(second)
        together.update(first)
        assert int(ds.cardinality()) == batches_of(ds)
    # Counts, not sets: the sample holds one photo in several formats that decode
    # alike. An example read by both pipelines would be counted twice.
    assert together == stored["train"]


def test_repeat_n_gives_n_complete_epochs(cats_data_dir, stored):
    n = sum(stored["train"].values())
    ds = read(cats_data_dir, repeat=3)
    digests = epoch(ds)
    assert len(digests) == 3 * n
    for i in range(3):
        assert collections.Counter(digests[i * n : (i + 1) * n]) == stored["train"]
    assert int(ds.cardinality()) == batches_of(ds) == 3 * -(-n // BATCH)
    assert int(read(cats_data_dir, repeat=True).cardinality()) == tf.data.INFINITE_CARDINALITY


@pytest.mark.parametrize("cache", [True, False])
def test_drop_remainder_drops_only_the_last_partial_batch(cache, cats_data_dir, stored):
    n = sum(stored["train"].values())
    ds = read(cats_data_dir, cache=cache, drop_remainder=True)
    for _ in range(2):
        digests = epoch(ds)
        assert len(digests) == n // BATCH * BATCH
        assert not collections.Counter(digests) - stored["train"], "only stored examples, once"
    assert int(ds.cardinality()) == batches_of(ds) == n // BATCH
    assert ds.element_spec[0].shape[0] == BATCH


def test_keras_fit_without_repeat_knows_its_steps(cats_data_dir):
    ds = read(cats_data_dir, image_size=32, dtype=tf.float32)
    model = tf.keras.Sequential(
        [tf.keras.Input((32, 32, 3)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(2)]
    )
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(ds, epochs=2, verbose=0)
    ran_out = [str(w.message) for w in caught if "ran out of data" in str(w.message)]
    assert not ran_out
    assert len(history.history["loss"]) == 2


def test_the_arena_is_freed_with_its_dataset(cats_data_dir):
    import gc

    before = memory_cache.bytes_held()
    ds = read(cats_data_dir)
    epoch(ds)
    epoch(ds)
    assert memory_cache.bytes_held() > before
    del ds
    gc.collect()
    assert memory_cache.bytes_held() == before


@pytest.mark.skipif(memory_cache._MADVISE is None, reason="Linux only (MADV_POPULATE_WRITE)")
def test_a_block_is_backed_by_memory_before_it_is_written():
    import resource

    spec = {"image": tf.TensorSpec([224, 224, 3], tf.uint8)}
    arena = memory_cache.Arena(16, spec)
    rows = arena.arrays["image"]

    def faults_writing(block):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        block[...] = 7
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before

    memory_cache._prefault(rows[:8])
    prefaulted = faults_writing(rows[:8])
    untouched = faults_writing(rows[8:])
    if untouched < 8 * 30:
        pytest.skip(f"this kernel backs new memory in large pages ({untouched} faults)")
    # 8 images are 294 pages: writing them after the call faults none of them, the
    # first write of the next 8 faults each page (a page each side may be shared).
    assert prefaulted <= 2 and untouched >= 8 * 36
