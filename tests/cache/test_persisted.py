"""The augmentation cache's persistent file without TensorFlow: its key (back-end neutral,
augment-free, every shard format fingerprinted, the decoder's version read when keyed),
and a fill served back in another `open_file` without a pass over the pictures."""

from __future__ import annotations

import gc
import os
import weakref

import numpy as np
import pytest

from fast_tfds.cache import housekeeping, persisted, persistent_format
from fast_tfds.cache.persistent_format import read_header
from fast_tfds.cache.store import Store
from fast_tfds.core import jpeg_blocks

SIZE = (16, 16)


@pytest.fixture
def shards(tmp_path):
    """A version folder with one split in two formats, and another split."""
    for fmt in ("tfrecord", "array_record"):
        for i in range(2):
            (tmp_path / f"toy-train.{fmt}-0000{i}-of-00002").write_bytes(b"x" * (10 + i))
    (tmp_path / "toy-test.tfrecord-00000-of-00001").write_bytes(b"y")
    return tmp_path


def origin(shards, fmt="tfrecord", hook=None):
    files = tuple(os.fspath(shards / f"toy-train.{fmt}-0000{i}-of-00002") for i in range(2))
    return persisted.Origin("toy/1/1.0.0", "train", files, {} if hook is None else hook)


def key(shards, **changes):
    made = {
        "origin": origin(shards),
        "slot_examples": np.arange(10),
        "output_size": SIZE,
        "shorter_side": 18,
        "features": {"label": ((), np.int64)},
        **changes,
    }
    return persisted.key(**made)


@pytest.mark.parametrize(
    "index, runs",
    [
        (np.arange(10), [[0, 10, 1]]),
        (np.arange(1, 10, 3), [[1, 10, 3]]),
        ([5], [[5, 6, 1]]),
        ([0, 1, 2, 10, 11, 30], [[0, 3, 1], [10, 12, 1], [30, 31, 1]]),
    ],
)
def test_example_ranges(index, runs):
    assert persisted.example_ranges(index) == runs
    got = np.concatenate([np.arange(*r) for r in runs])
    np.testing.assert_array_equal(got, index)


def test_the_key_is_the_same_from_either_format_and_names_every_shard_file(shards):
    from_tfrecord, from_array_record = (
        key(shards),
        key(shards, origin=origin(shards, "array_record")),
    )
    assert from_tfrecord == from_array_record
    names = sorted(os.path.basename(path) for path, _, _ in from_tfrecord["shards"])
    assert names == sorted(p.name for p in shards.iterdir() if p.name.startswith("toy-train."))


def test_what_changes_the_pixels_or_the_examples_changes_the_key(shards, monkeypatch):
    base = key(shards)
    others = [
        key(shards, slot_examples=np.arange(1, 10, 2)),  # another shard of the split
        key(shards, output_size=(16, 20)),
        key(shards, shorter_side=None),  # exactly the output size: no crop
        key(shards, features={"label": ((), np.int32)}),
        key(shards, origin=origin(shards, hook={"crop_to_box": True})),
    ]
    assert all(other != base for other in others)
    monkeypatch.setattr(jpeg_blocks, "DECODER_VERSION", jpeg_blocks.DECODER_VERSION + 1)
    assert key(shards) != base  # read when keyed
    monkeypatch.undo()
    shard = shards / "toy-train.array_record-00001-of-00002"  # the other format's, rebuilt
    os.utime(shard, ns=(0, shard.stat().st_mtime_ns + 10**9))
    assert key(shards) != base


def test_strings_and_targets_beyond_the_label_are_not_kept(shards, tmp_path, caplog):
    assert persisted.not_kept({"label": ((), np.int64)}) is None
    assert "'image/filename'" in persisted.not_kept({"image/filename": ((), object)})

    def never():
        raise AssertionError("not filled")

    common = {
        "output_size": SIZE,
        "shorter_side": 18,
        "sizes": never,
        "folder": tmp_path / "cache",
        "budget": None,
        "what": "toy train",
    }
    strings = {"image/filename": ((), object)}
    opened, _ = persisted.open_file(origin(shards), range(4), features=strings, **common)
    assert opened is None
    boxes = origin(shards)
    boxes = persisted.Origin(boxes.dataset, boxes.split, boxes.shard_files, None)
    label = {"label": ((), np.int64)}
    opened, _ = persisted.open_file(boxes, range(4), features=label, **common)
    assert opened is None
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "is not a fixed-size number" in said[0], said
    assert "more than the label" in said[1]
    assert not (tmp_path / "cache").exists()


def store_of(opened: persisted.Stored, common: dict) -> Store:
    """The store a back end makes of an opened file (slot = example index)."""
    pictures = opened.pictures
    assert pictures.output_size == common["output_size"]
    assert pictures.shorter_side == common["shorter_side"]
    n = len(pictures.reference_heights)
    return Store(
        n, common["features"], None, opened.backing, pictures=pictures, filled=opened.filled
    )


@pytest.mark.parametrize("budget", [None, 1], ids=["in memory", "over budget"])
def test_a_filled_file_is_served_without_sizing_the_pictures_again(shards, tmp_path, budget):
    n, rng = 6, np.random.default_rng(0)
    heights, widths = rng.integers(20, 40, n), rng.integers(20, 40, n)
    common = {
        "output_size": SIZE,
        "shorter_side": 18,
        "features": {"label": ((), np.int64)},
        "folder": tmp_path / "cache",
        "budget": budget,
        "what": "toy train",
    }
    opened, _ = persisted.open_file(
        origin(shards), range(n), sizes=lambda: (heights, widths), **common
    )
    assert opened is not None and not opened.filled
    assert isinstance(opened.backing, persisted.FileFill)
    stored = store_of(opened, common)
    pictures = []
    for slot in reversed(range(n)):  # in any order
        view = stored.pictures.view(slot)
        view[...] = rng.integers(0, 256, view.shape, dtype=np.uint8)
        pictures.append(view.copy())
        stored.features["label"][slot] = 100 + slot
        stored.pictures.mark(slot)
    filled = stored.pictures.buffer
    stored.when_filled()
    opened.backing.writing.join(timeout=60)
    assert opened.backing.persisted
    found = housekeeping.find(tmp_path / "cache", persistent_format.PERSISTENT)
    assert [(f.where, key_kind(f.where), f.spent) for f in found] == [
        (str(opened.path), "pictures", None)
    ]

    def never():
        raise AssertionError("a served file needs no reference sizes")

    reopened, _ = persisted.open_file(
        origin(shards, "array_record"), range(n), sizes=never, **common
    )
    assert reopened is not None and reopened.filled and reopened.path == opened.path
    assert isinstance(reopened.backing, persisted.ServedFile)
    served = store_of(reopened, common)
    assert served.pictures.filled
    np.testing.assert_array_equal(served.pictures.reference_heights, heights)
    np.testing.assert_array_equal(served.pictures.reference_widths, widths)
    for slot, picture in zip(reversed(range(n)), pictures, strict=True):
        np.testing.assert_array_equal(served.pictures.image(slot), picture)
    np.testing.assert_array_equal(served.features["label"], 100 + np.arange(n))
    if budget is None:  # The filling process now serves from the file's mapping too,
        assert stored.pictures.buffer is not filled
        gone = weakref.ref(filled)
        del filled, view  # and its filled memory goes once nothing else holds it.
        gc.collect()
        assert gone() is None
        np.testing.assert_array_equal(stored.pictures.buffer, served.pictures.buffer)


def key_kind(path: str) -> str | None:
    """The kind of key a persistent file's header holds ("pictures": the one kind)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_header(fd).layout.key.get("kind")
    finally:
        os.close(fd)
