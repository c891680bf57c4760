"""The two calls of ours that Linux has and macOS does not, each with its fallback.

- `os.sched_getaffinity`: the CPUs this process may run on (a container or `taskset`
  may give it fewer than the machine has). Elsewhere: every CPU of the machine.
- `os.posix_fallocate`: reserves a file's blocks, so that a disk too small for a
  persistent cache is an error before its fill, not a SIGBUS when a write to the
  mapping finds no block. Elsewhere: the file system's free space is checked first
  and the file is made at its size (sparse), which finds the same too-small disk;
  only another process filling the disk during the fill is then not caught.

No TensorFlow, no other layer of ours: `cache`, `read` and `loader` use it.
"""

from __future__ import annotations

import errno
import os
import sys
import threading


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
