"""What a cache records of the shard files it was made from ([path, size, mtime_ns] each,
or [url, size, generation, crc32c] of an object in a bucket), and whether they changed
since: a cache of a rebuilt or removed dataset is stale."""

from __future__ import annotations

import os
from collections.abc import Iterable


def changed(shards: Iterable[list]) -> bool:
    """Whether any recorded local shard is gone, or has another size or modification time.

    Objects in a bucket are not looked at: that would take a request to the bucket
    each time a cache folder is listed (every open does). A rewritten object is never
    served from an old file all the same (the key names its generation), and the old
    file is left unused, for `fast-tfds cache clean --older-than AGE` to remove."""
    for filename, size, mtime_ns, *_ in shards:
        if "://" in filename:
            continue
        try:
            stat = os.stat(filename)
        except OSError:
            return True
        if (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns):
            return True
    return False
