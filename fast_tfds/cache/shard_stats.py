"""What a cache records of the shard files it was made from ([path, size, mtime_ns] each),
and whether they changed since: a cache of a rebuilt or removed dataset is stale."""

from __future__ import annotations

import os
from collections.abc import Iterable


def changed(shards: Iterable[list]) -> bool:
    """Whether any recorded shard is gone, or has another size or modification time."""
    for filename, size, mtime_ns in shards:
        try:
            stat = os.stat(filename)
        except OSError:
            return True
        if (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns):
            return True
    return False
