"""The read layer: the fast tf.data reader shared by both datasets (see `reader`).

    shard files ─ interleave(TFRecordDataset) ─ map(parse + decode to uint8)
      ─ cache(uint8) ─ shuffle ─ batch ─ map(to float32, per batch) ─ prefetch

`records` reads the shards, `decode` parses and decodes, `memory_cache` keeps
decoded images in an arena between epochs, `cache` in files, `service` hands
decoding to a tf.data service cluster, `options` validates the keywords, and
`reader` composes them. The names below load on first use, so that a command
line importing `read.service` for its address parsing does not load TensorFlow.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ReadOptions": "fast_tfds.read.options",
    "as_fast_dataset": "fast_tfds.read.reader",
    "load_builder": "fast_tfds.read.reader",
    "read_split": "fast_tfds.read.reader",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fast_tfds.read' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
