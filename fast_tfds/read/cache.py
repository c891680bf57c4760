"""The file cache of `read_split(cache='path')`, safe against stale, killed and concurrent runs.

TensorFlow's `Dataset.cache(filename)` alone has three traps:

- It is keyed by the file name only: change the split, the size or the crop,
  or rebuild the dataset, and the old cache is served silently.
- A process killed mid-epoch leaves `<prefix>_0.lockfile` behind, and every
  later run fails with AlreadyExistsError until someone deletes it.
- Two processes on one prefix: the second fails with AlreadyExistsError, and
  when its iterator is destroyed it deletes the first one's partial files, so
  the first fails too (NotFoundError).

So the files get a name of their own for what is cached (`cache_prefix`), and a
process writes them only while it holds an OS lock on `<prefix>.lock`
(`fcntl.flock`, released by the kernel when the process dies, so a lock is never
stale). The holder removes what a dead writer left; another process reads a
complete cache (TensorFlow only writes `<prefix>.index` at the end of a full
pass) or, while none is complete, reads without one.
"""

from __future__ import annotations

import hashlib
import os
import re
import types
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf
from absl import logging

try:
    import fcntl
except ImportError:  # Windows: no flock; TensorFlow's own lockfile is all there is.
    fcntl = None

# Bump when what the reader caches for the same inputs changes (decoding,
# resizing), so that caches written by an older version are not served.
CACHE_FORMAT = 1

# Open lock files of the prefixes this process writes, kept open (and so
# locked) until the process ends: a dataset may be iterated again at any time.
_held_locks: dict[str, int] = {}

# What TensorFlow's cache writer leaves behind when it is killed:
# '<prefix>_0.lockfile', '<prefix>_0.data-00000-of-00001.tempstate123', and
# the per-shard index and data files of an unfinished pass.
_WRITER_LEFTOVERS = re.compile(r"_\d+\.(lockfile|index|data-\d+-of-\d+(\.tempstate\d+)?)")


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
    a warning) while another process is writing that cache.
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
    try:
        owner = _own(prefix)
    except OSError as err:  # A read-only folder: a complete cache can still be read.
        if tf.io.gfile.exists(prefix + ".index"):
            return ds.cache(prefix)
        raise ValueError(f"cache={os.fspath(cache)!r}: cannot write {prefix}.lock: {err}") from None
    if owner:
        return ds.cache(prefix)
    if tf.io.gfile.exists(prefix + ".index"):
        return ds.cache(prefix)  # Complete: reading it alongside its writer is safe.
    logging.warning(
        "cache=%s: another process (pid %s) is writing %s; this dataset reads "
        "without the cache (decoding every epoch) to leave it intact.",
        os.fspath(cache),
        _owner_pid(prefix),
        prefix,
    )
    return ds


def cache_prefix(
    cache: str | os.PathLike,
    *,
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
    for fi in instructions:
        filename = os.fspath(fi.filename)
        digest.update(f"{filename} {fi.skip} {fi.take} {_file_identity(filename)}\n".encode())
    digest.update(_spec_identity(element_spec).encode())
    digest.update(_callable_identity(transform).encode())
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{dataset_name.replace('/', '-')}.{split}")
    name = f"{slug}.{digest.hexdigest()[:16]}"
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


def _file_identity(filename: str) -> str:
    try:
        stat = tf.io.gfile.stat(filename)
    except tf.errors.NotFoundError:
        return "missing"  # The reader reports it when it gets there.
    return f"{stat.length} {stat.mtime_nsec}"


def _callable_identity(fn: Callable | None) -> str:
    """A description of `fn` that is the same in every process for the same code and settings.

    Module, name, bytecode and the values it closes over (e.g. crop_to_box=True).
    A value without a stable description (an arbitrary object) gives one that
    differs between processes: no sharing then, but never a wrong cache.
    """
    if fn is None:
        return "None"
    if isinstance(fn, types.FunctionType):
        closure = [_value_identity(cell.cell_contents) for cell in fn.__closure__ or ()]
        defaults = _value_identity(fn.__defaults__)
        name = f"{fn.__module__}.{fn.__qualname__}"
        return f"{name}:{_code_identity(fn.__code__)}:{closure}:{defaults}"
    return repr(fn)


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
        return _callable_identity(value)
    return f"{type(value).__qualname__}@{id(value)}"  # Unknown: this process only.


# -- ownership -------------------------------------------------------------------


def _own(prefix: str) -> bool:
    """Whether this process holds (now or from before) the writer's lock of `prefix`."""
    if prefix in _held_locks:
        return True
    fd = os.open(prefix + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
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


def _owner_pid(prefix: str) -> str:
    try:
        with open(prefix + ".lock") as f:
            return f.read().strip() or "?"
    except OSError:
        return "?"
