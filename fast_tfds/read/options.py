"""The options of `read_split`, validated once, in one frozen object.

Users pass keywords (`as_fast_dataset(split, batch_size=64, ...)`); the reader
turns them into a `ReadOptions` whose constructor checks each one and raises a
one-line ValueError that names the argument.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Collection
from typing import Any

import tensorflow as tf

from fast_tfds.core.options import check_batch_size, check_int, check_seed, is_int
from fast_tfds.core.sizes import DEFAULT_IMAGE_SIZE, check_image_size

SHARDING_POLICIES = ("dynamic", "off")


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """What `read_split` does; see its docstring for each field."""

    batch_size: int | None = 32
    image_size: int | tuple[int, int] | None = DEFAULT_IMAGE_SIZE
    cache: bool | str | os.PathLike = True
    cache_budget: int | None = None
    cache_dir: str | os.PathLike | None = None
    shuffle: bool = True
    shuffle_buffer: int = 1024
    seed: int | None = None
    deterministic: bool | None = None
    repeat: bool | int = False
    drop_remainder: bool = False
    dtype: tf.DType = tf.float32
    as_supervised: bool = True
    input_context: tf.distribute.InputContext | None = None
    transform: Callable[[dict], dict] | None = None
    transform_keys: Collection[str] = ()
    service: str | None = None
    service_sharding: str = "dynamic"

    def __post_init__(self) -> None:
        check_batch_size(self.batch_size)
        check_image_size(self.image_size)
        _check_cache(self.cache)
        check_int("cache_budget", self.cache_budget, optional=True)
        _check_cache_dir(self.cache_dir)
        check_int("shuffle_buffer", self.shuffle_buffer)
        check_seed(self.seed)
        if self.dtype not in (tf.float32, tf.uint8):
            raise ValueError(
                f"dtype={self.dtype!r}: must be tf.float32 (scaled to [0, 1]) or tf.uint8"
            )
        if not isinstance(self.repeat, bool) and (not is_int(self.repeat) or self.repeat < 1):
            raise ValueError(
                f"repeat={self.repeat!r}: must be True, False or a positive number of epochs"
            )
        if self.service is not None:
            if self.service_sharding not in SHARDING_POLICIES:
                raise ValueError(
                    f"service_sharding={self.service_sharding!r}: must be one of "
                    f"{', '.join(SHARDING_POLICIES)}"
                )
            if self.deterministic:
                raise ValueError(
                    "deterministic=True: with service= the workers deliver examples as they "
                    "decode them, so the order cannot be reproduced; leave deterministic unset"
                )
        object.__setattr__(self, "transform_keys", tuple(self.transform_keys))

    @property
    def is_deterministic(self) -> bool:
        """Reproducible order: asked for, or implied by a seed (never with a service)."""
        if self.service is not None:
            return False
        return self.seed is not None if self.deterministic is None else bool(self.deterministic)

    @property
    def epochs(self) -> int | None:
        """Epochs per iteration: None for forever."""
        if self.repeat is True:
            return None
        return 1 if self.repeat is False else int(self.repeat)

    def replace(self, **changes: Any) -> ReadOptions:
        return dataclasses.replace(self, **changes)


def _check_cache_dir(cache_dir) -> None:
    if cache_dir is None:
        return
    if not isinstance(cache_dir, (str, os.PathLike)) or not os.fspath(cache_dir):
        raise ValueError(f"cache_dir={cache_dir!r}: must be a local folder")
    if "://" in os.fspath(cache_dir):
        raise ValueError(
            f"cache_dir={os.fspath(cache_dir)!r}: must be a local folder (the cache's rows "
            "are a memory-mapped file)"
        )


def _check_cache(cache) -> None:
    if cache is True or cache is False:
        return
    if not isinstance(cache, (str, os.PathLike)) or not os.fspath(cache):
        raise ValueError(f"cache={cache!r}: must be True, False or a file path prefix")
    path = os.fspath(cache)
    if "://" in path:
        # gs://, s3://, ram://: a folder is not a thing to check on object stores;
        # TensorFlow's file system reports what it cannot write.
        scheme, _, location = path.partition("://")
        if "/" not in location.strip("/"):
            raise ValueError(
                f"cache={path!r}: give a file prefix inside a bucket or folder, "
                f"e.g. {scheme}://BUCKET/cache"
            )
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not tf.io.gfile.isdir(folder):
        raise ValueError(f"cache={path!r}: folder {folder} does not exist")
