"""Both front doors opened alike, so that a contract both back ends keep is one test
parametrized by back end (the `backend` fixture of tests/reading/conftest.py).

`as_fast_dataset` (tf.data) reads the sample's TFRecord build, `as_fast_loader` (Grain)
its ArrayRecord build: the same examples in the same order, so an example's index in
the split, its label and its stored pixels are the same in both. Each back end is given
the options both take; what only one of them has is tested where it is plain.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np

import cats_vs_dogs_fast

NAMES = ("tf.data", "loader")


class Stored(NamedTuple):
    """One example of the split as stored (`cats_split`): the same in both builds."""

    filename: str
    label: int
    pixels: np.ndarray  # TensorFlow's decode of the stored JPEG


def numpy(value):
    """A batch (a tuple or dict of tensors or arrays) as numpy copies: the loader may
    reuse its arrays, a tf.data batch is a tensor."""
    if isinstance(value, Mapping):
        return {key: numpy(part) for key, part in value.items()}
    if isinstance(value, tuple):
        return tuple(numpy(part) for part in value)
    if hasattr(value, "to_list"):  # tf.RaggedTensor
        return value.to_list()
    return np.array(value.numpy() if hasattr(value, "numpy") else value)


@dataclasses.dataclass(frozen=True)
class Backend:
    """One back end over its own build of the sample (`data_dir`)."""

    name: str
    data_dir: Path

    def open(self, split: str = "train", *, dataset=cats_vs_dogs_fast, **options):
        """The reader of `split` with `options`: tf.data's pictures as uint8 (the loader's
        type), the loader decoding in two threads (the tests' machines have two cores)."""
        common = {"data_dir": self.data_dir, "download_and_prepare": False}
        if self.name == "tf.data":
            import tensorflow as tf

            return dataset.as_fast_dataset(split, **common, **{"dtype": tf.uint8, **options})
        return dataset.as_fast_loader(split, **common, **{"num_threads": 2, **options})

    def epochs(self, reader, count: int = 2) -> list[list]:
        """`count` iterations of `reader` (each the next epoch, in both back ends): each a
        list of its batches as numpy."""
        return [[numpy(batch) for batch in reader] for _ in range(count)]


def persisted(folder, timeout: float = 120):
    """The complete persistent file in `folder`, once its writer thread (a fill writes it
    out after its last batch, in a thread of its own) has finished it."""
    from fast_tfds.cache import housekeeping, persistent_format

    deadline = time.monotonic() + timeout
    while not (
        found := [
            f for f in housekeeping.find(folder, persistent_format.PERSISTENT) if f.spent is None
        ]
    ):
        assert time.monotonic() < deadline, f"no complete persistent file in {folder}"
        time.sleep(0.1)
    (complete,) = found
    return complete
