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

from fast_tfds.read._lazy import exports

_EXPORTS = {
    "ReadOptions": "fast_tfds.read.options",
    "as_fast_dataset": "fast_tfds.read.reader",
    "load_builder": "fast_tfds.read.reader",
    "read_split": "fast_tfds.read.reader",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = exports(__name__, _EXPORTS)
