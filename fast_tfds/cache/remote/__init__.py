"""Builds in an object store (`gs://`, `s3://`, `az://`), for both back ends.

- `object_stores`: the one seam to a store: `ObjectStore` (its scheme, fsspec client,
  listing, what identifies an object's content, its one-line errors) and one
  implementation per store, `GCS`, `S3`, `Azure` (gcsfs, s3fs, adlfs); the one read timeout
  (FAST_TFDS_BUCKET_READ_TIMEOUT_S); the fingerprints of a folder's objects that a
  persistent cache's key holds, from one listing.
- `copies`: shard objects copied whole to local files, a few at a time with a bounded
  wait (`ObjectCopies`), which the tf.data reader reads and the loader reads records
  from at random (`ShardCopies`); the copies a reader reads, and those started while the
  builder loads (`opening`); a build's metadata copied to a local folder, which its
  builder loads from (`copy_metadata`).
"""
