"""The tf.data back end: the fast reader shared by both datasets (see `reader`).

    shard files ─ interleave(TFRecordDataset) ─ the split's serialized records
      ├ JPEGs to a fixed output size, fixed-size features, no transform; or augment=
      │   (records tagged with their example index): shuffle the records ─ batch ─
      │   parse the block (one op)
      │   ├ Plan.CACHED (cache=True): epoch 1 decodes each picture once into the
      │   │   picture store (`fast_tfds.cache`: at the output size for a plain read,
      │   │   else at the cache resolution, aspect kept; in memory or, over the memory
      │   │   budget, in a file on disk) and serves the block from it; later epochs
      │   │   cut a permutation of the split from it by the serving step
      │   │   (`fast_tfds.augment.step`; a plain read: a gather), nothing decoded
      │   └ Plan.STREAM (cache=False): each window drawn, then only it decoded
      └ the fallback: parse + (transform) + decode one example at a time, with the
        same decoder, or on the tf.data service's workers when `service` is given
          ├ Plan.ARENA_OF_EXAMPLES (cache=True, fixed-size): shuffle ─ batch ─
          │   copied into an arena of examples in epoch 1; later epochs gather from it
          └ Plan.PER_EXAMPLE: cache (memory or files) ─ shuffle ─ batch
      ─ to float32, once per batch: one epoch, from (seed, epoch) alone
    epochs from the dataset's PassClock ─ prefetch ─ delivered (the clock moves when a
    pass's last batch is) ─ assert_cardinality

shuffle=False reads the split's record order (an ordered interleave, whole files in
turn, several read ahead) on every plan; every cache keeps an example at the row of
its index in the split.

`reader` is the front door; `options` validates the keywords into `ReadOptions`,
`split_reading` turns them and the split into a `Reading`, `plans` chooses a plan and
builds one epoch's pipeline, `epochs` numbers the passes (`fast_tfds.core.passes`),
repeats, pads input pipelines to one length and declares it. `records` reads the
shards, `parsing` parses records, `decoding` decodes pictures, `output` converts each
batch; `augment_dataset` streams augmented blocks (`fast_tfds.augment.step`), `cached`
wires every cache of `fast_tfds.cache` into tf.data (the picture store, the fallback's
arena of examples, their placement and persistence), and `service` hands decoding to a tf.data
service cluster. The names
below load on first use, so that a command line importing `read.service` for its address
parsing does not load TensorFlow.
"""

from __future__ import annotations

from fast_tfds.read._lazy import exports

_EXPORTS = {
    "ReadOptions": "fast_tfds.read.options",
    "as_fast_dataset": "fast_tfds.read.reader",
    "load_builder": "fast_tfds.core.builder_lookup",
    "read_split": "fast_tfds.read.reader",
}

__all__, __getattr__, __dir__ = exports(__name__, _EXPORTS)
