"""The decoded-image caches, in one place for both back ends.

- `store`: the slot table, one class for every cache of both back ends: fixed columns by
  slot, optionally a picture column (`pictures`: each example's decoded picture in one
  flat buffer; fixed rows when every picture is the output size), which slots are
  written, what an epoch does; and the registry of every cache. The picture store (a
  plain or augmented read) and the fallback's arena of examples (examples decoded
  elsewhere: a transform, the tf.data service) are both such tables. The serving step
  that cuts batches from a picture store is `fast_tfds.augment.step`;
  `fast_tfds.read.cached` wires tables into tf.data, `fast_tfds.loader.cached` into
  Grain; `store.open_store` opens a picture store the same way for both.
- `memory`: where a table's columns live, one interface (`Backing`) for memory, rows on
  disk and the persistent file; anonymous memory by default.
- Where its rows live: `placement` finds what the process may use (cgroup limits,
  MemAvailable) and puts the rows in memory when they fit that budget, otherwise in
  `disk_rows`, a memory-mapped file on disk.
- `persisted` (`persist=True`): the one key and the one kind of file of every cache,
  plain or augmented, of both back ends, and opening or filling such a file, which
  later and concurrent processes map and serve from their first epoch;
  `persistent_format` is the file itself: its checked header, its names, and finding and
  removing such files.
- `fingerprint`: what identifies a build's shard files in every cache's key or name, and
  whether they changed since (a stale cache); `remote.object_stores` gives it the
  fingerprints of shards in a bucket, from the objects' metadata.
- `remote`: builds in an object store (gs://, through one seam, `remote.object_stores`):
  the shards copied whole to local files, a few at a time with a bounded wait, which both
  readers read their records from, started as a dataset is opened, while its builder
  loads.
- The file cache (`cache=PATH`): TensorFlow's own `Dataset.cache(path)` made safe
  against killed and concurrent runs (`tf_file_cache`), named by what it holds
  (`tf_file_cache.cache_prefix`), and its files found and removed
  (`housekeeping.FILE_CACHES`).
- `housekeeping`: what `fast-tfds cache list|clean` shows and removes: one entry type that
  every kind of cache on disk gives (`FILE_CACHES`, `disk_rows`, `persistent_format`),
  found by one `find`, removed by one rule.

Only the `tf_*` modules import TensorFlow (the file cache is TensorFlow's format);
everything else here is TensorFlow-free, so the Grain loader can use it.
"""
