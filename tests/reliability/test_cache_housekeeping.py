"""File caches: two iterations at once in one process, and `fast-tfds cache list|clean`
(never removing a cache a live process is writing). Real processes, real cache files."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import cats_vs_dogs_fast
from tests import forks
from tests.children import Child
from tests.helpers import assert_exactly_once, fast_tfds_cache, filenames_of

ENV = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}


def read(data_dir, cache, split="train"):
    return cats_vs_dogs_fast.as_fast_dataset(
        split,
        data_dir=data_dir,
        cache=cache,
        shuffle=False,
        batch_size=None,
        as_supervised=False,
        download_and_prepare=False,
    )


# -- two iterations of one process --------------------------------------------------


def test_two_iterations_at_once_in_one_process_both_read_everything(
    cats_data_dir, cats_filenames, tmp_path, caplog
):
    cache = tmp_path / "cache"
    cache.mkdir()
    ds = read(cats_data_dir, cache)
    first = iter(ds)
    head = filenames_of([next(first)])  # The first iteration is writing the cache...
    with caplog.at_level(logging.WARNING):
        second = filenames_of(ds)  # ...when a second one runs through the same dataset,
        other = filenames_of(read(cats_data_dir, cache))  # and a second dataset on the same path.
    assert_exactly_once(second, cats_filenames)
    assert_exactly_once(other, cats_filenames)
    assert "another iteration in this process is writing" in caplog.text
    assert not [p for p in cache.iterdir() if p.name.endswith(".index")]

    assert_exactly_once(head + filenames_of(first), cats_filenames)  # The first one completes it,
    files = sorted(p.name for p in cache.iterdir())
    assert [n for n in files if n.endswith(".index")], files
    assert_exactly_once(filenames_of(ds), cats_filenames)  # and the next epoch reads it.
    assert sorted(p.name for p in cache.iterdir()) == files


# -- fast-tfds cache list | clean -----------------------------------------------------

# Reads a split with a file cache; with a pause, stops after that many examples
# (the cache half-written, its lock held) until a line comes on stdin.
_READER = textwrap.dedent(
    """
    import sys
    import cats_vs_dogs_fast
    where, path, cache, split, pause = sys.argv[1:]
    ds = cats_vs_dogs_fast.as_fast_dataset(
        split, **{where: path}, cache=cache, shuffle=False, batch_size=None,
        download_and_prepare=False,
    )
    for i, _ in enumerate(ds):
        if i == int(pause):
            print("paused", flush=True)
            sys.stdin.readline()
    print("done", flush=True)
    """
)


def start_reader(where: str, path, cache, split: str, pause: int = -1) -> Child:
    """A reader in a process of its own: a fork (`tests.forks`), as what is checked is the
    caches it leaves and the lock it holds, not how an interpreter starts."""
    command = [sys.executable, "-c", _READER, where, os.fspath(path), os.fspath(cache), split]
    return forks.child([*command, str(pause)], stdin=subprocess.PIPE, env=ENV)


def wait_for(child: Child, line: str) -> None:
    got = child.line().strip()
    assert got == line, f"{got!r}: {child.stderr_text()[-3000:] if not got else ''}"


def line_of(output: str, split: str) -> str:
    what = f" cats_vs_dogs_fast/224/1.0.0 {split} "
    lines = [line for line in output.splitlines() if what in line]
    assert len(lines) == 1, output
    return lines[0]


def test_cache_list_and_clean(cats_data_dir, cats_builder, tmp_path):
    cache = tmp_path / "caches"
    cache.mkdir()
    # A copy of the dataset, to be "rebuilt" (a shard rewritten) after its cache is made.
    copy = tmp_path / "copy" / "cats_vs_dogs_fast" / "224" / "1.0.0"
    shutil.copytree(cats_builder.data_dir, copy)

    complete = start_reader("data_dir", cats_data_dir, cache, "train")
    stale = start_reader("builder_dir", copy, cache, "train[:25%]")
    killed = start_reader("data_dir", cats_data_dir, cache, "train[:50%]", pause=2)
    live = start_reader("data_dir", cats_data_dir, cache, "train[50%:]", pause=2)
    try:
        for child in (complete, stale):
            wait_for(child, "done")
            assert child.wait(timeout=120) == 0
        for child in (killed, live):
            wait_for(child, "paused")
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        shard = sorted(copy.glob("*.tfrecord-00000-*"))[0]
        os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))

        listed = fast_tfds_cache("list", cache)
        assert line_of(listed, "train").startswith("complete ")
        assert line_of(listed, "train[:25%]").startswith("complete, stale ")
        assert line_of(listed, "train[:50%]").startswith("unfinished (left by a stopped run)")
        assert line_of(listed, "train[50%:]").startswith(f"being written by pid {live.pid} ")
        assert " MiB " in line_of(listed, "train") and " ago " in line_of(listed, "train")
        assert listed.splitlines()[-1].startswith("4 cache(s), ")

        # By default: what can never be read again (unfinished, stale).
        cleaned = fast_tfds_cache("clean", cache)
        assert "Removed 2 cache(s)" in cleaned and "kept 2." in cleaned, cleaned
        assert f"kept     {cache}" in cleaned and f"(in use by pid {live.pid})" in cleaned
        left = fast_tfds_cache("list", cache)
        assert "complete " in left and "being written" in left and "unfinished" not in left
        assert "stale" not in left

        assert "Removed 0 cache(s)" in fast_tfds_cache("clean", cache, "--older-than", "1d")
        cleaned = fast_tfds_cache("clean", cache, "--all")
        assert "Removed 1 cache(s)" in cleaned and "kept 1." in cleaned, cleaned
        assert line_of(fast_tfds_cache("list", cache), "train[50%:]").startswith("being written")
    finally:
        for child in (complete, stale, killed, live):
            if child.poll() is None:
                child.kill()
            child.communicate(timeout=60)

    # The writer gone, its unfinished cache goes too; nothing is left.
    assert "Removed 1 cache(s)" in fast_tfds_cache("clean", cache, "--all")
    assert sorted(Path(cache).iterdir()) == []
