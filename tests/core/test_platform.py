"""The fallbacks of `fast_tfds.core.platform` where Linux's calls are missing (macOS),
run on this machine by hiding the calls; `tests/cache/test_persistent.py`,
`tests/reliability/test_persistence.py` and `tests/loader/test_loader.py` run the
code that uses them the same way."""

from __future__ import annotations

import errno
import json
import mmap
import os
import platform as python_platform
import shutil
import subprocess
import sys

import pytest

from fast_tfds.core import platform


def test_available_cpus_are_the_affinity_where_the_platform_has_one(monkeypatch):
    if hasattr(os, "sched_getaffinity"):
        assert platform.available_cpus() == len(os.sched_getaffinity(0))
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert platform.available_cpus() == os.cpu_count()


@pytest.mark.parametrize("posix_fallocate", [True, False], ids=["posix_fallocate", "fallback"])
def test_preallocate_makes_the_file_its_size_and_never_shortens_it(
    posix_fallocate, tmp_path, monkeypatch
):
    if not posix_fallocate:
        monkeypatch.delattr(os, "posix_fallocate", raising=False)
    size = 3 * mmap.PAGESIZE + 5
    fd = os.open(tmp_path / "rows", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        platform.preallocate(fd, size)
        assert os.fstat(fd).st_size == size
        with mmap.mmap(fd, size, flags=mmap.MAP_SHARED) as region:
            region[size - 1] = 7  # the file's last byte is there to write
        platform.preallocate(fd, 1)
        assert os.fstat(fd).st_size == size
    finally:
        os.close(fd)
    assert (tmp_path / "rows").read_bytes()[-1] == 7


def test_the_fallback_refuses_more_than_the_disk_has_before_making_the_file(tmp_path, monkeypatch):
    # Sparse, the file would be made at any size, and the fill would die of SIGBUS
    # when a write to its mapping found no block: the fallback says ENOSPC first.
    monkeypatch.delattr(os, "posix_fallocate", raising=False)
    too_big = shutil.disk_usage(tmp_path).free + 2**30
    fd = os.open(tmp_path / "rows", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with pytest.raises(OSError) as raised:
            platform.preallocate(fd, too_big)
        assert raised.value.errno == errno.ENOSPC
        assert os.fstat(fd).st_size == 0
    finally:
        os.close(fd)


# In a fresh process (the setting is the process's, made once): whether an 8 MiB buffer,
# the first of its size (glibc adapts its threshold to a size once one is freed), is a
# mapping of its own (glibc's mallinfo2: bytes in mmapped blocks while it is held) after
# `keep_freed_buffers`.
_KEEP = """
import ctypes, json
from fast_tfds.core import platform
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def mapped():
    held = libc.malloc(8 << 20)
    blocks = libc.mallinfo2().hblkhd
    libc.free(held)
    return blocks >= 8 << 20
kept = platform.keep_freed_buffers()
print(json.dumps([kept, platform.keep_freed_buffers(), mapped()]))
"""


@pytest.mark.skipif(
    python_platform.libc_ver()[0] != "glibc",
    reason="glibc's allocator only",
)
@pytest.mark.parametrize(
    "env, kept",
    [
        ({}, True),
        ({"FAST_TFDS_KEEP_FREED_BUFFERS": "0"}, False),
        ({"MALLOC_TRIM_THRESHOLD_": "131072"}, False),
    ],
    ids=["default", "opted-out", "own-malloc-settings"],
)
def test_keep_freed_buffers_serves_batch_sized_buffers_from_the_heap_unless_told_not_to(env, kept):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "FAST_TFDS_KEEP"))}
    done = subprocess.run(
        [sys.executable, "-c", _KEEP],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    first, second, mapped = json.loads(done.stdout.splitlines()[-1])
    # Glibc's default: an 8 MiB buffer is a mapping of its own (returned to the kernel when
    # freed); kept, it comes from the heap. Opted out: nothing changes.
    assert (first, second, mapped) == (kept, kept, not kept)


def test_keep_freed_buffers_refuses_a_setting_other_than_0_or_1(monkeypatch):
    monkeypatch.setenv(platform.KEEP_FREED_BUFFERS_ENV, "no")
    platform.keep_freed_buffers.cache_clear()
    try:
        with pytest.raises(
            ValueError, match=r"^FAST_TFDS_KEEP_FREED_BUFFERS='no': 1 or 0 \(the default: 1\)$"
        ):
            platform.keep_freed_buffers()
    finally:
        platform.keep_freed_buffers.cache_clear()
