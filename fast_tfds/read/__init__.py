"""The read layer: the fast tf.data reader shared by both datasets (see `reader`).

    shard files ─ interleave(TFRecordDataset) ─ map(parse + decode to uint8)
      ─ cache(uint8) ─ shuffle ─ repeat ─ batch ─ map(to float32, per batch) ─ prefetch

`records` reads the shards, `decode` parses and decodes, `cache` keeps decoded
images between epochs, `service` hands decoding to a tf.data service cluster,
`options` validates the keywords, and `reader` composes them.
"""

from fast_tfds.read.options import ReadOptions
from fast_tfds.read.reader import as_fast_dataset, load_builder, read_split

__all__ = ["ReadOptions", "as_fast_dataset", "load_builder", "read_split"]
