"""One vocabulary for both front doors: where `as_fast_dataset` (`ReadOptions`) and
`as_fast_loader` (`LoaderOptions`) share a concept, the same name, default and
validation; the deliberate differences are exactly the listed ones. Also what the
shared concepts promise across the two: seeds (every one tf.data takes, today's orders
and crops kept, the same crops in both), `cache="auto"` and `cache_budget` in the
loader, and `repeat=` as a warning alias of `num_epochs=`."""

from __future__ import annotations

import dataclasses
import hashlib
import logging

import numpy as np
import pytest
import tensorflow as tf

import cats_vs_dogs_fast
from fast_tfds.augment.spec import Augment
from fast_tfds.cache import persisted
from fast_tfds.loader.options import LoaderOptions
from fast_tfds.read.options import ReadOptions
from tests.helpers import written_out
from tests.reading import backends

# The concepts both back ends have: one name each, in both classes.
SHARED = (
    "batch_size",
    "image_size",
    "cache",
    "cache_budget",
    "cache_dir",
    "persist",
    "shuffle",
    "seed",
    "num_epochs",
    "drop_remainder",
    "shard_index",
    "shard_count",
    "augment",
    "cache_shorter_side",
    "with_index",
    "mix",
)
# tf.data's own: output type and structure, its transform hook, the tf.data service,
# tf.data's ordering switch and shuffle buffer (the loader permutes the whole shard).
# cache=PATH (a file cache) is a value of the shared `cache`, tf.data's only.
READER_ONLY = {
    "dtype",
    "as_supervised",
    "transform",
    "transform_keys",
    "service",
    "service_sharding",
    "deterministic",
    "shuffle_buffer",
}
# The loader's own: its decoding processes and threads.
LOADER_ONLY = {"num_workers", "worker_buffer_size", "num_threads"}
# tf.data's other names of shared concepts: `repeat` (num_epochs, warns) and
# `input_context` (gives shard_index/shard_count, and the global batch).
READER_ALIASES = {"repeat", "input_context"}

# Values each concept refuses, with one message in both back ends.
BAD = {
    "batch_size": [0, -1, 1.5, True],
    "image_size": [0, (224,), (2, 2.0)],
    "cache_budget": [0, -1, 1.5],
    "cache_dir": ["", "gs://bucket/folder", 3],
    "persist": ["yes", 1],
    "shuffle": ["yes", 1, None],
    "seed": [1.5, "1", 2**64, -(2**63) - 1],
    "num_epochs": [0, -1, 1.5, True],
    "drop_remainder": ["yes", 1, None],
    "shard_index": [-1, 1.5],
    "shard_count": [0, 1.5],
    "augment": ["flip"],
    "cache_shorter_side": [0, -3],
    "with_index": ["yes", 1],
    "mix": ["mixup"],
}
# Values each concept takes in both.
GOOD = {
    "batch_size": [1, 64],
    "image_size": [None, 64, (32, 48)],
    "cache": [True, False],
    "cache_budget": [None, 1, 2**40],
    "cache_dir": [None, "/tmp/somewhere"],
    "shuffle": [True, False],
    "seed": [None, 0, -1, 2**32, -(2**63), 2**64 - 1],
    "num_epochs": [None, 1, 5],
    "drop_remainder": [True, False],
    "augment": [None, Augment()],
    "cache_shorter_side": [None, 256],
    "with_index": [True, False],
}


def fields(cls) -> dict[str, dataclasses.Field]:
    return {field.name: field for field in dataclasses.fields(cls)}


def default(field: dataclasses.Field):
    return field.default_factory() if callable(field.default_factory) else field.default


def refusal(cls, **options) -> str:
    with pytest.raises(ValueError) as excinfo:
        cls(**options)
    message = str(excinfo.value)
    assert "\n" not in message
    return message


def test_the_two_options_classes_differ_exactly_by_the_deliberate_differences():
    reader, loader = fields(ReadOptions), fields(LoaderOptions)
    assert set(reader) - set(loader) == READER_ONLY | READER_ALIASES
    assert set(loader) - set(reader) == LOADER_ONLY
    assert set(reader) & set(loader) == set(SHARED)


@pytest.mark.parametrize("name", SHARED)
def test_a_shared_concept_has_one_default(name):
    reader, loader = default(fields(ReadOptions)[name]), default(fields(LoaderOptions)[name])
    if name == "cache":
        # On by default in both: tf.data's True; the loader's "auto" is True in this
        # process, and with worker processes serves a persisted file if there is one.
        assert (reader, loader) == (True, "auto")
        assert LoaderOptions().caches and LoaderOptions(num_workers=2).cache is not True
    else:
        assert reader == loader


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_shared_concept_refuses_the_same_values_with_the_same_line(name):
    for value in BAD[name]:
        options = {name: value}
        if name == "persist":
            options["cache"] = True
        message = refusal(ReadOptions, **options)
        assert message.startswith(f"{name}={value!r}:"), message
        if name == "batch_size":  # tf.data also gives unbatched examples (None)
            message = message.removesuffix(" or None")
        assert refusal(LoaderOptions, **options) == message


def test_shares_and_caches_that_do_not_fit_are_refused_alike():
    for options in [
        {"shard_index": 2, "shard_count": 2},
        {"shard_index": 5, "shard_count": 3},
        {"persist": True, "cache": False},
    ]:
        message = refusal(ReadOptions, **options)
        assert refusal(LoaderOptions, **options) == message
    # `cache` refuses the same values; tf.data's line adds its file paths, the
    # loader's "auto".
    for value in [1, None, ""]:
        reader, loader = refusal(ReadOptions, cache=value), refusal(LoaderOptions, cache=value)
        assert reader.startswith(f"cache={value!r}: must be True, False")
        assert loader == f"cache={value!r}: must be True, False or 'auto'"


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_shared_concept_takes_the_same_values(name):
    for value in GOOD[name]:
        assert getattr(ReadOptions(**{name: value}), name) == value
        assert getattr(LoaderOptions(**{name: value}), name) == value
    for index, count in [(0, 1), (1, 2), (6, 7)]:
        for cls in (ReadOptions, LoaderOptions):
            opts = cls(shard_index=index, shard_count=count)
            assert (opts.shard_index, opts.shard_count) == (index, count)


def test_repeat_is_num_epochs_with_a_warning_at_the_callers_line():
    for repeat, num_epochs in [(False, 1), (True, None), (3, 3)]:
        with pytest.warns(FutureWarning, match=r"^repeat= is renamed num_epochs=") as caught:
            opts = ReadOptions(repeat=repeat)
        assert caught[0].filename == __file__
        assert opts.num_epochs == num_epochs and opts.epochs == num_epochs
        assert opts.replace(batch_size=8).num_epochs == num_epochs  # no second warning
    with pytest.raises(ValueError, match=r"^repeat=True: is the former name of num_epochs="):
        ReadOptions(repeat=True, num_epochs=2)
    with pytest.raises(ValueError, match=r"^repeat=0: must be True, False or a positive"):
        ReadOptions(repeat=0)


def test_repeat_through_as_fast_dataset_warns_at_the_callers_line(tf_data):
    with pytest.warns(FutureWarning, match=r"^repeat= is renamed num_epochs=") as caught:
        ds = cats_vs_dogs_fast.as_fast_dataset(
            "train", data_dir=tf_data.data_dir, download_and_prepare=False, repeat=True
        )
    assert [w.filename for w in caught if w.category is FutureWarning] == [__file__]
    assert int(ds.cardinality()) == tf.data.INFINITE_CARDINALITY


# Both back ends' crops: unshuffled batches of 8 uncached, each example with its index.
CROPS = dict(batch_size=8, augment=Augment(), with_index=True, cache=False, image_size=64)


def loader_digest(loader, **options) -> str:
    """A digest of two epochs' indices and augmented pixels, in order."""
    digest = hashlib.sha256()
    for images, _, indices in loader.open(**CROPS, num_epochs=2, **options):
        digest.update(np.ascontiguousarray(indices).tobytes())
        digest.update(np.ascontiguousarray(images).tobytes())
    return digest.hexdigest()[:16]


# The digests these seeds gave before the loader took every int64 seed: their orders
# and crops are kept.
PINNED = {
    0: "d0d7d60a8fc81f1c",
    3: "cd82affd0576aece",
    12345: "5a05df51da1b05ba",
    2**32 - 1: "302ddbbb31eeee81",
}


@pytest.mark.parametrize("seed", sorted(PINNED))
def test_a_seed_valid_before_keeps_its_orders_and_crops(loader, seed):
    assert loader_digest(loader, seed=seed) == PINNED[seed]


def by_index(reader) -> dict[int, bytes]:
    """{index: pixels} of one iteration of `reader`."""
    batches = map(backends.numpy, reader)
    return {int(i): im.tobytes() for x, _, k in batches for im, i in zip(x, k, strict=True)}


@pytest.mark.parametrize("seed", [-5, 2**32 + 7, 2**64 - 1])
def test_both_back_ends_cut_the_same_crops_for_any_seed(tf_data, loader, seed):
    theirs, ours = (b.open(**CROPS, seed=seed, shuffle=False) for b in (loader, tf_data))
    for epoch in range(2):  # each iteration is the next epoch, in both
        assert by_index(theirs) == by_index(ours), f"epoch {epoch}"
    # A seed past 32 bits shuffles the loader as its value modulo 2**32 does.
    shuffled = dict(CROPS, augment=None, shuffle=True)
    a = loader.open(**shuffled, seed=seed)
    b = loader.open(**shuffled, seed=seed % 2**32)
    assert [list(k) for _, _, k in a] == [list(k) for _, _, k in b]


def test_the_loader_caches_by_default_in_this_process(loader):
    opened = loader.open(image_size=32)
    assert opened.options.cache == "auto" and opened.cache_bytes > 0


def test_auto_with_workers_serves_a_persisted_file_or_reads_without_a_cache(
    loader, tmp_path, caplog
):
    common = dict(image_size=32, cache_dir=tmp_path, seed=1)
    with caplog.at_level(logging.INFO):
        without = loader.open(num_workers=2, **common)
    assert without.cache_bytes == 0
    lines = [r.getMessage() for r in caplog.records if "cache='auto'" in r.getMessage()]
    assert len(lines) == 1 and "reading without a cache" in lines[0]
    # cache=True with workers and no persisted file stays an error.
    with pytest.raises(ValueError, match=r"^persist=True with worker processes: "):
        loader.open(num_workers=2, cache=True, persist=True, **common)
    # Filled once in this process, the file then serves the workers.
    filler = loader.open(persist=True, **common)
    first = [np.asarray(x).copy() for x, _ in filler]
    backing = filler.cache.backing  # The file is written out in a thread of its own.
    assert isinstance(backing, persisted.FileFill)
    written_out(backing)
    assert backing.persisted
    served = loader.open(num_workers=2, **common)
    assert served.cache_bytes > 0
    again = [np.asarray(x).copy() for x, _ in served]
    served.close()
    assert [a.tobytes() for a in again] == [a.tobytes() for a in first]


def test_the_loaders_cache_budget_places_a_cache_over_it_on_disk(loader, tmp_path, caplog):
    common = dict(image_size=32, shuffle=False, num_epochs=2)
    plain = [np.asarray(x).copy() for x, _ in loader.open(**common)]
    with caplog.at_level(logging.INFO):
        opened = loader.open(cache_budget=1, cache_dir=tmp_path, **common)
        on_disk = [np.asarray(x).copy() for x, _ in opened]
    assert any("cache_budget=1" in r.getMessage() for r in caplog.records)
    assert [a.tobytes() for a in on_disk] == [a.tobytes() for a in plain]
