"""The decoded-image caches, in one place for both back ends.

- `arena`: the arena, one block of rows per split (its layout, filling and serving),
  plain numpy, so any back end can fill and serve it; `fast_tfds.read.arena_dataset`
  wires it into tf.data.
- Where its rows live: `memory_budget` finds what the process may use (cgroup limits,
  MemAvailable), `placement` puts the rows in memory when they fit that budget and
  otherwise in `disk_rows`, a memory-mapped file on disk.
- `persistent` (`persist=True`): an arena in a file (`persistent_format`) that later and
  concurrent processes map and serve from their first epoch; `persistent_listing` finds
  and removes such files; `remote_files` fingerprints shards in a bucket (gs://) for
  their keys, from the objects' metadata.
- The file cache (`cache=PATH`): TensorFlow's own `Dataset.cache(path)` made safe
  against killed and concurrent runs (`tf_file_cache`), named by what it holds
  (`tf_file_key`), and its files found and removed (`tf_file_listing`).
- `housekeeping`: what `fast-tfds cache list|clean` shows and removes; `shard_stats`
  tells whether a cache's dataset changed since it was made (a stale cache).

Only the `tf_*` modules import TensorFlow (the file cache is TensorFlow's format);
everything else here is TensorFlow-free, so the Grain loader can use it.
"""
