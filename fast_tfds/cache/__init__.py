"""The decoded-image caches, in one place for both back ends.

- `pictures`: the picture store, each example's decoded picture by slot, in one flat
  buffer; fixed rows when every picture is the output size. The serving step that cuts
  batches from it is `fast_tfds.augment.step`.
- `arena`: the arena, one block of rows per split (its layout, filling and serving),
  plain numpy, so any back end can fill and serve it; `fast_tfds.read.cached` wires it
  and the store into tf.data, `fast_tfds.loader.cached` the store into Grain.
- Where its rows live: `memory_budget` finds what the process may use (cgroup limits,
  MemAvailable), `placement` puts the rows in memory when they fit that budget and
  otherwise in `disk_rows`, a memory-mapped file on disk.
- `persisted` (`persist=True`): the one key and the one kind of file of every cache,
  plain or augmented, of both back ends; `persistent` opens, fills and checks such a
  file (`persistent_format`), which later and concurrent processes map and serve from
  their first epoch; `persistent_listing` finds and removes such files; `remote_files`
  fingerprints shards in a bucket (gs://) for their keys, from the objects' metadata.
- The file cache (`cache=PATH`): TensorFlow's own `Dataset.cache(path)` made safe
  against killed and concurrent runs (`tf_file_cache`), named by what it holds
  (`tf_file_key`), and its files found and removed (`tf_file_listing`).
- `housekeeping`: what `fast-tfds cache list|clean` shows and removes; `shard_stats`
  tells whether a cache's dataset changed since it was made (a stale cache).

Only the `tf_*` modules import TensorFlow (the file cache is TensorFlow's format);
everything else here is TensorFlow-free, so the Grain loader can use it.
"""
