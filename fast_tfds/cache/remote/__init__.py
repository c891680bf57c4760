"""Builds in an object store (a `gs://` bucket), for both back ends.

- `object_stores`: the one seam to a store: `ObjectStore` (its scheme, fsspec client,
  listing, what identifies an object's content, its one-line errors) and its first
  implementation, `GCS` (gcsfs, the `[gcs]` extra); the one read timeout
  (FAST_TFDS_BUCKET_READ_TIMEOUT_S); the fingerprints of a folder's objects that a
  persistent cache's key holds, from one listing.
- `copies`: shard objects copied whole to local files, a few at a time with a bounded
  wait (`ObjectCopies`), which the tf.data reader reads and the loader reads records
  from at random (`ShardCopies`).
- `opening`: the copies a reader reads, and those started while the builder loads.
"""
