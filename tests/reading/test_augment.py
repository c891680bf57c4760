"""`augment=` in both back ends: every example once per epoch, each with the window, flip
and jitter drawn from (seed, epoch, example index), or the stronger recipes' own draws,
with and without the cache and in each host's share; epochs new, seeds repeatable;
one-line errors. What only one back end has stays with it: tests/read/test_augment.py
(tf.data's plans, caches on disk and at other resolutions, progressive sizes, Stanford
Dogs' boxes, the same pixels as the loader) and tests/loader/test_augment.py (saved
states, fills, persisted shards, Stanford Dogs' boxes).

Expected pixels are computed apart from the readers (tests/reading/augmented.py) from
TensorFlow's decode of each stored JPEG; examples are joined on their index in the split
(`with_index=True`), the same in both builds.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from fast_tfds import Augment
from tests.reading.augmented import (
    JITTER,
    STRONG,
    expected_images,
    expected_strong,
    grain_order,
)

BATCH = 8
SEED = 3


def read(backend, **options):
    return backend.open(**{"batch_size": BATCH, "seed": SEED, "with_index": True, **options})


def one_epoch(backend, reader, batches: int | None = None):
    """(images, labels, indices) of the next iteration of `reader` (of `batches` batches
    where given), padding (index -1 of a host's last batch) left out."""
    (batches_read,) = backend.epochs(reader, 1)
    assert batches is None or len(batches_read) == batches
    batches = batches_read
    images, labels, indices = (np.concatenate(part) for part in zip(*batches, strict=True))
    real = indices >= 0
    return images[real], labels[real], indices[real]


def in_index_order(backend, reader) -> np.ndarray:
    """The images of the next iteration of `reader`, example 0 first."""
    images, _, indices = one_epoch(backend, reader)
    return images[np.argsort(indices)]


CACHES = {"no cache": {"cache": False}, "memory": {"cache": True}, "disk": "disk"}
# tf.data's cache is also tested over its budget, on disk.
KINDS = {"tf.data": ("no cache", "memory", "disk"), "loader": ("no cache", "memory")}


def cache_options(kind, tmp_path) -> dict:
    if CACHES[kind] == "disk":
        return {"cache": True, "cache_budget": 1, "cache_dir": tmp_path}
    return CACHES[kind]


@pytest.mark.parametrize(
    "augment", [Augment(), JITTER, Augment.eval()], ids=["rrc", "jitter", "center"]
)
@pytest.mark.parametrize(
    "backend, kind",
    [(name, kind) for name, kinds in KINDS.items() for kind in kinds],
    indirect=["backend"],
)
def test_every_example_once_per_epoch_with_its_own_window(
    backend, kind, augment, cats_split, tmp_path
):
    reader = read(backend, augment=augment, **cache_options(kind, tmp_path))
    pictures = [ex.pixels for ex in cats_split]
    n = len(cats_split)
    if backend.name == "loader":
        assert len(reader) == -(-n // BATCH)
    for epoch in range(3):
        images, labels, indices = one_epoch(backend, reader, -(-n // BATCH))
        assert images.dtype == np.uint8 and labels.dtype == np.int64
        assert sorted(indices.tolist()) == list(range(n))  # every example once
        assert labels.tolist() == [cats_split[i].label for i in indices]
        # 224 stored and read at 224: the cache holds the stored pixels, and both paths
        # cut the same window with the same filter as the kernel: equal pixels.
        cache = kind != "no cache"
        want = expected_images(augment, SEED, epoch, indices, pictures, cache=cache)
        np.testing.assert_array_equal(images, want)
        if backend.name == "loader":  # in the order of Grain's shuffle
            assert indices.tolist() == grain_order(n, SEED, epoch)
    if kind == "disk":
        assert list(tmp_path.iterdir()), "the cache's rows went to disk"
    if backend.name == "loader" and kind == "memory":
        assert reader.cache.pictures.filled
        assert reader.cache_bytes == n * 224 * 224 * 3


@pytest.mark.parametrize("cache", [False, True])
def test_each_hosts_share_keeps_the_splits_example_numbers(backend, cats_split, cache):
    pictures = [ex.pixels for ex in cats_split]
    n = len(cats_split)
    seen: set[int] = set()
    for host in range(2):
        if backend.name == "tf.data":  # each input pipeline: whole files
            context = tf.distribute.InputContext(
                num_input_pipelines=2, input_pipeline_id=host, num_replicas_in_sync=1
            )
            share = {"input_context": context}
        else:  # every other example
            share = {"shard_index": host, "shard_count": 2}
        reader = read(backend, augment=Augment(), cache=cache, **share)
        for epoch in range(2):
            images, labels, indices = one_epoch(backend, reader)
            assert labels.tolist() == [cats_split[i].label for i in indices]
            want = expected_images(Augment(), SEED, epoch, indices, pictures)
            np.testing.assert_array_equal(images, want)
            if epoch == 0:
                assert not seen & set(indices.tolist())  # the shares are disjoint
                seen |= set(indices.tolist())
            if backend.name == "loader":
                assert all(i % 2 == host for i in indices)
                assert indices.tolist() == grain_order(n, SEED, epoch, (host, 2))
    assert seen == set(range(n))


@pytest.mark.parametrize("cache", [False, True])
def test_strong_recipes_every_example_once_per_epoch_with_its_own_draws(backend, cats_split, cache):
    # 224 stored and read at 224: the cache holds the stored pixels and the decoder
    # decodes them whole (no DCT scale covers a crop at 224), so both paths run the
    # warp kernel on TensorFlow's pixels with each example's own draws: equal pixels,
    # whatever the reader's order (and so the same for the same seed in any run).
    pictures = [ex.pixels for ex in cats_split]
    n = len(cats_split)
    reader = read(backend, augment=STRONG, cache=cache)
    epochs = []
    for epoch in range(2):
        images, labels, indices = one_epoch(backend, reader, -(-n // BATCH))
        assert sorted(indices.tolist()) == list(range(n))  # every example once
        assert labels.tolist() == [cats_split[i].label for i in indices]
        want = expected_strong(STRONG, SEED, epoch, indices, pictures)
        np.testing.assert_array_equal(images, want, err_msg=f"epoch {epoch}")
        if backend.name == "loader":
            assert indices.tolist() == grain_order(n, SEED, epoch)
        epochs.append(images[np.argsort(indices)])
    other = in_index_order(backend, read(backend, augment=STRONG, cache=cache, seed=SEED + 1))
    for different in (epochs[1], other):
        assert sum(np.array_equal(a, b) for a, b in zip(epochs[0], different, strict=True)) <= 1


@pytest.mark.parametrize("cache", [False, True])
def test_the_same_seed_repeats_epochs_differ_and_another_seed_differs(backend, cache):
    options = {"augment": Augment(), "cache": cache}
    first_reader, again_reader = read(backend, **options), read(backend, **options)
    first, second = (in_index_order(backend, first_reader) for _ in range(2))
    again, again_second = (in_index_order(backend, again_reader) for _ in range(2))
    other = in_index_order(backend, read(backend, **options, seed=SEED + 1))
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(second, again_second)
    for different in (second, other):
        same = sum(np.array_equal(a, b) for a, b in zip(first, different, strict=True))
        assert same <= 1, same


@pytest.mark.parametrize(
    "options, message",
    [
        ({"augment": "flip"}, r"^augment='flip': must be a fast_tfds\.Augment"),
        ({"cache_shorter_side": 0}, r"^cache_shorter_side=0: must be a positive integer"),
        (
            {"persist": True, "cache": False},
            r"^persist=True: keeps the in-memory cache \(cache=True\)",
        ),
    ],
)
def test_bad_options_are_one_line(backend, options, message):
    with pytest.raises(ValueError, match=message) as err:
        read(backend, **options)
    assert "\n" not in str(err.value)
