"""Memory figures of the streaming benchmark: RSS, its peak, and the C heap in use."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import threading

import psutil
import tensorflow as tf

from fast_tfds.read import memory_cache

MiB = 2**20


def rss() -> int:
    return psutil.Process().memory_info().rss


class _MallInfo2(ctypes.Structure):
    _FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(name, ctypes.c_size_t) for name in _FIELDS.split()]


@functools.cache
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    if libc is None or not hasattr(libc, "malloc_trim"):
        return None
    if hasattr(libc, "mallinfo2"):  # glibc >= 2.33
        libc.mallinfo2.restype = _MallInfo2
    return libc


def heap_in_use() -> int | None:
    """Bytes the C heap has handed out and not got back (glibc's mallinfo2), plus the
    reader's arenas (their own mappings, outside the heap), or None.

    Unlike RSS, this does not depend on what the allocator keeps mapped after a
    free, so what a dataset holds between epochs (its cache) reads exactly.
    """
    libc = _libc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd + memory_cache.bytes_held()


def release_memory() -> None:
    """Frees what is no longer used, so that the next RSS growth is the next pipeline's.

    TensorFlow's eager runtime keeps the inputs of the last op it ran (such as
    the last iterator) until it runs another, hence the tiny op; glibc keeps
    freed blocks mapped until malloc_trim.
    """
    gc.collect()
    tf.identity(0).numpy()
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


class PeakRss:
    """The highest RSS of this process seen while the block runs, sampled in a thread."""

    def __init__(self, interval_s: float = 0.01):
        self.interval_s = interval_s
        self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, rss())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())
