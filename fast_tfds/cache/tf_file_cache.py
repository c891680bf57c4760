"""The file cache of `read_split(cache='path')`, safe against stale, killed and concurrent runs.

TensorFlow's `Dataset.cache(filename)` alone has three traps:

- It is keyed by the file name only: change the split, the size or the crop,
  or rebuild the dataset, and the old cache is served silently.
- A process killed mid-epoch leaves `<prefix>_0.lockfile` behind, and every
  later run fails with AlreadyExistsError until someone deletes it.
- Two processes on one prefix: the second fails with AlreadyExistsError, and
  when its iterator is destroyed it deletes the first one's partial files, so
  the first fails too (NotFoundError).

So the files get a name of their own for what is cached (`tf_file_key`), and a
process writes them only while it holds an OS lock on `<prefix>.lock`
(`fcntl.flock`, released by the kernel when the process dies, so a lock is never
stale). The holder removes what a dead writer left; another process reads a
complete cache (TensorFlow only writes `<prefix>.index` at the end of a full
pass) or, while none is complete, reads without one.

Within one process the holder may iterate the dataset more than once at a time
(two `iter(ds)`, or two datasets on the same prefix); TensorFlow would fail
the second writer with AlreadyExistsError, and its iterator's destructor would
delete the first one's partial files. So each iteration decides when it starts
(`_one_writer_at_a_time`): it reads a complete cache, writes one if no other
iterator of the process is writing, or else reads without the cache, with a
warning.

A cache that cannot be written is skipped with a warning, never an error: a
read-only folder, or too little space for it (free disk space or the process's
file size limit, against the size of what is cached, estimated from the
element shapes or, for images of any size, the shard files' sizes as a floor).
A disk that fills up while the cache is being written still fails the epoch
with TensorFlow's "No space left on device" naming the cache file.

`tf_file_listing` lists and removes caches (`fast-tfds cache list|clean`); the lock
file holds what the cache is made from, so a cache of a rebuilt dataset can be
told apart.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf
from absl import logging

from fast_tfds.cache import tf_file_listing
from fast_tfds.cache.tf_file_key import cache_prefix

try:
    import fcntl
except ImportError:  # Windows: no flock; TensorFlow's own lockfile is all there is.
    fcntl = None
try:
    import resource
except ImportError:  # Windows: no file size limit to read.
    resource = None

# Open lock files of the prefixes this process writes, kept open (and so
# locked) until the process ends: a dataset may be iterated again at any time.
_held_locks: dict[str, int] = {}

# What TensorFlow's cache writer leaves behind when it is killed:
# '<prefix>_0.lockfile', '<prefix>_0.data-00000-of-00001.tempstate123', and
# the per-shard index and data files of an unfinished pass.
_WRITER_LEFTOVERS = re.compile(r"_\d+\.(lockfile|index|data-\d+-of-\d+(\.tempstate\d+)?)")

# When an iteration of this process was last let write each prefix. TF
# creates `<prefix>_0.lockfile` at the writer's first element, milliseconds
# later; an iteration starting within _START_S of that waits to see it.
_writing_since: dict[str, float] = {}
_writing_lock = threading.Lock()
_START_S = 1.0
# Room left beside the estimate (TensorFlow's index, the filesystem's blocks).
_SPACE_MARGIN = 1.05


def cache_in_files(
    ds: tf.data.Dataset,
    cache: str | os.PathLike,
    *,
    dataset_name: str,
    split: str,
    instructions: Sequence[Any],
    transform: Callable | None = None,
) -> tf.data.Dataset:
    """`ds.cache()` in files under `cache` (a path prefix or an existing folder), safely.

    Returns `ds` cached in files of its own name, or `ds` itself (no cache, with
    a warning) while another process is writing that cache or when it cannot be
    written (a read-only folder, too little space).
    """
    prefix = cache_prefix(
        cache,
        dataset_name=dataset_name,
        split=split,
        instructions=instructions,
        element_spec=ds.element_spec,
        transform=transform,
    )
    if fcntl is None or "://" in prefix:  # Remote files (gs://) cannot be flock-ed.
        return ds.cache(prefix)
    where = os.fspath(cache)
    try:
        owner = _own(prefix, dataset_name, split, instructions)
    except OSError as err:  # A read-only folder: a complete cache can still be read.
        if tf.io.gfile.exists(prefix + ".index"):
            return ds.cache(prefix)
        logging.warning(
            "cache=%s: cannot write %s.lock (%s); reading without the cache "
            "(decoding every epoch).",
            where,
            prefix,
            err,
        )
        return ds
    if tf.io.gfile.exists(prefix + ".index"):
        return ds.cache(prefix)  # Complete: reading it alongside its writer is safe.
    if not owner:
        logging.warning(
            "cache=%s: another process (%s) is writing %s; this dataset reads "
            "without the cache (decoding every epoch) to leave it intact.",
            where,
            tf_file_listing.holder(prefix + ".lock") or "pid ?",
            prefix,
        )
        return ds
    shortfall = _space_shortfall(prefix, ds.element_spec, instructions)
    if shortfall:
        logging.warning(
            "cache=%s: not enough room for the cache (%s); reading without the cache "
            "(decoding every epoch).",
            where,
            shortfall,
        )
        return ds
    return _one_writer_at_a_time(ds, prefix)


def _one_writer_at_a_time(ds: tf.data.Dataset, prefix: str) -> tf.data.Dataset:
    """`ds.cache(prefix)`, or `ds` itself for an iteration that starts while another
    iterator of this process is writing the cache (decided per iteration)."""
    cached = ds.cache(prefix)

    def may_use_cache() -> bool:
        with _writing_lock:
            while True:
                if os.path.exists(prefix + ".index"):
                    return True  # Complete: read it.
                if os.path.exists(prefix + "_0.lockfile"):
                    logging.warning(
                        "cache: another iteration in this process is writing %s; this one "
                        "reads without the cache (decoding).",
                        prefix,
                    )
                    return False
                # An iteration let write just before may not have created TF's
                # lockfile yet (it does at its first element, at once): wait for
                # it, or for long enough to know it has ended.
                if time.monotonic() - _writing_since.get(prefix, -math.inf) >= _START_S:
                    _writing_since[prefix] = time.monotonic()
                    return True
                time.sleep(0.01)

    def choose(_):
        use_cache = tf.py_function(may_use_cache, [], tf.bool)
        use_cache.set_shape([])
        return tf.cond(use_cache, lambda: cached, lambda: ds)

    chosen = tf.data.Dataset.from_tensors(0).flat_map(choose)
    cardinality = int(ds.cardinality())
    if cardinality >= 0:
        chosen = chosen.apply(tf.data.experimental.assert_cardinality(cardinality))
    return chosen


def _space_shortfall(prefix: str, element_spec: Any, instructions: Sequence[Any]) -> str | None:
    """Why the cache would not fit, or None if it would (as far as can be told)."""
    examples = sum(fi.take for fi in instructions)
    per_example, exact = _element_bytes(element_spec)
    need = examples * per_example
    if not exact:  # Images of any size: at least the JPEG bytes they are decoded from.
        need = max(need, sum(_read_bytes(fi) for fi in instructions))
    need = int(need * _SPACE_MARGIN)
    about = "about" if exact else "at least"
    if resource is not None:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY and limit < need:
            return (
                f"it needs {about} {need / 2**20:,.1f} MiB in one file; this process may "
                f"write files of at most {limit / 2**20:,.1f} MiB (ulimit -f)"
            )
    folder = os.path.dirname(prefix) or "."
    free = shutil.disk_usage(folder).free
    if free < need:
        return f"it needs {about} {need / 2**20:,.1f} MiB; {free / 2**20:,.1f} MiB free in {folder}"
    return None


def _element_bytes(spec: Any) -> tuple[int, bool]:
    """(bytes of one element's fixed-size parts, whether every part has a fixed size)."""
    total, exact = 0, True
    for part in tf.nest.flatten(spec):
        shape = getattr(part, "shape", None)
        dtype = getattr(part, "dtype", None)
        if shape is None or not shape.is_fully_defined() or dtype in (None, tf.string):
            exact = False
            continue
        total += shape.num_elements() * dtype.size
    return total, exact


def _read_bytes(fi: Any) -> int:
    """The share of a shard file that a file instruction reads."""
    try:
        size = tf.io.gfile.stat(os.fspath(fi.filename)).length
    except tf.errors.NotFoundError:
        return 0
    return size * fi.take // max(fi.examples_in_shard, 1)


# -- ownership -------------------------------------------------------------------


def _own(prefix: str, dataset_name: str, split: str, instructions: Sequence[Any]) -> bool:
    """Whether this process holds (now or from before) the writer's lock of `prefix`."""
    if prefix in _held_locks:
        return True
    path = prefix + tf_file_listing.LOCK_SUFFIX
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.utime(fd)  # The lock file's time is when the cache was last opened.
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # `fast-tfds cache clean` may have removed this lock file meanwhile:
        # holding the lock of a file no longer there would not exclude anyone.
        if os.fstat(fd).st_ino != os.stat(path).st_ino:
            raise FileNotFoundError(path)
    except OSError:
        os.close(fd)
        return False
    shards = [os.fspath(fi.filename) for fi in instructions]
    os.ftruncate(fd, 0)
    os.pwrite(fd, tf_file_listing.lock_content(dataset_name, split, shards), 0)
    _held_locks[prefix] = fd
    # No live process holds the lock: whatever a writer left is from a dead one.
    _remove_leftovers(prefix)
    return True


def _remove_leftovers(prefix: str) -> None:
    folder, base = os.path.split(prefix)
    complete = os.path.exists(prefix + ".index")
    removed = []
    for name in os.listdir(folder or "."):
        if not name.startswith(base):
            continue
        rest = name[len(base) :]
        # A final data file without its index is from a pass killed while merging.
        unfinished = not complete and re.fullmatch(r"\.data-\d+-of-\d+", rest)
        if _WRITER_LEFTOVERS.fullmatch(rest) or unfinished:
            os.remove(os.path.join(folder, name))
            removed.append(name)
    if removed:
        logging.warning(
            "cache: removed %d files left by a run that was stopped while writing %s: %s",
            len(removed),
            prefix,
            ", ".join(sorted(removed)),
        )
