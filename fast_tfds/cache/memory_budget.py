"""How much more memory this process may take, before a cache reserves it.

A container's limit is not the machine's memory: Docker, Kubernetes pods, Colab and
CI runners put the process in a cgroup whose memory limit is often far below what
/proc/meminfo shows. Past that limit the kernel does not fail an allocation; it
evicts the process's own pages (TensorFlow's code included) and the read crawls.
So a cache asks first: the headroom of every cgroup the process is in (v1 and v2,
found through /proc/self/cgroup), and the machine's MemAvailable, whichever is
smaller; or the budget a user gave.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

# cgroup v1 writes "no limit" as a huge number near 2**63.
_V1_UNLIMITED = 1 << 60


@dataclasses.dataclass(frozen=True)
class MemoryBudget:
    """Bytes this process may still take, and what said so (for the log and errors)."""

    bytes: int
    source: str


def available_memory(
    cache_budget: int | None = None,
    *,
    proc: str | os.PathLike = "/proc",
    cgroup_root: str | os.PathLike = "/sys/fs/cgroup",
) -> MemoryBudget:
    """The smallest of: `cache_budget` (if given), the cgroups' headroom, MemAvailable."""
    if cache_budget is not None:
        return MemoryBudget(int(cache_budget), f"cache_budget={cache_budget}")
    known = _least([_cgroup_headroom(Path(proc), Path(cgroup_root)), _mem_available(Path(proc))])
    # None: not Linux, or /proc is hidden: nothing to go by but trust.
    return known or MemoryBudget(1 << 62, "no limit found")


def _least(budgets: list[MemoryBudget | None]) -> MemoryBudget | None:
    """The smallest of the budgets found (the first of equals), or None."""
    return min(filter(None, budgets), key=lambda b: b.bytes, default=None)


def _mem_available(proc: Path) -> MemoryBudget | None:
    for line in (_read(proc / "meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            return MemoryBudget(int(line.split()[1]) * 1024, "MemAvailable")
    return None


def _cgroup_headroom(proc: Path, root: Path) -> MemoryBudget | None:
    """The least headroom (limit - working set) over the process's cgroup and its parents."""
    found = []
    for line in (_read(proc / "self" / "cgroup") or "").splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2: one unified hierarchy.
            found += [_level(level, *_V2) for level in _levels(root, path)]
        elif "memory" in controllers.split(","):
            found += [_level(level, *_V1) for level in _levels(root / "memory", path)]
    return _least(found)


def _levels(mount: Path, path: str) -> list[Path]:
    """The cgroup's folder and its parents up to the mount. Inside a container the
    path may name the host's hierarchy while the mount shows only the container's
    own cgroup: then the mount itself is the process's cgroup."""
    folder = mount / path.lstrip("/")
    if not folder.is_dir():
        folder = mount
    levels = [folder]
    while folder != mount and mount in folder.parents:
        folder = folder.parent
        levels.append(folder)
    return levels


# The files of a level's limit and usage, and the page cache the kernel drops first.
_V2 = ("memory.max", "memory.current", "inactive_file")
_V1 = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")


def _level(folder: Path, limit_file: str, usage_file: str, inactive_key: str):
    """The headroom of one cgroup level (v1 or v2, by its files), or None: no limit."""
    limit = _read(folder / limit_file)
    if limit is None or limit == "max" or int(limit) >= _V1_UNLIMITED:
        return None
    used = _working_set(_read(folder / usage_file), folder, inactive_key)
    return MemoryBudget(max(0, int(limit) - used), f"the memory limit of cgroup {folder}")


def _working_set(usage: str | None, folder: Path, inactive_key: str) -> int:
    """Usage less the page cache that the kernel drops first, as kubelet counts it."""
    if usage is None:
        return 0
    inactive = 0
    for line in (_read(folder / "memory.stat") or "").splitlines():
        key, _, value = line.partition(" ")
        if key == inactive_key:
            inactive = int(value)
    return max(0, int(usage) - inactive)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
