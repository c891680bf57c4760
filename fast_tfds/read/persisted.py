"""`persist=True` for the tf.data reader: the key of a split's persistent arena, and
where the arena's rows come from (a file to serve, a new file to fill, or memory).

The key names everything the rows are made from, so that a file is never served for
other inputs: the dataset's full name (name/config/version), the split as asked and its
file instructions (shard, skip, take), each shard's size and modification time, the
arena's columns (features, shapes: the output size, dtypes as stored), how the images
were decoded (our block decoder and its `DECODER_VERSION`, or TensorFlow's on a tf.data
service) and the user's `transform`. The file format and its checks are TensorFlow-free
(`fast_tfds.cache.persistent`).

With `augment=`, the cache is of pictures at the cache resolution, in a file that the Grain
loader shares (`fast_tfds.cache.persisted`); `pictures_origin` names this read's side
of its key.
"""

from __future__ import annotations

import os

import tensorflow as tf
from absl import logging

from fast_tfds.cache import disk_rows, persistent, placement
from fast_tfds.cache import persisted as persisted_pictures
from fast_tfds.cache.tf_file_key import callable_identity
from fast_tfds.core import dataset_hooks
from fast_tfds.core.jpeg_blocks import DECODER_VERSION


def pictures_origin(reading) -> persisted_pictures.Origin:
    """What `reading`'s augmentation cache is made from, named as the loader names it: a
    dataset hook's transform carries what its settings change; another transform (the
    user's own) is keyed by its code, and so never shared with the loader."""
    transform = reading.transform
    if transform is None:
        hook = {}
    elif hasattr(transform, dataset_hooks.PERSIST_IDENTITY):
        hook = getattr(transform, dataset_hooks.PERSIST_IDENTITY)
    else:
        hook = {"transform": callable_identity(transform)}
    return persisted_pictures.Origin(
        dataset=reading.builder.info.full_name,
        split=reading.split,
        shard_files=tuple(os.fspath(fi.filename) for fi in reading.instructions),
        hook=hook,
    )


def arena_key(reading, specs: dict[str, tf.TensorSpec]) -> dict | None:
    """The key of `reading`'s arena of examples of `specs`; None where the shard files
    are not local (their identity cannot be checked), said in one line."""
    filenames = [os.fspath(fi.filename) for fi in reading.instructions]
    shards = persistent.shard_fingerprint(filenames)
    if shards is None:
        logging.warning(
            "fast_tfds: persist=True: the shard files of %s are not local files (%s), so a "
            "persistent cache could not tell when they change: caching in memory only.",
            reading.builder.info.full_name,
            filenames[0],
        )
        return None
    encoded = reading.encoded or {}
    if reading.service_address is not None:
        decoder = f"tensorflow {tf.__version__}"
    else:
        decoder = f"fast_tfds.core.jpeg_blocks {DECODER_VERSION}"
    return {
        "dataset": reading.builder.info.full_name,
        "split": reading.split,
        "files": [
            [f, int(fi.skip), int(fi.take)]
            for f, fi in zip(filenames, reading.instructions, strict=True)
        ],
        "shards": shards,
        "columns": {
            k: [spec.shape.as_list(), spec.dtype.name] for k, spec in sorted(specs.items())
        },
        "images": {
            k: {"shape": list(images.shape), "resized": images.resize}
            for k, images in sorted(encoded.items())
        },
        "image_size": reading.image_size,
        "decoder": decoder,
        "transform": callable_identity(reading.transform),
    }


def arena_rows(reading, specs: dict[str, tf.TensorSpec]):
    """(allocate, filled_rows) for `reading`'s arena: the rows of a persistent file to
    serve (filled_rows), a new persistent file to fill, or memory/disk rows as without
    `persist` (`placement`)."""
    need = reading.num_examples * sum(
        spec.shape.num_elements() * spec.dtype.size for spec in specs.values()
    )
    what = f"{reading.builder.info.full_name} {reading.split}"
    key = arena_key(reading, specs)
    if key is not None:
        folder = reading.cache.folder or disk_rows.default_folder()
        over_budget = not placement.fits_in_memory(need, reading.cache.budget)
        opened = persistent.open_or_fill(
            folder,
            key,
            reading.num_examples,
            {k: (tuple(s.shape.as_list()), s.dtype.as_numpy_dtype) for k, s in specs.items()},
            what=what,
            read_ahead=over_budget,
        )
        if opened.rows is not None:
            return (persistent.ReadAhead() if over_budget else None), opened.rows
        if opened.allocate is not None:
            return opened.allocate, None
    return reading.arena_allocator(specs), None
