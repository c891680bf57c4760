"""Checks of the options both back ends take, each raising a one-line ValueError that
starts with the argument (`batch_size=0: must be a positive integer`), so that a
user sees at once which keyword to change.

`fast_tfds.read.options.ReadOptions` and `fast_tfds.loader.options.LoaderOptions`
run them in their constructors; image sizes are checked in `fast_tfds.core.sizes`.
"""

from __future__ import annotations

import os
from typing import Any

# Seeds of the loader's shuffles (Grain's) are unsigned 32-bit integers.
SEED_LIMIT = 2**32


def is_int(value: Any) -> bool:
    """An int that is not a bool (True is an int to Python, never a size to us)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name: str, value: Any, *, minimum: int = 1, optional: bool = False) -> None:
    """`value` is an int >= minimum (or None, when optional)."""
    if optional and value is None:
        return
    if not is_int(value) or value < minimum:
        kind = {1: "a positive integer", 0: "a non-negative integer"}.get(
            minimum, f"an integer >= {minimum}"
        )
        raise ValueError(f"{name}={value!r}: must be {kind}{' or None' if optional else ''}")


def check_batch_size(batch_size: Any, *, optional: bool = True) -> None:
    """A positive number of examples per batch; None (unbatched) where `optional`."""
    check_int("batch_size", batch_size, optional=optional)


def check_seed(seed: Any, *, limit: int | None = None) -> None:
    """An integer seed or None; below `limit` where the shuffle needs it (e.g. 2**32)."""
    if seed is None:
        return
    if limit is None:
        if not is_int(seed):
            raise ValueError(f"seed={seed!r}: must be an integer or None")
    elif not is_int(seed) or not 0 <= seed < limit:
        bound = "2**32" if limit == SEED_LIMIT else str(limit)
        raise ValueError(f"seed={seed!r}: must be an integer in [0, {bound}) or None")


def check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: must be True or False")


def check_cache_dir(cache_dir: Any) -> None:
    """`cache_dir` is None or a local folder (the cache's rows are a memory-mapped file)."""
    if cache_dir is None:
        return
    if not isinstance(cache_dir, (str, os.PathLike)) or not os.fspath(cache_dir):
        raise ValueError(f"cache_dir={cache_dir!r}: must be a local folder")
    if "://" in os.fspath(cache_dir):
        raise ValueError(
            f"cache_dir={os.fspath(cache_dir)!r}: must be a local folder (the cache's rows "
            "are a memory-mapped file)"
        )
