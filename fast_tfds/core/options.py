"""Checks of the options both back ends take, each raising a one-line ValueError that
starts with the argument (`batch_size=0: must be a positive integer`), so that a
user sees at once which keyword to change.

`SharedOptions` holds these options, with their one default each, for
`fast_tfds.read.options.ReadOptions` and `fast_tfds.loader.options.LoaderOptions`,
which run `check_shared` in their constructors; image sizes are checked in
`fast_tfds.core.sizes`, and `augment`, `mix` and a `ProgressiveResize` in
`fast_tfds.augment`, which `core` does not import.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from fast_tfds.core.sizes import DEFAULT_IMAGE_SIZE, is_int

# Seeds of the loader's shuffles (Grain's) are unsigned 32-bit integers: the loader
# shuffles with `seed % SEED_LIMIT` (a seed below it as it is), and a seed it draws is
# below it.
SEED_LIMIT = 2**32
# Every seed is 64 bits, of either sign (tf.data takes 2**64 - 1 as -1); the crops,
# mixes and orders are drawn from those 64 bits (`fast_tfds.augment.draws`), so both
# back ends cut the same crops for the same seed.
SEED_RANGE = (-(2**63), 2**64)


def check_number(name: str, value: Any, fits: Callable, must: str, *, kind=(int, float)) -> None:
    """A one-line ValueError "name=value: must be <must>" unless `value` is a `kind`, not a
    bool, and `fits(value)` (NaN fits no range). The one check of a number option, here
    and in `fast_tfds.augment`'s classes."""
    if isinstance(value, bool) or not isinstance(value, kind) or not fits(value):
        raise ValueError(f"{name}={value!r}: must be {must}")


def check_int(name: str, value: Any, *, minimum: int = 1, optional: bool = False) -> None:
    """`value` is an int >= minimum (or None, when optional)."""
    if optional and value is None:
        return
    kind = {1: "a positive integer", 0: "a non-negative integer"}.get(
        minimum, f"an integer >= {minimum}"
    )
    must = f"{kind}{' or None' if optional else ''}"
    check_number(name, value, lambda v: v >= minimum, must, kind=int)


def check_seed(seed: Any) -> None:
    """A 64-bit seed (of either sign) or None, the same in both back ends."""
    if seed is None:
        return
    if not is_int(seed):
        raise ValueError(f"seed={seed!r}: must be an integer or None")
    if not SEED_RANGE[0] <= seed < SEED_RANGE[1]:
        raise ValueError(f"seed={seed!r}: must be an integer in [-2**63, 2**64) or None")


def check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: must be True or False")


def check_shard(shard_index: Any, shard_count: Any) -> None:
    """This host's share: `shard_index` in [0, shard_count)."""
    check_int("shard_count", shard_count)
    check_int("shard_index", shard_index, minimum=0)
    if shard_index >= shard_count:
        raise ValueError(f"shard_index={shard_index!r}: must be below shard_count={shard_count}")


def check_persist(persist: Any, cache: Any, *, in_memory: bool) -> None:
    """`persist` is a bool, and True only with the in-memory cache it keeps in a file
    (`in_memory`: cache=True, or the loader's "auto")."""
    check_bool("persist", persist)
    if persist and not in_memory:
        raise ValueError(
            f"persist=True: keeps the in-memory cache (cache=True) in a file, and cache={cache!r}"
        )


# Where the package's own frames are: a warning about a keyword points past them.
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_OWN_FOLDERS = tuple(
    str(_PACKAGE_ROOT / name)
    for name in ("fast_tfds", "cats_vs_dogs_fast", "stanford_dogs_tfrecord")
)


def warn_renamed(old: str, new: str) -> None:
    """A FutureWarning that keyword `old` is now `new`, shown at the user's line: the
    first frame outside this package and `dataclasses` (its `replace`, and the
    `__init__` it generates)."""
    level = 1
    frame = inspect.currentframe()
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith((*_OWN_FOLDERS, "<", dataclasses.__file__)):
            break
        frame, level = frame.f_back, level + 1
    del frame
    warnings.warn(
        f"{old}= is renamed {new}=; {old}= will be removed in the next minor version",
        FutureWarning,
        stacklevel=level,
    )


def env_seconds(name: str, default: float) -> float:
    """Environment variable `name` as a positive number of seconds, `default` where it is
    unset or empty; a one-line ValueError naming it for anything else (the one reading of
    every timeout a user sets: a bucket's reads, a download's answers)."""
    value = os.environ.get(name, "")
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ValueError(f"{name}={value!r}: must be a positive number of seconds")
    return seconds


def env_flag(name: str, default: bool) -> bool:
    """Environment variable `name` as 1 or 0, `default` where it is unset or empty; a
    one-line ValueError naming it for anything else."""
    value = os.environ.get(name, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"{name}={value!r}: 1 or 0 (the default: {int(default)})")
    return value == "1" if value else default


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


def check_shared(opts: Any, *, unbatched: bool, in_memory: bool) -> None:
    """The checks of the options both back ends take, with the same names and one-line
    errors: `opts` is a `ReadOptions` or a `LoaderOptions`. `unbatched`: batch_size=None
    (unbatched examples) is allowed; `in_memory`: `cache` asks for the in-memory cache
    that `persist` keeps in a file. Each back end checks `cache` itself first (the two
    take different values)."""
    # Examples per batch; None (unbatched examples) where `unbatched`.
    check_int("batch_size", opts.batch_size, optional=unbatched)
    check_bool("shuffle", opts.shuffle)
    check_seed(opts.seed)
    # Passes per iteration; None: endless.
    check_int("num_epochs", opts.num_epochs, optional=True)
    check_bool("drop_remainder", opts.drop_remainder)
    check_shard(opts.shard_index, opts.shard_count)
    # Bytes the in-memory cache may take; None: a share of what the process may use.
    check_int("cache_budget", opts.cache_budget, optional=True)
    check_int("cache_shorter_side", opts.cache_shorter_side, optional=True)
    check_cache_dir(opts.cache_dir)
    check_persist(opts.persist, opts.cache, in_memory=in_memory)
    check_bool("with_index", opts.with_index)


@dataclasses.dataclass(frozen=True)
class SharedOptions:
    """The options both back ends take, one name and one default each: the base of
    `fast_tfds.read.options.ReadOptions` and `fast_tfds.loader.options.LoaderOptions`,
    which document them (the loader's `cache` defaults to "auto")."""

    batch_size: int | None = 32
    image_size: int | tuple[int, int] | None = DEFAULT_IMAGE_SIZE
    cache: bool | str | os.PathLike = True
    cache_budget: int | None = None
    cache_dir: str | os.PathLike | None = None
    persist: bool = False
    shuffle: bool = True
    seed: int | None = None
    num_epochs: int | None = 1
    drop_remainder: bool = False
    shard_index: int = 0
    shard_count: int = 1
    augment: Any = None  # a fast_tfds.Augment or None (`core` does not import `augment`)
    cache_shorter_side: int | None = None
    with_index: bool = False
    mix: Any = None  # a fast_tfds.Mix or None

    @classmethod
    def names(cls) -> frozenset[str]:
        return frozenset(field.name for field in dataclasses.fields(cls))

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)
