"""shuffle=False is the split's record order, on every plan, pass and process.

The order is compared, example by example, with TFDS's own reader read one file at a
time (`tfds.load(..., shuffle_files=False, read_config=ReadConfig(interleave_cycle_length
=1))`): labels and pixels (TFDS's decode of the stored 224 px JPEGs, which the reader
keeps exactly), and each example's index in the split (`with_index=True`).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.augment.spec import Augment
from fast_tfds.read import records
from tests.helpers import child_env, run_ok
from tests.pairs import digest
from tests.read.reading import BATCH, read


@functools.cache
def _ordered(data_dir: str, split: str) -> list[tuple[str, int, str]]:
    """(digest of TFDS's pixels, label, filename) of each example, in TFDS's order."""
    ds = tfds.load(
        "cats_vs_dogs_fast",
        split=split,
        data_dir=data_dir,
        shuffle_files=False,
        read_config=tfds.ReadConfig(interleave_cycle_length=1),
        download=False,
    )
    return [
        (digest(ex["image"].numpy()), int(ex["label"]), ex["image/filename"].numpy().decode())
        for ex in ds
    ]


def ordered(data_dir, split="train"):
    return _ordered(os.fspath(data_dir), split)


def _rows(ds) -> list[tuple[str, int, int]]:
    """(digest, label, index) of every example of one pass, in the order yielded."""
    rows = []
    for element in ds:
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


def _expected(data_dir, split="train"):
    return [(d, label, k) for k, (d, label, _) in enumerate(ordered(data_dir, split))]


# Every plan and cache that reads the stored 224 px pixels (kept exactly).
MODES = {
    "arena": {},
    "arena, unbatched": {"batch_size": None},
    "arena, drop_remainder": {"drop_remainder": True},
    "arena of examples": {"transform": dict},
    "block stream": {"cache": False},
    "per example": {"transform": dict, "cache": False},
    "per example, memory cache": {"as_supervised": False, "batch_size": 7},
    "per example, file cache": {"cache": "file"},
    "persistent arena": {"persist": True},
}


def _options(tmp_path, options):
    options = dict(options)
    if options.get("cache") == "file":
        options["cache"] = os.fspath(tmp_path / "cache")
    if options.get("persist"):
        options["cache_dir"] = os.fspath(tmp_path / "persist")
    return options


@pytest.mark.parametrize("mode", MODES)
def test_unshuffled_reads_are_the_record_order_on_every_pass(mode, cats_data_dir, tmp_path):
    options = _options(tmp_path, MODES[mode])
    ds = read(cats_data_dir, shuffle=False, with_index=True, **options)
    expected = _expected(cats_data_dir)
    if options.get("drop_remainder"):
        expected = expected[: len(expected) // BATCH * BATCH]
    for _ in range(3):  # The fill, then passes served from the cache.
        assert _rows(ds) == expected
    assert "seed" not in options  # No seed needed: shuffle=False alone is the order.


@pytest.mark.parametrize("split", ["train[:40%]", "train[40%:]", "train[5:33]"])
def test_slices_are_in_the_record_order_of_the_slice(split, cats_data_dir):
    for cache in (True, False):
        ds = read(cats_data_dir, split=split, shuffle=False, with_index=True, cache=cache)
        assert _rows(ds) == _rows(ds) == _expected(cats_data_dir, split)


def test_a_persistent_file_a_shuffled_run_filled_serves_the_record_order(cats_data_dir, tmp_path):
    folder = os.fspath(tmp_path)
    shuffled = read(cats_data_dir, persist=True, cache_dir=folder, seed=4, with_index=True)
    assert [k for _, _, k in _rows(shuffled)] != list(range(len(_expected(cats_data_dir))))
    # The file is written out by a thread of its own once the fill completes.
    for _ in range(600):
        if list(tmp_path.glob("*.arena")):
            break
        time.sleep(0.2)
    assert list(tmp_path.glob("*.arena")), "the shuffled run should have filled a file"
    ordered_read = read(cats_data_dir, persist=True, cache_dir=folder, shuffle=False)
    # Served from the file (nothing decoded), in the record order.
    expected = [(d, label) for d, label, _ in _expected(cats_data_dir)]
    for _ in range(2):
        got = [
            (digest(i), int(y))
            for x, ys in ordered_read
            for i, y in zip(x.numpy(), ys, strict=True)
        ]
        assert got == expected


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
def test_another_process_reads_the_same_order(cache, cats_data_dir):
    out = run_ok([sys.executable, "-c", CHILD, os.fspath(cats_data_dir), cache], env=child_env())
    line = next(line for line in out.splitlines() if line.startswith("[["))
    got = [tuple(row) for row in json.loads(line)]
    assert got == _expected(cats_data_dir) * 2


@pytest.mark.parametrize("recipe", ["eval", "train"])
@pytest.mark.parametrize("cache", [True, False])
def test_augmented_unshuffled_reads_keep_the_record_order(recipe, cache, cats_data_dir):
    augment = Augment.eval() if recipe == "eval" else Augment.train()
    ds = read(cats_data_dir, shuffle=False, with_index=True, cache=cache, augment=augment, seed=1)
    expected = [(label, k) for _, label, k in _expected(cats_data_dir)]
    passes = [_rows(ds) for _ in range(2)]
    for rows in passes:
        assert [(label, k) for _, label, k in rows] == expected
    if recipe == "eval":
        assert passes[0] == passes[1]  # The same pixels every pass.
    else:
        assert passes[0] != passes[1]  # New crops every pass, in the same order.


def _context(pipeline, count=2):
    return tf.distribute.InputContext(
        num_input_pipelines=count, input_pipeline_id=pipeline, num_replicas_in_sync=count
    )


@pytest.mark.parametrize("cache", [True, False])
def test_each_input_pipeline_reads_its_files_in_record_order(cache, cats_data_dir, cats_builder):
    instructions = records.file_instructions(cats_builder, "train")
    offsets = records.instruction_offsets(instructions)
    truth = _expected(cats_data_dir)
    together = []
    for pipeline in range(2):
        ds = read(
            cats_data_dir,
            shuffle=False,
            with_index=True,
            cache=cache,
            input_context=_context(pipeline),
            batch_size=2 * BATCH,
        )
        mine = records.Slots.of(instructions[pipeline::2], offsets[pipeline::2]).index
        rows = [r for r in _rows(ds) if r[2] >= 0]  # Padding (index -1) aside.
        assert rows == [truth[k] for k in mine]
        assert _rows(ds) == _rows(ds)
        together += rows
    assert sorted(together, key=lambda r: r[2]) == truth


def test_input_pipelines_yield_the_same_number_of_full_batches(cats_data_dir):
    counts, shapes = [], set()
    for pipeline in range(3):
        ds = read(
            cats_data_dir,
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


def test_the_index_is_a_feature_of_dict_output(cats_data_dir):
    ds = read(cats_data_dir, shuffle=False, with_index=True, as_supervised=False)
    names = [name for _, _, name in ordered(cats_data_dir)]
    got = []
    for batch in ds:
        got += zip(batch["index"].numpy().tolist(), batch["image/filename"].numpy(), strict=True)
    assert [names[k] for k, _ in got] == [n.decode() for _, n in got]
    assert [k for k, _ in got] == list(range(len(names)))
    assert "index" not in read(cats_data_dir, as_supervised=False).element_spec
