"""Every fixed output size takes the block decoder, in every plan, and every example
arrives exactly once per epoch with its own label; the store goes to disk when it does
not fit the memory budget (the option, or a real cgroup limit), and a killed fill is
never trusted."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
from fast_tfds.cache import disk_rows, housekeeping
from fast_tfds.cache import store as stores
from fast_tfds.core import jpeg_blocks
from fast_tfds.read import plans
from fast_tfds.read.options import ReadOptions
from fast_tfds.read.split_reading import Reading
from tests import forks
from tests.children import TIMEOUT_S
from tests.helpers import REPO, child_env
from tests.pairs import Truth
from tests.read.reading import bytes_held, epoch, read, store_rows

SIZES = (160, 224, 384)
CONFIGS = ("224", "original")


@pytest.fixture(scope="module")
def truth(cats_data_dir):
    """{config: the train split as TFDS reads it}; at a size, the pixels an example must
    have are `decode_resized_into` of its stored JPEG (`Truth.check(..., size=)`)."""
    return {c: Truth.of(cats_data_dir, config=c) for c in CONFIGS}


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("cache", [True, False])
def test_every_size_is_read_in_blocks_with_every_example_once(
    cats_data_dir, truth, config, size, cache
):
    builder = tfds.builder("cats_vs_dogs_fast", config=config, data_dir=cats_data_dir)
    reading = Reading.start(builder, "train", ReadOptions(image_size=size, cache=cache))
    assert plans.choose_plan(reading) is (plans.Plan.CACHED if cache else plans.Plan.STREAM)
    ds = read(cats_data_dir, config=config, image_size=size, cache=cache)
    for _ in range(2):  # With the cache: the fill, then an epoch served from the store.
        truth[config].check(epoch(ds), size=size)


@pytest.mark.parametrize("size", [160, 384])
def test_the_per_example_paths_give_the_block_paths_pixels(cats_data_dir, truth, size):
    # A transform decodes one example at a time, with the same decoder: uncached, and
    # copied into the arena (the fill, then an epoch from it).
    per_example = [
        read(cats_data_dir, config="original", image_size=size, cache=False, transform=dict),
        read(cats_data_dir, config="original", image_size=size, transform=dict),
    ]
    for ds in per_example:
        for _ in range(2):
            truth["original"].check(epoch(ds), size=size)


@pytest.mark.parametrize("size", [160, 384])
@pytest.mark.parametrize("as_supervised", [True, False])
def test_a_file_cache_at_another_size_keeps_every_example(
    cats_data_dir, truth, tmp_path, size, as_supervised
):
    # The file cache keeps the examples decoded (and resized) one at a time. The
    # second epoch must come from its files: the build's shards are gone by then.
    source = tfds.builder("cats_vs_dogs_fast", config="original", data_dir=cats_data_dir)
    build = tmp_path / "build"
    shutil.copytree(source.data_dir, build)
    prefix = os.fspath(tmp_path / "cache")
    options = {"image_size": size, "transform": dict, "cache": prefix}
    reading = Reading.start(source, "train", ReadOptions(**options))
    assert plans.choose_plan(reading) is plans.Plan.PER_EXAMPLE
    ds = cats_vs_dogs_fast.as_fast_dataset(
        builder_dir=build, batch_size=8, dtype=tf.uint8, as_supervised=as_supervised, **options
    )
    first = epoch(ds)
    truth["original"].check(first, size=size)
    assert tf.io.gfile.glob(prefix + "*.index"), "the first epoch wrote no cache"
    shards = list(build.glob("*.tfrecord-*"))
    assert shards
    for shard in shards:
        shard.unlink()
    second = epoch(ds)
    truth["original"].check(second, size=size)
    assert first != second, "each epoch from the cache should be reshuffled"


def test_a_jpeg_the_block_decoder_rejects_arrives_by_the_fallback():
    # A PNG where a JPEG should be (a dataset built by other tools): libjpeg-turbo
    # rejects it, Pillow decodes it.
    import io

    import simplejpeg
    from PIL import Image

    pixels = np.random.default_rng(1).integers(0, 256, (40, 50, 3), np.uint8)
    png, rgb = io.BytesIO(), io.BytesIO()
    Image.fromarray(pixels).save(png, "PNG")
    Image.fromarray(pixels).save(rgb, "JPEG")
    with pytest.raises(ValueError):
        simplejpeg.decode_jpeg(png.getvalue(), colorspace="RGB")
    jpegs = np.array([rgb.getvalue(), png.getvalue(), rgb.getvalue()], dtype=object)
    rows = jpeg_blocks.decode_resized_block(jpegs, (32, 32, 3))
    with Image.open(io.BytesIO(png.getvalue())) as image:
        converted = np.asarray(image.convert("RGB"))
    expected = jpeg_blocks.resize_into(converted, np.empty((32, 32, 3), np.uint8))
    np.testing.assert_array_equal(rows[1], expected)  # In its own position.
    np.testing.assert_array_equal(rows[0], rows[2])
    assert not np.array_equal(rows[0], rows[1])


# -- the memory budget and the disk arena --------------------------------------------


def _arena_files(folder: Path) -> list[housekeeping.Entry]:
    return housekeeping.find(folder, disk_rows.ROWS)


def _random_read_mappings(folder: Path) -> list[bool]:
    """For each mapping of a file in `folder` in this process: marked MADV_RANDOM?"""
    smaps = Path("/proc/self/smaps").read_text()
    found = []
    for mapping in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", smaps):
        lines = mapping.splitlines()
        if lines and str(folder) in lines[0]:
            flags = next(line for line in lines if line.startswith("VmFlags:")).split()
            found.append("rr" in flags)
    return found


def _mapping_of(array: np.ndarray) -> str | None:
    """The file that backs `array`'s memory in this process, or None (anonymous memory)."""
    address = array.ctypes.data
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        start, end = (int(a, 16) for a in fields[0].split("-"))
        if start <= address < end:
            return fields[5] if len(fields) == 6 and not fields[5].startswith("[") else None
    raise AssertionError(f"no mapping holds address {address:#x}")


def test_a_cache_over_the_budget_goes_to_disk_with_every_example(
    cats_data_dir, truth, tmp_path, caplog
):
    folder = tmp_path / "rows"
    before = set(map(id, stores.live_caches()))
    ds = read(cats_data_dir, config="original", image_size=160, cache_budget=1, cache_dir=folder)
    (made,) = [c for c in stores.live_caches() if id(c) not in before]
    files = _arena_files(folder)  # Every column: the pixels, reference sizes and labels.
    assert files and all(f.in_use for f in files)
    assert sum(f.size for f in files) == made.nbytes
    assert str(folder) in _mapping_of(made.pictures.buffer)
    assert made.backing.reads_ahead
    assert "memory-mapped file in" in caplog.text and str(folder) in caplog.text
    assert _random_read_mappings(folder) == [False] * len(files)
    for _ in range(3):  # The fill, then two epochs from the file.
        truth["original"].check(epoch(ds), size=160)
    # Once filled, the rows are written back and marked for random reads (no read-around
    # of the device's whole read-ahead window at each fault).
    assert _random_read_mappings(folder) == [True] * len(files)
    truth["original"].check(store_rows(made), size=160)
    del ds, made
    import gc

    gc.collect()
    assert _arena_files(folder) == [], "the file goes with its dataset"


def test_a_cache_within_the_budget_stays_in_memory(cats_data_dir, truth, tmp_path, caplog):
    folder = tmp_path / "rows"
    before, held = set(map(id, stores.live_caches())), bytes_held()
    ds = read(cats_data_dir, image_size=160, cache_budget=1 << 40, cache_dir=folder)
    (made,) = [c for c in stores.live_caches() if id(c) not in before]
    n = len(truth["224"])
    # Each picture at 160 px, its reference size and its label (int64s).
    assert len(made.written) == n and bytes_held() - held == n * (160 * 160 * 3 + 3 * 8)
    for _ in range(2):  # The fill, then an epoch from the store.
        truth["224"].check(epoch(ds), size=160)
    assert made.filled and not made.backing.reads_ahead
    # Its pictures are anonymous memory of this process, not a mapped file.
    assert _mapping_of(made.pictures.buffer) is None
    assert "memory-mapped file" not in caplog.text
    assert not folder.exists() or _arena_files(folder) == []


def test_no_room_anywhere_fails_before_the_first_batch_with_one_line(cats_data_dir, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(disk_rows.NotEnoughRoom) as raised:
        read(cats_data_dir, image_size=160, cache_budget=1, cache_dir=blocker / "rows")
    message = str(raised.value)
    assert "\n" not in message
    for words in ("needs", "cache_budget=1", "cache_dir=", "cache=False"):
        assert words in message, message


_KILLED_FILL = textwrap.dedent(
    """
    import sys
    import cats_vs_dogs_fast, tensorflow as tf
    ds = cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=sys.argv[1], config="original", download_and_prepare=False,
        image_size=160, batch_size=2, dtype=tf.uint8, cache_budget=1, cache_dir=sys.argv[2])
    it = iter(ds)
    next(it)
    print("filling", flush=True)
    sys.stdin.readline()  # Killed here, mid-fill.
    """
)


def _line_within(stream, seconds: float) -> str:
    """The next line of a child's `stream`, or a failure if none comes in `seconds`: a
    stalled child fails the test instead of hanging it."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=seconds)
    except queue.Empty:
        raise AssertionError(f"the child wrote no line in {seconds} s") from None


def test_a_killed_fill_leaves_no_file_that_is_trusted(cats_data_dir, truth, tmp_path):
    folder = tmp_path / "rows"
    # A fork (`tests.forks`): what is checked is the files and locks a killed reader leaves.
    child = forks.Forked(
        [sys.executable, "-c", _KILLED_FILL, os.fspath(cats_data_dir), os.fspath(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(),
        cwd=REPO,
        text=True,
    )
    try:
        assert _line_within(child.stdout, TIMEOUT_S).strip() == "filling"
        left = _arena_files(folder)
        assert left and all(f.in_use for f in left)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        child.kill()
    left = _arena_files(folder)
    assert left and not any(f.in_use for f in left), "the killed process's locks went with it"
    ds = read(cats_data_dir, config="original", image_size=160, cache_budget=1, cache_dir=folder)
    files = _arena_files(folder)
    assert not {f.where for f in left} & {f.where for f in files}, "leftovers removed, not reused"
    assert files and all(f.in_use for f in files)
    for _ in range(2):
        truth["original"].check(epoch(ds), size=160)


# -- a real cgroup memory limit ----------------------------------------------------

_CGROUP_V1 = Path("/sys/fs/cgroup/memory")

_IN_A_CGROUP = textwrap.dedent(
    """
    import collections, hashlib, os, sys
    cgroup, data_dir, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    import tensorflow as tf, tensorflow_datasets as tfds, cats_vs_dogs_fast
    from fast_tfds.cache import disk_rows, housekeeping

    def read_file(name):
        with open(os.path.join(cgroup, name)) as f:
            return f.read()

    builder = tfds.builder("cats_vs_dogs_fast", config="original", data_dir=data_dir)
    count = builder.info.splits["train"].num_examples
    need = count * size * size * 3
    stat = dict(line.split() for line in read_file("memory.stat").splitlines())
    working_set = int(read_file("memory.usage_in_bytes")) - int(stat["total_inactive_file"])
    # Headroom of the arena's size, which the reader's default share of it (3/4) is too
    # little for, plus the batches in flight: a shuffled fill decodes each batch apart and
    # copies it to its examples' rows (batch 2: 8 such batches are 113 MB, and the
    # arena still goes to disk while the extra stays under a third of its size).
    batch_size, in_flight = 2, 8
    extra = in_flight * batch_size * size * size * 3
    assert extra < need / 3
    with open(os.path.join(cgroup, "memory.limit_in_bytes"), "w") as f:
        f.write(str(working_set + need + extra))
    ds = cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=data_dir, config="original", download_and_prepare=False,
        image_size=size, batch_size=batch_size, dtype=tf.uint8)
    on_disk = bool(housekeeping.find(disk_rows.default_folder(), disk_rows.ROWS))
    epochs = []
    for _ in range(2):
        pairs = collections.Counter()  # (pixels, label): each image with its own label.
        for images, labels in ds:
            digests = [hashlib.sha1(i.tobytes()).hexdigest() for i in images.numpy()]
            pairs.update(zip(digests, labels.numpy().tolist()))
        epochs.append(pairs)
    print(sum(epochs[0].values()) - count, epochs[0] == epochs[1], on_disk, need, flush=True)
    """
)


def _can_make_cgroups() -> str | None:
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "needs root on Linux to make a memory cgroup"
    if not (_CGROUP_V1 / "memory.limit_in_bytes").exists():
        return "needs the cgroup v1 memory controller at /sys/fs/cgroup/memory"
    probe = _CGROUP_V1 / f"fast_tfds_probe_{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as err:
        return f"cannot make a memory cgroup here ({err})"
    return None


@pytest.mark.skipif(_can_make_cgroups() is not None, reason=str(_can_make_cgroups()))
def test_a_cgroup_limit_below_the_arena_sends_it_to_disk(cats_data_dir, tmp_path):
    cgroup = _CGROUP_V1 / f"fast_tfds_test_{uuid.uuid4().hex[:8]}"
    cgroup.mkdir()
    size = 1536  # A 7 MiB row: 56 examples make an arena larger than TensorFlow's own needs.
    try:
        done = subprocess.run(
            [sys.executable, "-c", _IN_A_CGROUP, str(cgroup), os.fspath(cats_data_dir), str(size)],
            capture_output=True,
            text=True,
            env={**child_env(), "FAST_TFDS_CACHE_DIR": os.fspath(tmp_path / "rows")},
            cwd=REPO,
            timeout=300,
        )
    finally:
        for _ in range(50):  # The child's exit frees the cgroup a moment later.
            try:
                cgroup.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    assert done.returncode == 0, done.stderr[-3000:]
    missing, same, on_disk, _ = done.stdout.split()
    assert (int(missing), same, on_disk) == (0, "True", "True"), done.stdout
    assert "memory limit of cgroup" in done.stderr and "memory-mapped file" in done.stderr
