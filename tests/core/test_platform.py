"""The fallbacks of `fast_tfds.core.platform` where Linux's calls are missing (macOS),
run on this machine by hiding the calls; `tests/cache/test_persistent.py`,
`tests/reliability/test_persistence.py` and `tests/loader/test_loader.py` run the
code that uses them the same way."""

from __future__ import annotations

import errno
import mmap
import os
import shutil

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
