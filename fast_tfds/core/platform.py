"""The two calls of ours that Linux has and macOS does not, each with its fallback.

- `os.sched_getaffinity`: the CPUs this process may run on (a container or `taskset`
  may give it fewer than the machine has). Elsewhere: every CPU of the machine.
- `os.posix_fallocate`: reserves a file's blocks, so that a disk too small for a
  persistent cache is an error before its fill, not a SIGBUS when a write to the
  mapping finds no block. Elsewhere: the file system's free space is checked first
  and the file is made at its size (sparse), which finds the same too-small disk;
  only another process filling the disk during the fill is then not caught.
- glibc's `mallopt`: keeps freed buffers of up to 32 MiB in the process for the next
  batch (`keep_freed_buffers`). Elsewhere (macOS, musl): the allocator as it is.

No TensorFlow, no other layer of ours: `cache`, `read` and `loader` use it.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys
import threading

from fast_tfds.core.options import env_flag


def available_cpus() -> int:
    """The number of CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def preallocate(fd: int, size: int) -> None:
    """Makes the file open as `fd` `size` bytes long, every block reserved where the
    platform can; raises OSError (ENOSPC) if its file system cannot hold it."""
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, 0, size)
        return
    stats, file = os.fstatvfs(fd), os.fstat(fd)
    held = file.st_blocks * 512  # st_blocks counts 512-byte units on every POSIX system
    if size - held > stats.f_bavail * stats.f_frsize:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if size > file.st_size:  # Like posix_fallocate: a file is never shortened.
        os.ftruncate(fd, size)


def lower_this_threads_priority(niceness: int = 10) -> bool:
    """Makes the calling thread yield the CPU to the process's other threads (Linux: its
    own nice value; a thread is a task there). Elsewhere nothing changes. Returns whether
    it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        tid = threading.get_native_id()
        nice = min(19, os.getpriority(os.PRIO_PROCESS, tid) + niceness)
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except (AttributeError, OSError):
        return False
    return True


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
# Freed buffers up to this size stay in the process (glibc's largest mmap threshold).
KEPT_BUFFER_BYTES = 32 << 20
# Free memory at the top of the heap beyond this goes back to the kernel.
KEPT_FREE_BYTES = 256 << 20
# Set to 0 to leave glibc's allocator as it is.
KEEP_FREED_BUFFERS_ENV = "FAST_TFDS_KEEP_FREED_BUFFERS"


@functools.cache
def keep_freed_buffers() -> bool:
    """Keeps the memory of freed buffers of up to 32 MiB in the process, once per
    process; returns whether it did (glibc only).

    Every batch a pipeline serves is a new buffer of a few MiB (a gather, a dtype
    conversion). glibc gives such a buffer back to the kernel when it is freed (unmapped,
    or trimmed off the heap), so the next batch's buffer costs a page fault and a
    zeroed page per 4 KiB: about as much time as copying its pixels. Serving from the
    heap instead needs a fixed mmap threshold (32 MiB, glibc's largest) and a trim
    threshold (256 MiB) above what a few batches in flight free. Not done where the
    process sets glibc's `MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` itself, or
    with FAST_TFDS_KEEP_FREED_BUFFERS=0 (any value but 0 and 1: a one-line ValueError).
    """
    if not env_flag(KEEP_FREED_BUFFERS_ENV, True) or any(
        name in os.environ for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
    ):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (glibc's; musl and macOS lack it)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(
        mallopt(_M_MMAP_THRESHOLD, KEPT_BUFFER_BYTES)
        and mallopt(_M_TRIM_THRESHOLD, KEPT_FREE_BYTES)
    )
