"""The file cache (`cache='path'`) after killed runs, early stops, rebuilds, and alongside
another process: never a crash, never a short or stale epoch.

Real processes: a child writing a file cache pauses mid-epoch and is SIGKILLed, or
stays paused while this process reads the same dataset with the same cache path. The
children are forks of a server that has imported TensorFlow (`tests.forks`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import cats_vs_dogs_fast
from tests.children import Child
from tests.forks import ForkedChild
from tests.helpers import assert_exactly_once, filenames_of

# Reads the train split with a file cache, printing each filename; in the first epoch
# (which writes the cache), after `pause_after` examples it prints "paused" and waits
# for a line on stdin: the test acts while the cache is being written, however loaded
# the machine is.
_CHILD = textwrap.dedent(
    """
    import sys
    import cats_vs_dogs_fast
    data_dir, cache = sys.argv[1], sys.argv[2]
    epochs, pause_after = int(sys.argv[3]), int(sys.argv[4])
    ds = cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=data_dir, cache=cache, shuffle=False, batch_size=None,
        as_supervised=False, download_and_prepare=False,
    )
    for epoch in range(epochs):
        for i, example in enumerate(ds):
            print("example", epoch, example["image/filename"].numpy().decode(), flush=True)
            if epoch == 0 and i + 1 == pause_after:
                print("paused", flush=True)
                sys.stdin.readline()
        print("epoch done", epoch, flush=True)
    """
)


def read(data_dir, cache, split="train", **options):
    return cats_vs_dogs_fast.as_fast_dataset(
        split,
        data_dir=data_dir,
        cache=cache,
        as_supervised=False,
        batch_size=None,
        download_and_prepare=False,
        **options,
    )


def start_child(data_dir, cache, *, epochs: int, pause_after: int) -> Child:
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    return ForkedChild(
        [sys.executable, "-c", _CHILD, os.fspath(data_dir), os.fspath(cache), str(epochs)]
        + [str(pause_after)],
        env=env,
        stdin=subprocess.PIPE,
    )


def until_paused(child: Child) -> list[str]:
    """The child's example lines before its pause, once it has paused."""
    return [line for line in child.until("paused\n").splitlines() if line != "paused"]


def cache_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_run_killed_mid_epoch_neither_blocks_nor_shortens_the_next(
    cats_data_dir, cats_filenames, tmp_path
):
    cache = tmp_path / "cache"
    child = start_child(cats_data_dir, cache, epochs=1, pause_after=3)
    try:
        assert len(until_paused(child)) == 3
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
    left = cache_files(tmp_path)
    # Precondition: the kill landed mid-write, leaving what makes TF's cache fail.
    assert any(name.endswith("_0.lockfile") for name in left), left
    assert not any(name.endswith(".index") for name in left), left

    ds = read(cats_data_dir, cache)
    for _epoch in range(2):  # the second epoch is read from the cache written by the first
        assert_exactly_once(filenames_of(ds), cats_filenames)
    after = cache_files(tmp_path)
    assert not any(name.endswith(".lockfile") or ".tempstate" in name for name in after), after
    assert any(name.endswith(".index") for name in after), after


def test_an_iteration_stopped_early_leaves_no_cache_that_reads_as_complete(
    cats_data_dir, cats_filenames, tmp_path
):
    cache = tmp_path / "cache"
    # Unshuffled: a shuffle buffer larger than this sample would pull every
    # example through the cache (a complete pass) before the first comes out.
    ds = read(cats_data_dir, cache, shuffle=False)
    for i, _ in enumerate(ds):  # a loop left early
        if i == 3:
            break
    assert len(filenames_of(ds.take(5))) == 5  # and a take(k)
    assert not any(name.endswith(".index") for name in cache_files(tmp_path))
    for _epoch in range(2):
        assert_exactly_once(filenames_of(ds), cats_filenames)
    assert any(name.endswith(".index") for name in cache_files(tmp_path))
    # A new dataset on the same path (shuffled: same cache) reads the complete cache.
    assert_exactly_once(filenames_of(read(cats_data_dir, cache)), cats_filenames)


def test_another_process_writing_the_same_cache_is_left_alone(
    cats_data_dir, cats_filenames, tmp_path
):
    cache = tmp_path / "cache"
    # The child starts writing the cache (its first epoch) and pauses; it then writes the
    # rest and reads it back.
    child = start_child(cats_data_dir, cache, epochs=2, pause_after=2)
    try:
        first = until_paused(child)
        files = cache_files(tmp_path)
        assert any(name.endswith("_0.lockfile") for name in files), "child should be writing"
        assert not any(name.endswith(".index") for name in files)

        # Meanwhile this process reads the same split with the same cache path.
        assert_exactly_once(filenames_of(read(cats_data_dir, cache)), cats_filenames)

        out, err = child.communicate("go\n")
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate(timeout=60)
    assert child.returncode == 0, err[-3000:]
    lines = first + out.splitlines()
    for epoch in range(2):
        names = [line.split()[2] for line in lines if line.startswith(f"example {epoch} ")]
        assert_exactly_once(names, cats_filenames)
    # Written once, complete: this process now reads the child's cache (same
    # name in both processes), it does not write one of its own.
    indexes = [name for name in cache_files(tmp_path) if name.endswith(".index")]
    assert len(indexes) == 1, cache_files(tmp_path)
    assert_exactly_once(filenames_of(read(cats_data_dir, cache)), cats_filenames)
    assert [name for name in cache_files(tmp_path) if name.endswith(".index")] == indexes


def test_a_different_pipeline_or_a_rebuilt_dataset_never_gets_a_stale_cache(
    cats_data_dir, cats_filenames, tmp_path
):
    cache = tmp_path / "cache"
    half = filenames_of(read(cats_data_dir, cache, "train[:50%]"))
    assert 0 < len(half) < len(cats_filenames)
    # Same path, whole split: not the half cached above.
    assert_exactly_once(filenames_of(read(cats_data_dir, cache)), cats_filenames)
    # Same path, another image size: images of that size, not the cached 224s.
    image = next(iter(read(cats_data_dir, cache, image_size=32)))["image"]
    assert image.shape == (32, 32, 3)
    before = set(cache_files(tmp_path))

    # A rebuilt dataset (here: a shard rewritten with the same content) gets a new cache.
    shard = sorted(Path(cats_data_dir).glob("cats_vs_dogs_fast/224/1.0.0/*.tfrecord-00000-*"))[0]
    stat = shard.stat()
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    try:
        ds = read(cats_data_dir, cache)
        pixels = {}
        for example in ds:
            pixels[example["image/filename"].numpy().decode()] = example["image"].numpy()
        assert sorted(pixels) == sorted(cats_filenames)
        assert set(cache_files(tmp_path)) - before, "the rebuilt dataset should get new files"
        assert all(np.asarray(p).shape == (224, 224, 3) for p in pixels.values())
    finally:
        os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_transform_settings_are_part_of_the_cache_name():
    from fast_tfds.cache import tf_file_cache
    from stanford_dogs_tfrecord import boxes

    def identity(crop_to_box):
        options = boxes.reader_options(with_boxes=True, crop_to_box=crop_to_box, as_supervised=True)
        return tf_file_cache.callable_identity(options["transform"])

    # Same code and settings: the same name (also across processes: no ids or
    # addresses in it); another setting: another name.
    assert identity(True) == identity(True)
    assert identity(True) != identity(False)
    assert "0x" not in identity(True)
