"""The name of a file cache: readable, plus a digest of everything that makes its content.

TensorFlow's `Dataset.cache(filename)` is keyed by the file name alone, so a cache
made for another split, image size, crop or an older build of the dataset would be
served silently. The name made here changes whenever any of those does: the shard
files (with their sizes and modification times), the slice of each, what each
element holds, the user's `transform` (its code and the values it closes over), and
`CACHE_FORMAT`. It is the same in every process for the same inputs, so processes
can share a cache.
"""

from __future__ import annotations

import hashlib
import os
import re
import types
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from fast_tfds.cache import fingerprint
from fast_tfds.cache.remote import object_stores

# Bump when what the reader caches for the same inputs changes (decoding,
# resizing), so that caches written by an older version are not served.
CACHE_FORMAT = 1


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
    filenames = [os.fspath(fi.filename) for fi in instructions]
    local = fingerprint.of(name for name in filenames if not object_stores.is_remote(name))
    for fi, filename in zip(instructions, filenames, strict=True):
        identity = _file_identity(filename, local)
        digest.update(f"{filename} {fi.skip} {fi.take} {identity}\n".encode())
    digest.update(_spec_identity(element_spec).encode())
    digest.update(callable_identity(transform).encode())
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
        return callable_identity(value)
    return f"{type(value).__qualname__}@{id(value)}"  # Unknown: this process only.
