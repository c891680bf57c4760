"""`persist=True` across real processes, each scenario once, parametrized by what fills the
file: the plain tf.data read, tf.data's augmented read (`augment=`) or the loader's. Every
persistent cache of either back end is one kind of file under one key, so a later run, of
either back end, serves every example exactly once per epoch from the file, decoding
nothing and reading no shard (they are zeroed), with the windows and pixels of the run that
filled it; a killed fill, a full disk, a damaged file, a rebuilt dataset, two fills at once
and a read-only folder each end in the right pixels and one clear line; `fast-tfds cache
list|clean` show and remove the file, never one in use; the loader's worker processes map
a complete file and never fill one.

The build holds TFRecord and ArrayRecord files side by side (`tfds convert_format`), as a
folder that serves both back ends does. What each epoch must be comes from this process's
own in-memory cache (persist=False) of the same seed, and for the plain read from TFDS's own
reader too: (pixel digest, label) pairs, counted.

Cost: each child process imports the library (and TensorFlow for tf.data), so the files
that several tests start from are filled once per test run, in one child process, and
shared by the xdist workers (`filled`); a test copies the cache folder it changes. The
children are forks of a server that has imported TensorFlow (`tests.forks`), but for those
whose loader starts worker processes. Every wait on a child process has a timeout
(`tests/children.py`).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
from fast_tfds import Augment
from fast_tfds.cache import persistent_format
from tests.children import TIMEOUT_S, Child
from tests.forks import ForkedChild
from tests.helpers import child_env, fast_tfds_cache, listed_line, shared_folder
from tests.pairs import Output, Truth, digest

pytest.importorskip("grain")

SEED = 7
EPOCHS = 2
# "plain": no augment=, the plain read, whose arena is the picture store at the output size.
AUGMENTS = {"rrc": Augment(), "none": Augment(crop=None, flip=False), "plain": None}
# Each of the child's jobs starts its stderr with this line and its number.
JOB_MARK = "=== persistence test job "

# Child-script lines that count this process's calls to our decoder in `calls[0]`.
COUNT_DECODES = textwrap.dedent(
    """
    from fast_tfds.core import jpeg_blocks

    calls = [0]
    def counted(fn):
        def wrapper(*args, **kwargs):
            calls[0] += 1
            return fn(*args, **kwargs)
        return wrapper
    for name in ("decode_jpeg_block_into", "decode_resized_block_into", "decode_jpeg_block",
                 "decode_resized_block", "decode_resized_into"):
        setattr(jpeg_blocks, name, counted(getattr(jpeg_blocks, name)))
    """
)

# argv: the jobs (JSON: a list of {backend ("tf" or "loader"), data_dir, cache, epochs,
# augment (a key of AUGMENTS), pause, workers (the loader's worker processes)}), run one
# after the other; then the names of `os` functions the child runs without (as on a
# platform that lacks them), comma-separated. A job with `pause` prints "paused" after
# its first batch and waits for a line on stdin. One JSON line per epoch: its job, its
# (digest, label) pairs and the job's calls to the decoder so far (this process's).
_CHILD = (
    textwrap.dedent(
        """
    import os, sys
    for name in filter(None, sys.argv[2].split(",")):
        delattr(os, name)
    import hashlib, json
    import numpy as np
    """
    )
    + COUNT_DECODES
    + textwrap.dedent(
        f"""
    import cats_vs_dogs_fast
    from fast_tfds import Augment

    AUGMENTS = {{"rrc": Augment(), "none": Augment(crop=None, flip=False), "plain": None}}
    for number, job in enumerate(json.loads(sys.argv[1])):
        print({JOB_MARK!r} + str(number), file=sys.stderr, flush=True)
        common = dict(data_dir=job["data_dir"], download_and_prepare=False, batch_size=8,
                      seed={SEED}, augment=AUGMENTS[job["augment"]], cache=True, persist=True,
                      cache_dir=job["cache"])
        if job["backend"] == "tf":
            import tensorflow as tf
            ds = cats_vs_dogs_fast.as_fast_dataset("train", dtype=tf.uint8, **common)
            def batches():
                for images, labels in ds:
                    yield images.numpy(), labels.numpy()
        else:
            loader = cats_vs_dogs_fast.as_fast_loader(
                "train", num_threads=2, num_workers=job["workers"], **common)
            def batches():
                yield from loader
        before = calls[0]
        for epoch in range(job["epochs"]):
            pairs = []
            for i, (images, labels) in enumerate(batches()):
                for image, label in zip(images, labels):
                    pairs.append([hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest(),
                                  int(label)])
                if epoch == 0 and i == 0 and job["pause"]:
                    print("paused", flush=True)
                    sys.stdin.readline()
            print(json.dumps({{"job": number, "epoch": epoch, "pairs": pairs,
                              "decoded": calls[0] - before}}), flush=True)
    """
    )
)


class Job(NamedTuple):
    """One read of the child: `backend` reads `data_dir` with `augment`, persisting in `cache`."""

    backend: str
    data_dir: Path
    cache: Path
    augment: str = "rrc"
    epochs: int = EPOCHS
    pause: bool = False
    workers: int = 0

    def as_json(self) -> dict:
        return {
            **self._asdict(),
            "data_dir": os.fspath(self.data_dir),
            "cache": os.fspath(self.cache),
        }


def start(*jobs: Job, hide: tuple[str, ...] = ()) -> Child:
    """The child running `jobs`: a fork of a server that has imported TensorFlow
    (`tests.forks`), or, where the loader starts worker processes, an interpreter of its own."""
    jobs_json = json.dumps([job.as_json() for job in jobs])
    kind = Child if any(job.workers for job in jobs) else ForkedChild
    return kind(
        [sys.executable, "-c", _CHILD, jobs_json, ",".join(hide)],
        stdin=subprocess.PIPE,
        env=child_env(),
    )


def epochs_of(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run(*jobs: Job, hide: tuple[str, ...] = (), fails: bool = False) -> tuple[list[dict], str]:
    """The jobs in one child process: (their epochs as printed, its stderr)."""
    child = start(*jobs, hide=hide)
    out, err = child.communicate(timeout=TIMEOUT_S)
    assert (child.returncode != 0) == fails, err[-3000:]
    return epochs_of(out), err


def read(backend, data_dir, cache, augment="rrc", **job) -> tuple[list[dict], str]:
    """One read in a child process: (its epochs as printed, its stderr)."""
    return run(Job(backend, data_dir, cache, augment, **job))


def finish(child: Child) -> list[dict]:
    """The epochs of a paused child, let go on and ended."""
    out, err = child.communicate("go\n", timeout=TIMEOUT_S)
    assert child.returncode == 0, err[-3000:]
    return epochs_of(out)


def stop(child: Child) -> None:
    if child.poll() is None:
        child.kill()
        child.wait(timeout=TIMEOUT_S)


def counted(epoch: dict) -> collections.Counter:
    return collections.Counter(tuple(pair) for pair in epoch["pairs"])


def picture_files(cache: Path) -> list[Path]:
    return sorted(cache.glob(f"*{persistent_format.SUFFIX}"))


def temp_files(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if persistent_format.TEMP_MARK in p.name)


def lines(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if text in line]


def version_dir(data_dir: Path) -> Path:
    return data_dir / "cats_vs_dogs_fast" / "224" / "1.0.0"


def zero_the_shards(data_dir: Path) -> None:
    """Every shard file of both formats overwritten with zeros of its size, its times kept:
    the key still matches, and any record read now would fail to parse."""
    shards = sorted(version_dir(data_dir).glob("*-train.*"))
    assert len(shards) >= 4
    for shard in shards:
        stat = shard.stat()
        shard.write_bytes(bytes(stat.st_size))
        os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def assert_filled(epochs: list[dict], stderr: str, cache: Path, want) -> Path:
    """A fill's epochs and log checked: the one file it wrote."""
    assert [counted(e) for e in epochs] == want
    assert epochs[0]["decoded"] > 0
    assert len(lines(stderr, "persist=True: writing the decoded cache")) == 1, stderr
    (path,) = picture_files(cache)
    assert not temp_files(cache)
    return path


def mount(*steps: list[str], target: Path) -> None:
    """Runs the mount commands; skips the test where this machine does not allow them."""
    for number, step in enumerate(steps):
        done = subprocess.run(step, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            if number:
                subprocess.run(["umount", os.fspath(target)], timeout=60)
            pytest.skip(f"cannot mount here ({' '.join(step[:3])}): {done.stderr.strip()}")


def read_only_mount(source: Path, target: Path) -> None:
    target.mkdir()
    mount(
        ["mount", "--bind", os.fspath(source), os.fspath(target)],
        ["mount", "-o", "remount,bind,ro", os.fspath(target)],
        target=target,
    )


def small_disk(folder: Path) -> None:
    """`folder`, a 2 MiB file system: the tiny build's pictures (about 8 MiB) do not fit."""
    folder.mkdir()
    mount(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", os.fspath(folder)], target=folder)


def umount(folder: Path) -> None:
    subprocess.run(["umount", os.fspath(folder)], timeout=60, check=True)


# -- what each epoch must be, and the files the tests start from ---------------------


@pytest.fixture(scope="module")
def expected(cats_both_formats_dir) -> dict[str, list[collections.Counter]]:
    """Per augment: each epoch's (digest, label) pairs from an in-memory cache of the
    same seed in this process (persist=False). The plain read's and the uncropped read's
    are TFDS's own reader's pairs (`builder.as_dataset`), every epoch."""
    out = {}
    for name, augment in AUGMENTS.items():
        ds = cats_vs_dogs_fast.as_fast_dataset(
            "train",
            data_dir=cats_both_formats_dir,
            download_and_prepare=False,
            batch_size=8,
            seed=SEED,
            dtype=tf.uint8,
            augment=augment,
            cache=True,
        )
        out[name] = [
            collections.Counter(
                (digest(image), int(label))
                for images, labels in ds
                for image, label in zip(images.numpy(), labels.numpy(), strict=True)
            )
            for _ in range(EPOCHS)
        ]
    builder = tfds.builder("cats_vs_dogs_fast", config="224", data_dir=cats_both_formats_dir)
    truth = collections.Counter(
        (digest(ex["image"].numpy()), int(ex["label"])) for ex in builder.as_dataset("train")
    )
    assert out["plain"] == out["none"] == [truth] * EPOCHS
    assert out["rrc"][0] != out["rrc"][1]  # new windows every epoch
    return out


# The files filled once per test run (`filled`), by name: (back end, augment), each in a
# copy of the build of its own (a file's key names its shard files' paths, so each is
# served only for its own copy). "zeroed": the shards are zeroed once every file is filled;
# "live": the build as it is, that no test changes; "rebuilt": one test rebuilds it.
FILLS = {
    "zeroed tf plain": ("tf", "plain"),
    "zeroed tf rrc": ("tf", "rrc"),
    "zeroed tf none": ("tf", "none"),
    "zeroed loader rrc": ("loader", "rrc"),
    "zeroed loader plain": ("loader", "plain"),
    "live tf plain": ("tf", "plain"),
    "live loader rrc": ("loader", "rrc"),
    "rebuilt tf plain": ("tf", "plain"),
    "rebuilt tf rrc": ("tf", "rrc"),
}


class Filled:
    """The shared folder of `filled`: each fill's data folder and cache folder."""

    def __init__(self, root: Path):
        self.root = root

    def data(self, name: str) -> Path:
        return self.root / "data" / name

    def cache(self, name: str) -> Path:
        return self.root / "cache" / name

    def copy(self, name: str, tmp_path: Path) -> tuple[Path, Path, Path]:
        """(data folder, the test's own copy of the cache folder, its file)."""
        mine = tmp_path / "cache"
        shutil.copytree(self.cache(name), mine)
        (path,) = picture_files(mine)
        return self.data(name), mine, path


@pytest.fixture(scope="module")
def filled(tmp_path_factory, cats_both_formats_dir, expected) -> Filled:
    """Every file of FILLS, filled in one child process, each fill's epochs and log
    checked; made once per test run and shared by the xdist workers."""

    def make(root: Path) -> None:
        made = Filled(root)
        names = list(FILLS)
        for name in names:
            shutil.copytree(
                cats_both_formats_dir / "cats_vs_dogs_fast", made.data(name) / "cats_vs_dogs_fast"
            )
        jobs = [Job(FILLS[n][0], made.data(n), made.cache(n), FILLS[n][1]) for n in names]
        epochs, stderr = run(*jobs)
        logs = stderr.split(JOB_MARK)[1:]
        assert len(logs) == len(names), stderr[-3000:]
        for number, name in enumerate(names):
            mine = [e for e in epochs if e["job"] == number]
            assert_filled(mine, logs[number], made.cache(name), expected[FILLS[name][1]])
        for name in names:
            if name.startswith("zeroed "):
                zero_the_shards(made.data(name))

    return Filled(shared_folder(tmp_path_factory, "persistence_filled", make))


@pytest.fixture
def live(filled, tmp_path) -> tuple[Path, Path]:
    """(the unchanged build, a new cache folder of the test's own)."""
    return filled.data("live tf plain"), tmp_path / "cache"


# -- the tests ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "filler, server, augment",
    [
        ("zeroed tf plain", "tf", "plain"),
        ("zeroed tf rrc", "tf", "rrc"),
        ("zeroed tf none", "tf", "none"),
        ("zeroed tf rrc", "loader", "rrc"),
        ("zeroed loader rrc", "tf", "rrc"),
        # One key for every persistent cache: the tf.data arena of a plain read, the
        # loader's plain cache and an Augment(crop=None) read all store the pictures at the
        # output size, so whichever fills the file, the others serve it without decoding.
        ("zeroed tf plain", "loader", "plain"),
        ("zeroed loader plain", "tf", "none"),
    ],
)
def test_a_second_process_serves_every_example_once_from_the_file_without_decoding(
    cats_both_formats_dir, filled, tmp_path, expected, filler, server, augment
):
    data_dir, cache, path = filled.copy(filler, tmp_path)  # its shards are zeroed
    want = expected[augment]
    if augment == "plain":  # a third epoch: still the same pairs, still from the file
        want = [*want, want[0]]
    epochs, stderr = read(server, data_dir, cache, augment, epochs=len(want))
    assert [counted(e) for e in epochs] == want  # the same windows, pixels and labels
    assert [e["decoded"] for e in epochs] == [0] * len(want)
    assert not lines(stderr, "fast_tfds: persist=True"), stderr
    assert not lines(stderr, "writing the decoded cache"), stderr
    assert picture_files(cache) == [path] and not temp_files(cache)
    if augment != "rrc":  # The stored pixels: each example once, with its own label.
        truth = Truth.of(cats_both_formats_dir)  # the copy read here is zeroed
        for epoch in epochs:
            truth.check([Output(d, label) for d, label in epoch["pairs"]])


def test_loader_workers_map_a_complete_file_and_never_fill_one(live, filled, tmp_path, expected):
    live_data, empty = live
    _, stderr = run(Job("loader", live_data, empty, workers=2), fails=True)
    said = lines(stderr, "ValueError: persist=True with worker processes")
    assert len(said) == 1 and "is not there; workers only map a complete file" in said[0]
    assert not picture_files(empty)
    data_dir, cache, path = filled.copy(
        "zeroed tf rrc", tmp_path
    )  # a worker reading a record fails
    epochs, stderr = read("loader", data_dir, cache, workers=2)
    assert [counted(e) for e in epochs] == expected["rrc"]
    assert [e["decoded"] for e in epochs] == [0, 0]  # this process's; its workers read none
    assert not lines(stderr, "fast_tfds: persist=True"), stderr
    assert picture_files(cache) == [path] and not temp_files(cache)


@pytest.mark.parametrize(
    "filler, refiller, server", [("live tf plain", "tf", "tf"), ("live loader rrc", "tf", "loader")]
)
@pytest.mark.parametrize("damage", ["truncated", "header byte flipped"])
def test_a_damaged_file_is_found_at_open_said_in_one_line_and_refilled(
    filled, tmp_path, expected, damage, filler, refiller, server
):
    augment = FILLS[filler][1]
    want = expected[augment]
    data_dir, cache, path = filled.copy(filler, tmp_path)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        path.write_bytes(bytes(data[: len(data) - 1000]))
        said = "is truncated"
    else:
        data[100] ^= 0x04  # in the JSON of the header
        path.write_bytes(bytes(data))
        said = "cannot be trusted: damaged header"
    epochs, stderr = read(refiller, data_dir, cache, augment)
    assert [counted(e) for e in epochs] == want
    assert len(lines(stderr, said)) == 1 and len(lines(stderr, "filling it again")) == 1, stderr
    assert epochs[0]["decoded"] > 0
    assert picture_files(cache) == [path] and path.stat().st_size == len(data)
    epochs, _ = read(server, data_dir, cache, augment, epochs=1)
    assert counted(epochs[0]) == want[0] and epochs[0]["decoded"] == 0


@pytest.mark.parametrize(
    "filler, shards", [("rebuilt tf plain", "*.tfrecord*"), ("rebuilt tf rrc", "*.array_record-*")]
)
def test_a_rebuilt_dataset_never_gets_the_old_pixels_and_gets_a_new_key(
    filled, tmp_path, expected, filler, shards
):
    # "Rebuilt": one shard rewritten with the same records, so a new modification time.
    # An ArrayRecord shard, which the tf.data reader does not read: its file no longer
    # matches the build all the same. This test alone changes this build.
    augment = FILLS[filler][1]
    want = expected[augment]
    data_dir, cache, old = filled.copy(filler, tmp_path)
    shard = sorted(version_dir(data_dir).glob(shards))[0]
    stat = shard.stat()
    shard.write_bytes(shard.read_bytes())
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    epochs, stderr = read("tf", data_dir, cache, augment)
    assert [counted(e) for e in epochs] == want
    assert epochs[0]["decoded"] > 0  # filled again, not served from the old file
    assert len(lines(stderr, "writing the decoded cache")) == 1, stderr
    assert len(picture_files(cache)) == 2 and old.exists()
    listed = fast_tfds_cache("list", cache)
    assert listed_line(listed, old).startswith(
        "persistent, stale (its dataset was rebuilt or removed)"
    )
    cleaned = fast_tfds_cache("clean", cache)
    assert f"removed  {old} (stale, " in cleaned and not old.exists(), cleaned
    assert len(picture_files(cache)) == 1


@pytest.mark.parametrize("first, second, augment", [("tf", "tf", "plain"), ("tf", "loader", "rrc")])
def test_two_fills_at_once_one_writes_the_other_caches_in_memory(
    live, expected, first, second, augment
):
    data_dir, cache = live
    want = expected[augment]
    writer = start(Job(first, data_dir, cache, augment, pause=True))
    try:
        assert writer.line(timeout=TIMEOUT_S).strip() == "paused"  # it holds the key's lock
        epochs, stderr = read(second, data_dir, cache, augment)
        assert [counted(e) for e in epochs] == want
        said = lines(stderr, "another process (pid ")
        assert len(said) == 1 and f"pid {writer.pid})" in said[0], stderr
        assert "this run caches" in said[0] and picture_files(cache) == []
        printed = finish(writer)
    finally:
        stop(writer)
    assert [counted(e) for e in printed] == want
    assert len(picture_files(cache)) == 1 and not temp_files(cache)
    epochs, _ = read(second, data_dir, cache, augment, epochs=1)
    assert counted(epochs[0]) == want[0] and epochs[0]["decoded"] == 0


@pytest.mark.parametrize("killed, then, augment", [("tf", "tf", "plain"), ("tf", "loader", "rrc")])
def test_a_fill_killed_midway_leaves_nothing_trusted_and_the_next_run_fills(
    live, expected, killed, then, augment
):
    data_dir, cache = live
    want = expected[augment]
    child = start(Job(killed, data_dir, cache, augment, pause=True))
    try:
        assert child.line(timeout=TIMEOUT_S).strip() == "paused"  # mid-fill
    finally:
        stop(child)
    assert child.returncode == -signal.SIGKILL
    assert picture_files(cache) == []
    (left,) = temp_files(cache)  # its lock died with it
    epochs, stderr = read(then, data_dir, cache, augment)
    assert [counted(e) for e in epochs] == want and epochs[0]["decoded"] > 0
    assert not left.exists() and not temp_files(cache) and len(picture_files(cache)) == 1
    epochs, _ = read(killed, data_dir, cache, augment, epochs=1)
    assert counted(epochs[0]) == want[0] and epochs[0]["decoded"] == 0


# Without posix_fallocate (macOS), core.platform's fallback finds the too-small disk.
@pytest.mark.parametrize(
    "backend, augment, hide",
    [("tf", "plain", ()), ("tf", "plain", ("posix_fallocate",)), ("loader", "rrc", ())],
    ids=["tf-posix_fallocate", "tf-without", "loader"],
)
def test_a_disk_too_small_caches_in_memory_with_one_line(
    live, tmp_path, expected, backend, augment, hide
):
    data_dir, _ = live
    cache = tmp_path / "small"
    small_disk(cache)
    try:
        (cache / "filler").write_bytes(b"x" * 4096)  # the disk holds other files too
        epochs, stderr = run(Job(backend, data_dir, cache, augment), hide=hide)
        assert [counted(e) for e in epochs] == expected[augment]
        said = lines(stderr, "persist=True: no room for the ")
        assert len(said) == 1 and "caching it in memory for this run only" in said[0], stderr
        assert picture_files(cache) == [] and temp_files(cache) == []
        assert (cache / "filler").read_bytes() == b"x" * 4096
    finally:
        umount(cache)


@pytest.mark.parametrize("filler, server", [("zeroed tf plain", "tf"), ("zeroed tf rrc", "loader")])
def test_a_read_only_folder_is_served_without_writing(filled, tmp_path, expected, filler, server):
    augment = FILLS[filler][1]
    data_dir, team, _ = filled.copy(filler, tmp_path)
    mounted = tmp_path / "mounted"
    read_only_mount(team, mounted)
    try:
        before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in team.iterdir())
        epochs, stderr = read(server, data_dir, mounted, augment)
        assert [counted(e) for e in epochs] == expected[augment]
        assert [e["decoded"] for e in epochs] == [0, 0]
        assert not lines(stderr, "fast_tfds: persist=True"), stderr
        after = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in team.iterdir())
        assert after == before
    finally:
        umount(mounted)


def test_a_read_only_folder_without_the_file_is_read_without_persisting(live, tmp_path, expected):
    data_dir, _ = live
    empty = tmp_path / "empty-ro"
    (tmp_path / "empty").mkdir()
    read_only_mount(tmp_path / "empty", empty)
    try:
        epochs, stderr = read("tf", data_dir, empty, "plain")
        assert [counted(e) for e in epochs] == expected["plain"]
        said = lines(stderr, "cannot be written (Read-only file system)")
        assert len(said) == 1 and "without persisting" in said[0], stderr
        assert list(empty.iterdir()) == []
    finally:
        umount(empty)


@pytest.mark.parametrize("filler", ["zeroed tf plain", "zeroed loader rrc"])
def test_cache_list_and_clean_show_and_remove_the_file_never_one_in_use(
    filled, tmp_path, expected, filler
):
    augment = FILLS[filler][1]
    want = expected[augment]
    data_dir, cache, path = filled.copy(filler, tmp_path)
    size = path.stat().st_blocks * 512
    listed = fast_tfds_cache("list", cache)
    line = listed_line(listed, path)
    assert line.startswith("persistent ") and " cats_vs_dogs_fast/224/1.0.0 train " in line
    assert f"{size / 2**20:,.1f} MiB" in line and " ago " in line, line
    assert f"1 persistent cache(s), {size / 2**20:,.1f} MiB in {cache}" in listed

    reader = start(Job("tf", data_dir, cache, augment, pause=True))  # serves from the file
    try:
        assert reader.line(timeout=TIMEOUT_S).strip() == "paused"
        assert listed_line(fast_tfds_cache("list", cache), path).startswith("persistent, in use ")
        cleaned = fast_tfds_cache("clean", cache, "--all")
        assert f"kept     {path} (in use by a running process)" in cleaned, cleaned
        assert path.exists()
        printed = finish(reader)
    finally:
        stop(reader)
    assert [counted(e) for e in printed] == want and printed[-1]["decoded"] == 0
    cleaned = fast_tfds_cache("clean", cache, "--older-than", "1d")
    assert "Removed 0 persistent cache(s)" in cleaned and path.exists(), cleaned
    dry = fast_tfds_cache("clean", cache, "--all", "--dry-run")
    assert f"would remove {path} (--all, " in dry and path.exists(), dry
    cleaned = fast_tfds_cache("clean", cache, "--all")
    assert f"removed  {path} (--all, " in cleaned and not path.exists(), cleaned
    assert os.fspath(path) not in fast_tfds_cache("list", cache)
