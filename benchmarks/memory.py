"""Memory figures of the streaming benchmark: RSS, its peak, and anonymous memory in use."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import threading

import psutil

MiB = 2**20


def rss() -> int:
    return psutil.Process().memory_info().rss


@functools.cache
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    if libc is None or not hasattr(libc, "malloc_trim"):
        return None
    return libc


def anonymous_in_use() -> int | None:
    """Resident anonymous memory of this process (RssAnon, Linux), or None elsewhere.

    Read after `release_memory`, it is what the process holds: the C heap, after
    glibc has returned its free pages, and anonymous mappings such as the
    reader's in-memory cache; files the process maps and reads (the shards in
    the page cache) do not count. So what a dataset holds between epochs (its
    cache) reads as the growth of this figure while the dataset lives. The growth
    also holds what the runtime allocated meanwhile (thread stacks, traced
    functions): a few MiB, beside the gigabytes of a cache of the default sample.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return None


@contextlib.contextmanager
def frozen_heap():
    """The objects alive on entry (the imported modules, TensorFlow's among them, and the
    inputs every row shares) set aside from the collector until exit (`gc.freeze`).

    A benchmark collects before each row's clock starts, so that what the last row let go
    is not collected during the next one's epoch; with TensorFlow imported, a collection
    walks some 450,000 objects that live as long as the process, about half a second on a
    loaded 2-core machine, every row and round. Frozen, each collection walks only what
    the rows made since, and frees the same garbage: objects alive on entry are not
    garbage until the run ends, when they are handed back to the collector.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def release_memory() -> None:
    """Frees what is no longer used, so that the next RSS growth is the next pipeline's.

    TensorFlow's eager runtime keeps the inputs of the last op it ran (such as
    the last iterator) until it runs another, hence the tiny op; glibc keeps
    freed blocks mapped until malloc_trim, which also returns free pages inside
    the heap.
    """
    import tensorflow as tf

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
