"""A decoded cache that outlives the process (`persist=True`), in both back ends: its key,
and opening or filling its file (`persistent_format` is the file itself).

The picture store's file holds the pictures at the cache resolution and each example's
kept features (its label), written once and mapped by every later and concurrent run, of
either back end, which then serves from its first epoch.

The file's columns:

    pictures           uint8, the store's buffer (`pictures.PictureCache`), one row per byte
    reference_heights  int64 per slot: the size windows are drawn in (stored picture,
    reference_widths   or the hook's window of it), so a served run needs no header pass
    feature/<name>     one row per slot, each kept feature (fixed shape, numeric)

The key is the same from the tf.data reader and the Grain loader for the same read
(`key`): what the pixels and features are made from, never the augmentation (the
cache holds unaugmented pictures, so a train and an eval recipe of one cache
resolution share a file). The two back ends read different shard files (TFRecord and
ArrayRecord files of one build), so the key fingerprints every shard file of the split
in the version folder, in every format; a slot holds the same example in both. Shards
in a bucket (gs://) are fingerprinted by their objects' metadata (`remote.object_stores`), so
a local file also serves a build read from a bucket.

The first run fills the cache as always (the picture store, or the fallback's arena of
examples), but its columns are a file in the cache folder (`persistent_format` has the
layout); once every row is written, the file is written back, its data checksum
verified, its header written, and only then renamed to its final name. Every later
run, and every concurrent one, maps that file and serves from its first epoch: nothing
is decoded and the shard files are not opened. The page cache holds one copy of the
rows for all of them (each maps the file copy-on-write, and no one writes).

The file's name is a digest of its key, and its header holds the key itself: what the
rows were made from (dataset and version, split and slice, shard files with their sizes
and modification times, or a bucket's objects with their sizes and generations, output
size and dtype, the decoder's version, the features).
Opening only compares the key (`key` makes it), so a file made from other inputs is
never served. The columns' layout is planned only
when this process fills the file: the columns its cache asks for (`FileFill.columns`).

Safety, in the order things can go wrong:
- Two processes filling the same key: one takes the key's lock file (`flock`), the
  other caches in memory for its run and says so.
- A fill that dies (killed, an exception, a dropped iterator) leaves only a temporary
  file, never trusted; its `flock` dies with its process, and the next run in the
  folder (or `fast-tfds cache clean`) removes it.
- Disk full: the file's blocks are reserved (`posix_fallocate`) before the first row is
  written, so a full disk is found before the fill, never as a crash in the middle
  of it: the run caches in memory instead, with one line.
- A truncated file, a damaged header or another key: found when opening, one line,
  filled again.
- A read-only folder (a team's shared cache): its files are served; a missing or bad
  one is read without persisting, with one line.

No TensorFlow: the Grain loader can use the same files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import mmap
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from absl import logging

from fast_tfds.cache import disk_rows, fingerprint, housekeeping, memory, placement
from fast_tfds.cache import persistent_format as fmt
from fast_tfds.cache import pictures as store
from fast_tfds.cache.memory import Backing
from fast_tfds.cache.pictures import FEATURE, HEIGHTS, WIDTHS
from fast_tfds.cache.remote import object_stores
from fast_tfds.core import jpeg_blocks, platform


@dataclasses.dataclass(frozen=True)
class Origin:
    """What a read's cache is made from, as both back ends name it.

    Attributes:
      dataset: the full name, name/config/version.
      split: the split or slice as asked ('train[:80%]'); slots are numbered in it.
      shard_files: the split's shard files as one back end reads them (TFRecord or
        ArrayRecord): their folder and names lead to the files of every format.
      hook: what the dataset's hook changes in pixels or targets
        (`DatasetHook.persist_identity`), {} for nothing; None: the targets are more
        than the label, which a persistent file does not keep.
    """

    dataset: str
    split: str
    shard_files: tuple[str, ...]
    hook: dict | None


def example_ranges(index) -> list[list[int]]:
    """The slot -> example mapping `index` as [start, stop, step] runs: [[0, n, 1]] for a
    whole split, [[k, k + m * c, c]] for every c-th example from k; the same list for the
    same mapping whichever back end made it."""
    index = np.asarray(index, np.int64).reshape(-1)
    steps = np.diff(index)
    changes = np.flatnonzero(steps[1:] != steps[:-1]) + 1  # where a new step begins
    runs, i, n = [], 0, len(index)
    while i < n:
        step = int(steps[i]) if i < n - 1 else 1  # The last example alone: a run of one.
        k = np.searchsorted(changes, i, side="right")
        last = int(changes[k]) if k < len(changes) else n - 1
        runs.append([int(index[i]), int(index[last]) + step, step])
        i = last + 1
    return runs


# Why a persistent cache cannot be keyed (`split_files`).
_NOT_KEYED = "fast_tfds: persist=True: %s: caching in memory only."


def split_files(shard_files: Sequence[str], what: str) -> list[list] | None:
    """The fingerprints (`fingerprint.in_folder`) of every file of the split(s) of
    `shard_files` in their folder, in every format (`<dataset>-<split>.<format>-<shard>`).
    None when they cannot be fingerprinted: one log line says why, of `what` (the dataset's
    name), and that the cache stays in memory.
    """
    stems: dict[str, set[str]] = {}
    for filename in shard_files:
        folder, name = os.path.split(os.fspath(filename))
        stems.setdefault(folder, set()).add(name.split(".", 1)[0] + ".")
    found: list[list] = []
    for folder, starts in sorted(stems.items()):
        starts = tuple(sorted(starts))
        try:
            files = fingerprint.in_folder(folder, lambda name, s=starts: name.startswith(s))
        except object_stores.NotKeyed as why:
            logging.warning(_NOT_KEYED, f"the shard files of {what} are in a bucket, and {why}")
            return None
        if not files and not object_stores.is_remote(folder):
            logging.warning(
                _NOT_KEYED,
                f"the shard files of {what} are not local files ({folder or '.'}), so a "
                "persistent cache could not tell when they change",
            )
            return None
        found += files
    return found or None


def not_kept(features: dict[str, tuple]) -> str | None:
    """Why `features` ({name: (shape, dtype)}) cannot go in a persistent file, or None."""
    for name, (shape, dtype) in sorted(features.items()):
        if np.dtype(dtype).kind not in "biuf" or None in tuple(shape):
            return f"{name!r} is not a fixed-size number"
    return None


KIND = "pictures"  # What every persistent file's key says it holds.


def key(
    origin: Origin,
    slot_examples,
    output_size: tuple[int, int] | None,
    shorter_side: int | None,
    features: dict[str, tuple],
    *,
    pictures: bool = True,
    decoder: str | None = None,
) -> dict | None:
    """The file's key, or None when its shard files cannot be fingerprinted (one log line).

    The one key of every persistent cache, of both back ends, plain and augmented: what
    the stored pictures and kept features are made from. `shorter_side` None is the
    layout without a crop (each picture exactly the output size: fixed rows), which a
    plain read, an `Augment(crop=None)` read and the loader's plain cache share; any
    crop of one cache resolution shares one file. `pictures` False: a store of decoded
    examples only (every column a feature, the images among them: a transform's output,
    or a tf.data service's). `decoder`: what decoded the pictures, by default our
    decoder with its version, read when called: a new decoder never serves old pixels.
    """
    shards = split_files(origin.shard_files, what=origin.dataset)
    if shards is None:
        return None
    made = {
        "kind": KIND,
        "dataset": origin.dataset,
        "split": origin.split,
        "examples": example_ranges(slot_examples),
        "shards": shards,
        "image_size": None if output_size is None else [int(s) for s in output_size],
        "shorter_side": None if shorter_side is None else int(shorter_side),
        "features": {
            name: [[int(s) for s in shape], np.dtype(dtype).str]
            for name, (shape, dtype) in sorted(features.items())
        },
        "hook": origin.hook,
        "decoder": decoder or f"fast_tfds.core.jpeg_blocks {jpeg_blocks.DECODER_VERSION}",
    }
    if not pictures:  # Only then: the keys of picture stores stay those of before.
        made["pictures"] = False
    return made


@dataclasses.dataclass
class Stored:
    """A persistent file at `path`, as opening found it: its `backing`, a `ServedFile`
    (every column written: `filled`) or a `FileFill` to fill, or None where this run
    caches as without persist (`why`: why a process that only reads is not served, in a
    few words); of a picture store, the picture column's layout, from the reference sizes
    per slot (None for the arena's rows)."""

    path: Path
    backing: Backing | None = None
    filled: bool = False
    why: str = ""
    pictures: store.PictureSizes | None = None


def open_file(
    origin: Origin,
    slot_examples,
    *,
    output_size: tuple[int, int] | None,
    shorter_side: int | None = None,
    features: dict[str, tuple],
    folder: str | os.PathLike | None,
    sizes: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None,
    budget: int | None = None,
    what: str | None = None,
    pictures: bool = True,
    decoder: str | None = None,
) -> tuple[Stored | None, str]:
    """The cache of `slot_examples` from its persistent file in `folder`, or a new file to
    fill: (stored, ""); (None, why) when this run caches as without persist (one log line
    said why: strings or nested targets, shards not local, another process filling, a
    read-only folder).

    A picture store's file (`pictures`): `sizes()` gives the reference (heights, widths)
    per slot; it runs only to fill. `sizes` None: only a complete file is served, never a
    fill, and nothing is logged (a process that only reads); `why` then says why not, in
    a few words. An arena of examples' rows (`pictures` False: decoded elsewhere, a
    transform or the tf.data service; `decoder` says which), each column of `features`
    ({name: (shape, dtype)}) a kept feature, are always filled when not served, and
    fall back to memory without a line of their own (the reader said why, where it
    could not keep them).
    `folder` None: the default cache folder (`open_or_plan`).
    """
    # Why this read cannot be kept, said in one line by a read that would fill a picture
    # store's file (an arena of examples falls back to memory as without persist).
    say = what is not None and pictures
    if origin.hook is None:
        if say:
            logging.warning(
                "fast_tfds: persist=True: the targets of %s are more than the label, which a "
                "persistent cache does not keep: caching %s in memory for this run only.",
                what,
                what,
            )
        return None, "cannot hold targets beyond the label"
    reason = not_kept(features)
    if reason is not None:
        if say:
            logging.warning(
                "fast_tfds: persist=True: %s, so the examples of %s cannot be kept in a "
                "persistent cache: cached in memory for this run only (as_supervised=True "
                "keeps only the label).",
                reason,
                what,
            )
        return None, f"cannot hold these features ({reason})"
    made = key(
        origin,
        slot_examples,
        output_size,
        shorter_side,
        features,
        pictures=pictures,
        decoder=decoder,
    )
    if made is None:
        return None, "cannot be keyed (the shard files are not local)"
    n = len(np.asarray(slot_examples).reshape(-1))
    feature_bytes = n * sum(
        int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        for shape, dtype in features.values()
    )
    over = not placement.fits_in_memory(feature_bytes, budget)
    planned: dict[str, np.ndarray] = {}

    def plan():
        if not pictures:
            return n, over
        heights, widths = (np.asarray(a, np.int64).reshape(-1) for a in sizes())
        nbytes = store.PictureSizes(heights, widths, output_size, shorter_side).nbytes
        planned.update({HEIGHTS: heights, WIDTHS: widths})
        return n, not placement.fits_in_memory(nbytes + feature_bytes, budget)

    opened = open_or_plan(
        folder,
        made,
        None if pictures and sizes is None else plan,
        what=what,
        # Served rows of an arena over the budget are asked for ahead; a served picture
        # store's pictures are not.
        reads_ahead=over and not pictures,
    )
    if opened.backing is None:
        return None, opened.why and f"{opened.path.name} {opened.why}"
    if opened.filled and any(FEATURE + name not in opened.backing.rows for name in features):
        # The key names the layout; a mismatch is a damaged file.
        return None, f"{opened.path.name} lacks a column its key names"
    if pictures:
        found = opened.backing.rows if opened.filled else planned
        heights, widths = found[HEIGHTS], found[WIDTHS]
        opened.pictures = store.PictureSizes(heights, widths, output_size, shorter_side)
    return opened, ""


# -- the key and the file's name ---------------------------------------------------


def key_digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def file_name(key: dict) -> str:
    """`<dataset>.<split>.<16 hex digits of the key>.arena`: readable, and unique per key."""
    readable = housekeeping.readable_name(str(key.get("dataset", "dataset")), key.get("split", ""))
    return f"{readable}.{key_digest(key)[:16]}{fmt.SUFFIX}"


# -- open or fill ------------------------------------------------------------------


def open_or_plan(
    folder: str | os.PathLike | None,
    key: dict,
    plan: Callable[[], tuple[int, bool]] | None,
    *,
    what: str | None,
    reads_ahead: bool = False,
) -> Stored:
    """The persistent file of `key` in `folder`: served if a good file is there, else
    filled into a new one if this process may, else neither (one log line says why).

    A good file of `key` is served whatever its columns: the key names everything they
    were made from (`reads_ahead`: its rows exceed the memory budget). `plan()` runs only
    when this process fills the file, holding the key's lock (the picture store's layout
    takes a pass over the JPEG headers), and gives (num_examples, read_ahead):
    `read_ahead`: the rows exceed the memory budget, so served epochs ask for their rows
    ahead (as `disk_rows` does). The file's columns are those the cache asks its backing
    for (`FileFill.columns`). The data checksum is made once every row is written, so a
    fill may write in any order.
    `folder` None: the default cache folder (`disk_rows.default_folder`). `plan` None:
    never a fill, nothing logged (a process that only reads: the loader's workers)."""
    key = json.loads(json.dumps(key))
    folder = Path(disk_rows.default_folder() if folder is None else folder)
    path = folder / file_name(key)
    rows, bad, size = _open_checked(path, key)
    if rows is not None:
        if plan is not None:
            logging.info(
                "fast_tfds: serving %s from the persistent cache %s (%s)",
                what,
                path,
                memory.bytes_text(size),
            )
        return Stored(path, ServedFile(rows, reads_ahead=reads_ahead), filled=True)
    if plan is None:
        return Stored(path, why=bad or "is not there")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock_fd = housekeeping.take_lock(fmt.lock_path(path))
    except OSError as err:
        logging.warning(
            "fast_tfds: persist=True: %s %s, and %s cannot be written (%s): reading %s "
            "without persisting its cache.",
            path.name,
            bad or "is not there",
            folder,
            err.strerror or err,
            what,
        )
        return Stored(path)
    if lock_fd is None:
        logging.warning(
            "fast_tfds: persist=True: another process (%s) is writing the persistent "
            "cache %s; this run caches %s in memory.",
            housekeeping.holder(fmt.lock_path(path)) or "pid ?",
            path,
            what,
        )
        return Stored(path)
    try:
        housekeeping.remove_leftovers(folder, fmt.PERSISTENT)
        # Another process may have finished it while this one waited for the lock.
        rows, bad, _ = _open_checked(path, key)
        if rows is not None:
            os.close(lock_fd)
            return Stored(path, ServedFile(rows, reads_ahead=reads_ahead), filled=True)
        if bad is not None:
            logging.warning("fast_tfds: the persistent cache %s %s: filling it again.", path, bad)
            path.unlink(missing_ok=True)
        housekeeping.record_holder(lock_fd)
        num_examples, read_ahead = plan()
    except BaseException:
        os.close(lock_fd)
        raise
    return Stored(path, FileFill(path, key, num_examples, lock_fd, what, reads_ahead=read_ahead))


def _open_checked(path: Path, key: dict) -> tuple[dict[str, np.ndarray] | None, str | None, int]:
    """(rows, None, size) of a good file; (None, why, 0) of a bad one; (None, None, 0) if
    absent. Its columns are whatever the key made them."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None, None, 0
    except OSError as err:
        return None, f"cannot be opened ({err.strerror or err})", 0
    try:
        # Shared: `clean` takes it exclusively, so a file in use is never removed.
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        found = fmt.read_header(fd).layout
        if found.file_size != size:
            raise fmt.BadFile(f"is truncated ({size} of {found.file_size} bytes)")
        if found.key != key:
            raise fmt.BadFile("was made from other inputs (its key differs)")
        # Copy-on-write: the arrays are writable for numpy and TensorFlow, and no page is
        # ever written, so every process shares the page cache's one copy.
        region = mmap.mmap(fd, size, access=mmap.ACCESS_COPY)
    except fmt.BadFile as err:
        os.close(fd)
        why = str(err)
        return None, why if why.startswith(("is ", "was ")) else f"cannot be trusted: {why}", 0
    except (OSError, ValueError) as err:
        os.close(fd)
        return None, f"cannot be read ({err})", 0
    weakref.finalize(region, os.close, fd)
    # The last use, for `fast-tfds cache list|clean --older-than` (not in a read-only folder).
    with contextlib.suppress(OSError):
        os.utime(path, (time.time(), os.stat(path).st_mtime))
    return _views(region, found), None, size


def _views(region: mmap.mmap, layout: fmt.Layout) -> dict[str, np.ndarray]:
    arrays = {}
    for c in layout.columns:
        count = c.rows * int(np.prod(c.shape, dtype=np.int64))
        array = np.frombuffer(region, c.dtype, count=count, offset=c.offset)
        arrays[c.name] = array.reshape((c.rows, *c.shape))
    return arrays


# -- filling a new file ------------------------------------------------------------


# The threads writing persistent files out (`FileFill.filled`), for `finish_writing`.
_WRITING: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def finish_writing() -> None:
    """Waits until every persistent file this process started writing out is written.

    Called by the back ends' exit hooks (`read.exit_iterators.close_all`,
    `loader.pipeline`'s), after they have stopped their pipelines. The interpreter joins
    its non-daemon threads before the `atexit` functions run, so a writer that a
    pipeline's last calls started during exit (a first epoch's fill that completes while
    its prefetch buffers fill) is joined only here. Left to finalization, it was ended
    where it next took the GIL: mid-write (no file persisted), or, inside the checksum's
    `cv2.sumElems`, from a C++ destructor, and the process died of SIGABRT (`terminate
    called without an active exception`)."""
    for thread in list(_WRITING):
        thread.join()


class FileFill(memory.Backing):
    """The backing of a cache that fills a new persistent file: its rows in a new
    temporary file, made the persistent cache once the fill has written every row.

    Holds the key's lock from its creation until the file is renamed (or given up).
    If the disk lacks room, or the file cannot be made, the cache gets anonymous
    memory instead (one log line) and nothing is persisted. The data checksum is made
    of the rows once every one is written (a fill writes them in any order). The file's
    `layout` (its header: `key`, `num_examples` and the columns) is planned from the
    columns the cache asks for (`columns`).

    Rows within the memory budget (`reads_ahead` False): the fill writes anonymous
    memory, exactly as the memory arena does, while the file's blocks are reserved; then
    the writing thread writes the rows to the file, reads them back to verify them, and
    once the file is in place the cache serves from its mapping (`replace`), so this
    process too shares the page cache's one copy. Rows over the budget (`reads_ahead`):
    the fill writes the file's mapping, and served epochs read ahead.
    """

    def __init__(
        self, path: Path, key: dict, num_examples: int, lock_fd: int, what: str, *, reads_ahead
    ):
        self.path = path
        self.key = key
        self.num_examples = num_examples
        self.layout: fmt.Layout | None = None  # Planned when the cache asks for its columns.
        self.what = what
        self.reads_ahead = reads_ahead
        self._lock = threading.Lock()
        # What an unfinished fill holds, let go once its file is in place or given up:
        # the key's lock, and its temporary file (gone once renamed: then nothing to remove).
        self._held = contextlib.ExitStack()
        self._held.callback(_close_fd, lock_fd)
        self._temp: Path | None = None
        self._current: dict[str, np.ndarray] | None = None  # Every column.
        self._fd: int | None = None
        self._region: mmap.mmap | None = None
        self.persisted = False
        self.writing: threading.Thread | None = None  # Writing the filled file out.
        # Its cache dropped before the fill ended: the temporary file and the lock go.
        weakref.finalize(self, self._held.close)

    def columns(self, wanted: memory.Wanted) -> dict[str, np.ndarray]:
        """The cache's arrays over a new temporary file laid out as `wanted` (or memory, when
        there is no room for one); asked once, by the cache this fill backs."""
        self.layout = fmt.Layout.plan(self.key, self.num_examples, wanted)
        with self._lock:
            try:
                self._current = self._new_file()
            except OSError as err:
                self._give_up()
                logging.warning(
                    "fast_tfds: persist=True: no room for the %s cache of %s in %s (%s): "
                    "caching it in memory for this run only.",
                    memory.bytes_text(self.layout.file_size),
                    self.what,
                    self.path.parent,
                    err.strerror or err,
                )
                return memory.IN_MEMORY.columns(wanted)
        logging.warning(
            "fast_tfds: persist=True: writing the decoded cache of %s (%s on disk) to "
            "%s; later runs serve from it. See or remove it with `fast-tfds cache "
            "list|clean %s`.",
            self.what,
            memory.bytes_text(self.layout.file_size),
            self.path,
            self.path.parent,
        )
        return self._current

    def filled(self, arrays: dict[str, np.ndarray], replace: memory.Replace) -> None:
        """Every row is written: the file is written back, verified, given its header
        and renamed in a thread of its own, so the epoch that filled it ends without
        waiting for the disk (the rows are served from the mapping meanwhile). The
        thread is not a daemon: a process that ends normally finishes the file first."""
        if self._fd is None:
            return
        writing = threading.Thread(
            target=self._finish, args=(arrays, replace), name="fast_tfds persist", daemon=False
        )
        writing.start()
        # Published once started: another thread that finds it (a reader whose last batch
        # came before the fill's last block was told) can join it.
        _WRITING.add(writing)
        self.writing = writing

    def _new_file(self) -> dict[str, np.ndarray]:
        """A new temporary file beside the final one, locked and with every block
        reserved (its descriptor in `_fd`); the arrays the fill writes (every column): the
        file's mapping, or memory within the budget."""
        self._temp = self.path.with_name(
            f"{self.path.name}{fmt.TEMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        )
        self._fd = os.open(self._temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        self._held.callback(self._temp.unlink, missing_ok=True)
        # Held while the fill runs: a temporary file whose lock is free is a leftover.
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # Every block reserved now: a full disk is an error here, not a SIGBUS mid-fill.
        platform.preallocate(self._fd, self.layout.file_size)
        if not self.reads_ahead:
            return {
                c.name: memory.allocate_in_memory((c.rows, *c.shape), c.dtype)
                for c in self.layout.columns
            }
        self._region = mmap.mmap(self._fd, self.layout.file_size, flags=mmap.MAP_SHARED)
        return _views(self._region, self.layout)

    def _finish(self, given: dict[str, np.ndarray], replace: memory.Replace) -> None:
        """Makes the filled rows (every column of the file) the persistent file: rows in
        memory are written to it and read back to verify them, and then served from the
        file's mapping (`replace`); a mapping's rows are written back once, so later
        epochs find clean pages, which the kernel can drop cheaply under a memory limit
        (and an I/O error shows here, not later). A failure leaves the rows served from
        this process and nothing persisted (one line)."""
        # Background work: the epoch that filled the store goes on serving it (a shuffled
        # first epoch fills, then serves), and its batches come first. Summing and writing
        # a split's pixels takes seconds of CPU on a busy machine.
        platform.lower_this_threads_priority()
        with self._lock:
            fd, layout, arrays = self._fd, self.layout, self._current
            if fd is None:  # Given up meanwhile.
                return
            try:
                sums = {name: fmt.column_checksum(a) for name, a in arrays.items()}
                if self.reads_ahead:
                    self._region.flush()
                else:  # A buffered file writes all of each column, in as many calls as it takes.
                    with open(fd, "wb", closefd=False) as file:
                        for c in layout.columns:
                            file.seek(c.offset)
                            file.write(np.ascontiguousarray(arrays[c.name]))
                os.pwrite(fd, layout.header(sums), 0)
                os.fsync(fd)
                check = fmt.read_header(fd)
                if check.checksums != sums or check.layout.key != layout.key:
                    raise fmt.BadFile("its header did not read back as written")
                if not self.reads_ahead:  # Read back through the mapping that serves them.
                    if os.fstat(fd).st_size < layout.file_size:
                        raise fmt.BadFile("shorter than its header says")
                    region = mmap.mmap(fd, layout.file_size, access=mmap.ACCESS_COPY)
                    views = _views(region, layout)
                    for c in layout.columns:
                        if fmt.column_checksum(views[c.name]) != sums[c.name]:
                            raise fmt.BadFile(f"its {c.name} rows did not read back as written")
                os.rename(self._temp, self.path)
                _fsync_folder(self.path.parent)
                # From now on a reader like any other: shared, so `clean` leaves it alone.
                fcntl.flock(fd, fcntl.LOCK_SH)
                self.persisted = True
                if self.reads_ahead:
                    memory.read_randomly(self._region)
                    return
                self._region = region
                replace(given, views)
                # The filled memory goes once nothing else holds it: the mapping serves now.
                self._current = None
            except (OSError, fmt.BadFile) as err:
                logging.warning(
                    "fast_tfds: persist=True: the cache of %s could not be written to %s "
                    "(%s): it stays in memory for this run only.",
                    self.what,
                    self.path,
                    err,
                )
            finally:
                # The key's lock, and the temporary file unless it is the cache now.
                self._held.close()

    def _give_up(self) -> None:
        """Forgets the file: the temporary one is removed, and the key's lock goes (a
        mapping of it keeps its rows readable for those still held)."""
        self._held.close()
        if self._region is not None and self._fd is not None:
            # The descriptor (and its lock) goes with the last view of the rows.
            weakref.finalize(self._region, _close_fd, self._fd)
        elif self._fd is not None:
            _close_fd(self._fd)
        self._region = self._fd = self._current = None

    def close(self) -> None:
        """Gives up an unfinished fill: its temporary file goes, and the key's lock."""
        with self._lock:
            if not self.persisted:
                self._give_up()


class ServedFile(memory.Backing):
    """The backing of a cache served from a complete persistent file: its `rows` (by the
    file's column names, which the cache asks for), read ahead when they exceed the
    memory budget (`reads_ahead`)."""

    def __init__(self, rows: dict[str, np.ndarray], *, reads_ahead: bool = False):
        self.rows = rows
        self.reads_ahead = reads_ahead

    def columns(self, wanted: memory.Wanted) -> dict[str, np.ndarray]:
        """The file's columns `wanted` (shapes as tuples, dtypes as np.dtype: as `Store`
        asks); a ValueError if they are not of that layout."""
        given = {name: self.rows[name] for name in wanted}
        found = {k: (a.shape, a.dtype) for k, a in given.items()}
        if found != wanted:
            raise ValueError(f"the persistent file holds {found}, not {wanted}")
        return given

    def filled(self, arrays: dict[str, np.ndarray], replace: memory.Replace) -> None:
        pass  # Complete from the start.


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    """Makes the rename durable; a folder that cannot be synced is left as it is."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
