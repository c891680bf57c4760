"""shuffle=False is the split's record order, in both back ends, on every path (every
plan and cache of tf.data; the loader with and without its cache, worker processes, one
thread), with augment=, from a persistent file a shuffled run filled, on every pass and
in a new process.

The order is compared, example by example, with TFDS's own reader read one file at a
time (`cats_split`): labels, pixels (the stored 224 px pictures, which both back ends
keep exactly, or their augmented crops) and each example's index in the split
(`with_index=True`). Each back end's share of a host (whole files in tf.data, every n-th
example in the loader) keeps that order too.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.augment.spec import Augment
from fast_tfds.cache.persisted import FileFill
from fast_tfds.read import records
from tests.helpers import child_env, run_ok, written_out
from tests.loader.new_process import run
from tests.pairs import digest
from tests.reading.augmented import expected_images
from tests.reading.backends import numpy, persisted

BATCH = 8


def _rows(reader) -> list[tuple[str, int, int]]:
    """(digest, label, index) of every example of one pass, in the order yielded."""
    rows = []
    for element in reader:
        if isinstance(element, dict):
            images, labels, index = element["image"], element["label"], element["index"]
        else:
            images, labels, index = element
        images, labels, index = (np.asarray(t) for t in (images, labels, index))
        if images.ndim == 3:  # unbatched
            images, labels, index = images[None], labels[None], index[None]
        rows += [
            (digest(i), int(label), int(k))
            for i, label, k in zip(images, labels, index, strict=True)
        ]
    return rows


def _examples(reader) -> list[tuple[str, int]]:
    """(digest, label) of every example of one pass of (images, labels) batches."""
    return [
        (digest(image), int(label))
        for images, labels in map(numpy, reader)
        for image, label in zip(images, labels, strict=True)
    ]


def _expected(cats_split, start=0, stop=None):
    """(digest, label, index) of each example of the split (or of a slice of it: its
    examples are numbered from the slice's start), in record order."""
    chosen = cats_split[start:stop]
    return [(digest(ex.pixels), ex.label, k) for k, ex in enumerate(chosen)]


def _options(tmp_path, options):
    options = dict(options)
    if options.get("cache") == "file":
        options["cache"] = os.fspath(tmp_path / "cache")
    if options.get("persist"):
        options["cache_dir"] = os.fspath(tmp_path / "persist")
    return options


# Every path of each back end that serves the stored 224 px pixels (kept exactly).
MODES = {
    "tf.data": {
        "arena": {},
        "arena, unbatched": {"batch_size": None},
        "arena, drop_remainder": {"drop_remainder": True},
        "arena of examples": {"transform": dict},
        "block stream": {"cache": False},
        "per example": {"transform": dict, "cache": False},
        "per example, memory cache": {"as_supervised": False, "batch_size": 7},
        "per example, file cache": {"cache": "file"},
        "persistent arena": {"persist": True},
    },
    "loader": {
        "plain": {},
        "cache": {"cache": True},
        "workers": {"num_workers": 2},
        "one-thread": {"num_threads": 1},
    },
}


@pytest.mark.parametrize(
    "backend, mode",
    [(name, mode) for name, modes in MODES.items() for mode in modes],
    indirect=["backend"],
)
def test_unshuffled_reads_are_the_record_order_on_every_pass(backend, mode, cats_split, tmp_path):
    options = _options(tmp_path, MODES[backend.name][mode])
    options = {"batch_size": BATCH, **options}
    reader = backend.open(shuffle=False, with_index=True, **options)
    expected = _expected(cats_split)
    assert len(expected) > 16  # the build has 16 shard files: several examples' worth
    if options.get("drop_remainder"):
        expected = expected[: len(expected) // BATCH * BATCH]
    for _ in range(3):  # The fill, then passes served from the cache.
        assert _rows(reader) == expected
    assert "seed" not in options  # No seed needed: shuffle=False alone is the order.


@pytest.mark.parametrize("split", ["train[:40%]", "train[40%:]", "train[5:33]"])
def test_slices_are_in_the_record_order_of_the_slice(split, tf_data, cats_split, cats_builder):
    # The slice's bounds as TFDS rounds them.
    (bounds,) = tfds.core.ReadInstruction.from_spec(split).to_absolute(cats_builder.info.splits)
    for cache in (True, False):
        ds = tf_data.open(split, batch_size=BATCH, shuffle=False, with_index=True, cache=cache)
        assert _rows(ds) == _rows(ds) == _expected(cats_split, bounds.from_, bounds.to)


def test_a_persistent_file_a_shuffled_run_filled_serves_the_record_order(
    backend, cats_split, tmp_path
):
    persist = {"batch_size": BATCH, "cache": True, "persist": True, "cache_dir": tmp_path}
    expected = [(d, label) for d, label, _ in _expected(cats_split)]
    shuffled = backend.open(seed=7, with_index=True, **persist)
    assert [k for _, _, k in _rows(shuffled)] != list(range(len(expected)))
    if backend.name == "loader":
        backing = shuffled.cache.backing  # worker processes below map the file whole
        assert isinstance(backing, FileFill)
        written_out(backing)
        assert backing.persisted
    persisted(tmp_path)  # written out by a thread of its own once the fill completes
    # Without the index the shuffled run had: served from the same file (nothing
    # decoded), in the record order.
    served = backend.open(shuffle=False, **persist)
    for _ in range(2):
        assert _examples(served) == expected
    if backend.name == "loader":
        # Worker processes map the same file.
        assert _examples(backend.open(shuffle=False, num_workers=2, **persist)) == expected
        # And a new process, from the file and from the records.
        for mode in ("persist", "records"):
            passes = run("order", backend.data_dir, tmp_path, mode)["passes"]
            assert [[tuple(e) for e in p] for p in passes] == [expected, expected]


CHILD = """
import json, sys
import tensorflow as tf
import cats_vs_dogs_fast
from tests.pairs import digest
ds = cats_vs_dogs_fast.as_fast_dataset(
    "train", data_dir=sys.argv[1], download_and_prepare=False, batch_size=8,
    dtype=tf.uint8, shuffle=False, cache=sys.argv[2] == "cache", with_index=True)
print(json.dumps([[digest(i), int(y), int(k)] for _ in range(2)
                  for x, ys, ks in ds for i, y, k in zip(x.numpy(), ys, ks)]))
"""


@pytest.mark.parametrize("cache", ["cache", "stream"])
def test_another_process_reads_the_same_order(cache, tf_data, cats_split):
    command = [sys.executable, "-c", CHILD, os.fspath(tf_data.data_dir), cache]
    out = run_ok(command, env=child_env(), fork=True)
    line = next(line for line in out.splitlines() if line.startswith("[["))
    got = [tuple(row) for row in json.loads(line)]
    assert got == _expected(cats_split) * 2


@pytest.mark.parametrize("recipe", ["eval", "train"])
@pytest.mark.parametrize("cache", [True, False])
def test_augmented_unshuffled_reads_keep_the_record_order(backend, recipe, cache, cats_split):
    augment = Augment.eval() if recipe == "eval" else Augment.train()
    reader = backend.open(
        batch_size=BATCH, shuffle=False, with_index=True, cache=cache, augment=augment, seed=5
    )
    pictures = [ex.pixels for ex in cats_split]
    expected = [(ex.label, k) for k, ex in enumerate(cats_split)]
    passes = []
    for epoch, batches in enumerate(backend.epochs(reader)):
        images = np.concatenate([x for x, _, _ in batches])
        labels = np.concatenate([y for _, y, _ in batches])
        indices = np.concatenate([k for _, _, k in batches])
        assert list(zip(labels.tolist(), indices.tolist(), strict=True)) == expected
        # Each example cut with its own window of (seed, epoch, index).
        want = expected_images(augment, 5, epoch, range(len(expected)), pictures, cache=cache)
        np.testing.assert_array_equal(images, want)
        passes.append(images)
    if recipe == "eval":
        assert np.array_equal(passes[0], passes[1])  # The same pixels every pass.
    else:
        assert not np.array_equal(passes[0], passes[1])  # New crops, in the same order.


def _context(pipeline, count=2):
    return tf.distribute.InputContext(
        num_input_pipelines=count, input_pipeline_id=pipeline, num_replicas_in_sync=count
    )


@pytest.mark.parametrize("cache", [True, False])
def test_each_input_pipeline_reads_its_files_in_record_order(
    cache, tf_data, cats_split, cats_builder
):
    instructions = records.file_instructions(cats_builder, "train")
    offsets = records.instruction_offsets(instructions)
    truth = _expected(cats_split)
    together = []
    for pipeline in range(2):
        ds = tf_data.open(
            batch_size=2 * BATCH,
            shuffle=False,
            with_index=True,
            cache=cache,
            input_context=_context(pipeline),
        )
        mine = records.Slots.of(instructions[pipeline::2], offsets[pipeline::2]).index
        rows = [r for r in _rows(ds) if r[2] >= 0]  # Padding (index -1) aside.
        assert rows == [truth[k] for k in mine]
        assert _rows(ds) == _rows(ds)
        together += rows
    assert sorted(together, key=lambda r: r[2]) == truth


@pytest.mark.parametrize("count", [2, 3])
def test_each_hosts_share_is_every_countth_example_in_record_order(loader, cats_split, count):
    expected = [(d, label) for d, label, _ in _expected(cats_split)]
    for index in range(count):
        for options in ({}, {"cache": True}):
            share = loader.open(
                batch_size=BATCH, shuffle=False, shard_index=index, shard_count=count, **options
            )
            for _ in range(2):
                assert _examples(share) == expected[index::count]


def test_input_pipelines_yield_the_same_number_of_full_batches(tf_data):
    counts, shapes = [], set()
    for pipeline in range(3):
        ds = tf_data.open(
            shuffle=False,
            with_index=True,
            input_context=_context(pipeline, 3),
            batch_size=3 * 5,
        )
        batches = [(x.numpy(), y.numpy(), k.numpy()) for x, y, k in ds]
        counts.append(len(batches))
        assert int(ds.cardinality()) == len(batches)
        shapes |= {x.shape[0] for x, _, _ in batches}
        x, y, k = (np.concatenate(parts) for parts in zip(*batches, strict=True))
        pad = k < 0
        assert (k[pad] == -1).all() and (y[pad] == 0).all() and not x[pad].any()
        assert (k[~pad] >= 0).all() and not pad[: (~pad).sum()].any(), "padding comes last"
    assert len(set(counts)) == 1, f"pipelines ran {counts} batches"
    assert shapes == {5}, "every batch is full"


def test_the_index_is_a_feature_of_dict_output(tf_data, cats_split):
    ds = tf_data.open(batch_size=BATCH, shuffle=False, with_index=True, as_supervised=False)
    names = [ex.filename for ex in cats_split]
    got = []
    for batch in ds:
        got += zip(batch["index"].numpy().tolist(), batch["image/filename"].numpy(), strict=True)
    assert [names[k] for k, _ in got] == [n.decode() for _, n in got]
    assert [k for k, _ in got] == list(range(len(names)))
    assert "index" not in tf_data.open(as_supervised=False).element_spec
