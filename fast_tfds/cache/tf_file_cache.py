"""The file cache of `read_split(cache='path')`, safe against stale, killed and concurrent runs.

TensorFlow's `Dataset.cache(filename)` alone has three traps:

- It is keyed by the file name only: change the split, the size or the crop,
  or rebuild the dataset, and the old cache is served silently.
- A process killed mid-epoch leaves `<prefix>_0.lockfile` behind, and every
  later run fails with AlreadyExistsError until someone deletes it.
- Two processes on one prefix: the second fails with AlreadyExistsError, and
  when its iterator is destroyed it deletes the first one's partial files, so
  the first fails too (NotFoundError).

So the files get a name of their own for what is cached (`cache_prefix`, below), and a
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

The name (`cache_prefix`): readable, plus a digest of everything that makes its content.
TensorFlow's `Dataset.cache(filename)` is keyed by the file name alone, so a cache
made for another split, image size, crop or an older build of the dataset would be
served silently. The name made here changes whenever any of those does: the shard
files (with their sizes and modification times), the slice of each, what each
element holds, the user's `transform` (its code and the values it closes over), and
`CACHE_FORMAT`. It is the same in every process for the same inputs, so processes
can share a cache.

`housekeeping.FILE_CACHES` lists and removes caches (`fast-tfds cache list|clean`); the lock
file holds what the cache is made from, so a cache of a rebuilt dataset can be
told apart.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import resource  # A POSIX module, like the fcntl of its lock (`housekeeping.take_lock`).
import threading
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf
from absl import logging

from fast_tfds.cache import fingerprint, housekeeping
from fast_tfds.cache.housekeeping import size_text
from fast_tfds.cache.remote import object_stores

# Open lock files of the prefixes this process writes, kept open (and so
# locked) until the process ends: a dataset may be iterated again at any time.
_held_locks: dict[str, int] = {}

# What TensorFlow's cache writer leaves behind when it is killed:
# '<prefix>_0.lockfile', '<prefix>_0.data-00000-of-00001.tempstate123', and
# the per-shard index and data files of an unfinished pass.
_WRITER_LEFTOVERS = re.compile(r"_\d+\.(lockfile|index|data-\d+-of-\d+(\.tempstate\d+)?)")
# Those, and of a cache without its index the final data files too.
_UNFINISHED_PASS = re.compile(rf"{_WRITER_LEFTOVERS.pattern}|\.data-\d+-of-\d+")

# When an iteration of this process was last let write each prefix. TF
# creates `<prefix>_0.lockfile` at the writer's first element, milliseconds
# later; an iteration starting within _START_S of that waits to see it.
_writing_since: dict[str, float] = {}
_writing_lock = threading.Lock()
_START_S = 1.0
# Room left beside the estimate (TensorFlow's index, the filesystem's blocks).
_SPACE_MARGIN = 1.05


def cache_in_files(ds: tf.data.Dataset, cache: str | os.PathLike, **origin: Any) -> tf.data.Dataset:
    """`ds.cache()` in files under `cache` (a path prefix or an existing folder), safely.

    `origin`: what `ds` is read from, as `cache_prefix` takes it (`dataset_name`, `split`,
    `instructions`, optionally `transform`), which names the files; the lock file records
    the first two and the shard files of the instructions.

    Returns `ds` cached in files of its own name, or `ds` itself (no cache, with
    a warning) while another process is writing that cache or when it cannot be
    written (a read-only folder, too little space).
    """
    prefix = cache_prefix(cache, element_spec=ds.element_spec, **origin)
    if "://" in prefix:  # Remote files (gs://) cannot be flock-ed.
        return ds.cache(prefix)
    try:
        owner, unwritable = _own(prefix, origin), None
    except OSError as err:  # A read-only folder: a complete cache can still be read.
        owner, unwritable = False, err
    if tf.io.gfile.exists(prefix + housekeeping.INDEX_SUFFIX):
        return ds.cache(prefix)  # Complete: reading it alongside its writer is safe.
    without = "reading without the cache (decoding every epoch)"
    if unwritable is not None:
        why = f"cannot write {prefix}.lock ({unwritable}); {without}."
    elif not owner:
        holder = housekeeping.holder(prefix + housekeeping.LOCK_SUFFIX) or "pid ?"
        why = (
            f"another process ({holder}) is writing {prefix}; this dataset reads without "
            "the cache (decoding every epoch) to leave it intact."
        )
    else:
        shortfall = _space_shortfall(prefix, ds.element_spec, origin["instructions"])
        if not shortfall:
            return _one_writer_at_a_time(ds, prefix)
        why = f"not enough room for the cache ({shortfall}); {without}."
    logging.warning("cache=%s: %s", os.fspath(cache), why)
    return ds


def _one_writer_at_a_time(ds: tf.data.Dataset, prefix: str) -> tf.data.Dataset:
    """`ds.cache(prefix)`, or `ds` itself for an iteration that starts while another
    iterator of this process is writing the cache (decided per iteration)."""
    cached = ds.cache(prefix)

    def may_use_cache() -> bool:
        with _writing_lock:
            while True:
                if os.path.exists(prefix + housekeeping.INDEX_SUFFIX):
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
    needs = f"it needs {'about' if exact else 'at least'} {size_text(need)}"
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and limit < need:
        return (
            f"{needs} in one file; this process may write files of at most "
            f"{size_text(limit)} (ulimit -f)"
        )
    folder = os.path.dirname(prefix) or "."
    free = housekeeping.short_of_room(folder, need)
    if free is not None:
        return f"{needs}; {size_text(free)} free in {folder}"
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


def _own(prefix: str, origin: dict[str, Any]) -> bool:
    """Whether this process holds (now or from before) the writer's lock of `prefix`
    (`origin` as `cache_in_files` takes it); taking it, it removes what a writer that is
    gone left."""
    if prefix in _held_locks:
        return True
    fd = housekeeping.take_lock(prefix + housekeeping.LOCK_SUFFIX)
    if fd is None:
        return False
    shards = [os.fspath(fi.filename) for fi in origin["instructions"]]
    housekeeping.record_cache(fd, origin["dataset_name"], origin["split"], shards)
    _held_locks[prefix] = fd
    # No live process holds the lock: whatever a writer left is from a dead one. A final
    # data file without its index is from a pass killed while merging.
    folder, base = os.path.split(prefix)
    complete = os.path.exists(prefix + housekeeping.INDEX_SUFFIX)
    left = _WRITER_LEFTOVERS if complete else _UNFINISHED_PASS
    names = os.listdir(folder or ".")
    removed = [n for n in names if n.startswith(base) and left.fullmatch(n[len(base) :])]
    for name in removed:
        os.remove(os.path.join(folder, name))
    if removed:
        logging.warning(
            "cache: removed %d files left by a run that was stopped while writing %s: %s",
            len(removed),
            prefix,
            ", ".join(sorted(removed)),
        )
    return True


# -- the name ----------------------------------------------------------------------


# Bump when what the reader caches for the same inputs changes (decoding,
# resizing), so that caches written by an older version are not served.
CACHE_FORMAT = 1


def cache_prefix(
    cache: str | os.PathLike,
    dataset_name: str,
    split: str,
    instructions: Sequence[Any],
    element_spec: Any,
    transform: Callable | None = None,
) -> str:
    """The file prefix for one cached pipeline: readable name + digest of what is cached.

    The digest covers the shard files (with their sizes and modification
    times, so a rebuilt dataset gets a new cache), the slice of each, what
    each element holds (features, image size, dtypes), the transform, and
    `CACHE_FORMAT`.
    """
    digest = hashlib.sha256()
    digest.update(f"fast_tfds cache format {CACHE_FORMAT}\n{dataset_name}\n{split}\n".encode())
    filenames = [os.fspath(fi.filename) for fi in instructions]
    local = fingerprint.of(filenames)
    for fi, filename in zip(instructions, filenames, strict=True):
        identity = _file_identity(filename, local)
        digest.update(f"{filename} {fi.skip} {fi.take} {identity}\n".encode())
    digest.update(_spec_identity(element_spec).encode())
    digest.update(callable_identity(transform).encode())
    name = f"{housekeeping.readable_name(dataset_name, split)}.{digest.hexdigest()[:16]}"
    cache = os.fspath(cache)
    if tf.io.gfile.isdir(cache):
        return os.path.join(cache, name)
    return f"{cache}.{name}"


def _spec_identity(spec: Any) -> str:
    # Dict keys in sorted order: the reader builds its dicts from sets, whose
    # order changes from one process to the next.
    if isinstance(spec, dict):
        return "{" + ", ".join(f"{k!r}: {_spec_identity(spec[k])}" for k in sorted(spec)) + "}"
    if isinstance(spec, (tuple, list)):
        return "(" + ", ".join(_spec_identity(v) for v in spec) + ")"
    return repr(spec)


def _file_identity(filename: str, local: dict[str, list]) -> str:
    """'<size> <mtime in ns>' of a shard, as TensorFlow's own stat gives it, which names made
    before `fingerprint` existed digest: a local file's modification time in whole seconds
    (from its fingerprint, `local`); an object in a bucket as TensorFlow's client, which
    reads it, sees it (its `updated` time)."""
    if object_stores.is_remote(filename):
        try:
            stat = tf.io.gfile.stat(filename)
        except tf.errors.NotFoundError:
            return "missing"  # The reader reports it when it gets there.
        return f"{stat.length} {stat.mtime_nsec}"
    if filename not in local:
        return "missing"
    _, size, mtime_ns = local[filename]
    return f"{size} {mtime_ns - mtime_ns % 10**9}"


def callable_identity(fn: Callable | None) -> str:
    """A description of `fn` that is the same in every process for the same code and settings.

    Module, name, bytecode and the values it closes over (e.g. crop_to_box=True).
    A value without a stable description (an arbitrary object) gives one that
    differs between processes: no sharing then, but never a wrong cache.
    """
    if not isinstance(fn, types.FunctionType):
        return repr(fn)  # None: 'None'.
    closure = [_value_identity(cell.cell_contents) for cell in fn.__closure__ or ()]
    defaults = _value_identity(fn.__defaults__)
    name = f"{fn.__module__}.{fn.__qualname__}"
    return f"{name}:{_code_identity(fn.__code__)}:{closure}:{defaults}"


def _code_identity(code: types.CodeType) -> str:
    consts = [
        _code_identity(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts
    ]
    return hashlib.sha256(code.co_code + repr((consts, code.co_names)).encode()).hexdigest()


def _value_identity(value: Any) -> str:
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, (tuple, list, frozenset, set)):
        return f"{type(value).__name__}({[_value_identity(v) for v in value]})"
    if isinstance(value, dict):
        return f"dict({sorted((str(k), _value_identity(v)) for k, v in value.items())})"
    if isinstance(value, types.FunctionType):
        return callable_identity(value)
    return f"{type(value).__qualname__}@{id(value)}"  # Unknown: this process only.
