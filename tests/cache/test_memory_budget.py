"""The memory a cache may take: cgroup v1 and v2 limits, MemAvailable, an explicit budget.

The cgroup files are laid out as the kernel shows them in a container (the
function reads them from the roots it is given, as it reads /proc and
/sys/fs/cgroup in production); tests/reliability has a real cgroup run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fast_tfds.cache.placement import available_memory

GIB = 1 << 30


def _proc(tmp_path: Path, cgroup: str, available_kib: int) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "meminfo").write_text(
        f"MemTotal:       25000000 kB\nMemFree:  100 kB\nMemAvailable:   {available_kib} kB\n"
    )
    return proc


def _write(folder: Path, **files: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text)


def test_cgroup_v2_limit_less_the_working_set(tmp_path):
    proc = _proc(tmp_path, "0::/kubepods/pod1\n", available_kib=20 * GIB // 1024)
    root = tmp_path / "cgroup"
    _write(root / "kubepods" / "pod1", memory_max=str(4 * GIB), memory_current=str(3 * GIB))
    (root / "kubepods" / "pod1" / "memory.stat").write_text(f"anon 1\ninactive_file {GIB}\n")
    budget = available_memory(proc=proc, cgroup_root=root)
    # 4 GiB limit - (3 GiB used - 1 GiB of page cache the kernel drops first)
    assert budget.bytes == 2 * GIB
    assert "kubepods/pod1" in budget.source


def test_a_parent_cgroups_tighter_limit_counts(tmp_path):
    proc = _proc(tmp_path, "0::/parent/child\n", available_kib=20 * GIB // 1024)
    root = tmp_path / "cgroup"
    _write(root / "parent", memory_max=str(GIB), memory_current=str(GIB // 2))
    _write(root / "parent" / "child", memory_max="max", memory_current=str(GIB // 2))
    assert available_memory(proc=proc, cgroup_root=root).bytes == GIB // 2


def test_cgroup_v1_memory_controller(tmp_path):
    cgroup = "4:memory:/docker/abc\n3:cpu:/docker/abc\n"
    proc = _proc(tmp_path, cgroup, available_kib=20 * GIB // 1024)
    root = tmp_path / "cgroup"
    folder = root / "memory" / "docker" / "abc"
    _write(folder, memory_limit_in_bytes=str(3 * GIB), memory_usage_in_bytes=str(GIB))
    (folder / "memory.stat").write_text("cache 5\ntotal_inactive_file 0\n")
    assert available_memory(proc=proc, cgroup_root=root).bytes == 2 * GIB


def test_inside_a_container_the_mount_is_the_processs_own_cgroup(tmp_path):
    """/proc/self/cgroup names the host's path, but only the container's level is mounted."""
    proc = _proc(tmp_path, "4:memory:/docker/abc\n", available_kib=20 * GIB // 1024)
    root = tmp_path / "cgroup"
    _write(root / "memory", memory_limit_in_bytes=str(GIB), memory_usage_in_bytes="0")
    assert available_memory(proc=proc, cgroup_root=root).bytes == GIB


def test_no_limit_falls_back_to_mem_available(tmp_path):
    proc = _proc(tmp_path, "4:memory:/\n0::/\n", available_kib=5 * GIB // 1024)
    root = tmp_path / "cgroup"
    _write(root / "memory", memory_limit_in_bytes="9223372036854771712", memory_usage_in_bytes="1")
    budget = available_memory(proc=proc, cgroup_root=root)
    assert (budget.bytes, budget.source) == (5 * GIB, "MemAvailable")


def test_mem_available_wins_when_it_is_smaller(tmp_path):
    proc = _proc(tmp_path, "0::/a\n", available_kib=GIB // 1024)
    root = tmp_path / "cgroup"
    _write(root / "a", memory_max=str(8 * GIB), memory_current="0")
    assert available_memory(proc=proc, cgroup_root=root).source == "MemAvailable"


def test_an_explicit_budget_is_taken_as_given(tmp_path):
    budget = available_memory(123_000_000, proc=tmp_path / "missing")
    assert (budget.bytes, budget.source) == (123_000_000, "cache_budget=123000000")


def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/meminfo")


def test_this_machine_reports_its_mem_available_or_a_cgroups_headroom():
    if not Path("/proc/meminfo").exists():
        pytest.skip("needs Linux's /proc/meminfo")
    before = _meminfo("MemAvailable")
    budget = available_memory()
    after = _meminfo("MemAvailable")
    # MemAvailable moves while other processes run: what the two reads around the call
    # saw, give or take a little.
    slack = 256 << 20
    low, high = min(before, after) - slack, max(before, after) + slack
    # Never the "no limit found" fallback (2**62) on a machine that has /proc.
    assert 0 <= budget.bytes <= _meminfo("MemTotal")
    if budget.source == "MemAvailable":
        assert low <= budget.bytes <= high
    else:  # A cgroup's limit, less what the cgroup uses: under both that limit and MemAvailable.
        folder = Path(budget.source.removeprefix("the memory limit of cgroup "))
        limit = folder / "memory.max"
        limit = limit if limit.exists() else folder / "memory.limit_in_bytes"
        assert budget.bytes <= int(limit.read_text())
        assert budget.bytes <= high
