"""`persist=True` for the tf.data reader: what its caches are made from, as the one key of
`fast_tfds.cache.persisted` names it, and where the arena's rows come from (a file to
serve, a new file to fill, or memory).

Every persistent cache of either back end, plain or augmented, is one kind of file
under one key (`cache.persisted.key`): the split's shards, the slots' examples, the
stored pictures (output size, cache resolution, decoder) and the kept features. A plain
read's arena at the output size is the picture store without a crop, so the loader's
plain cache and an `Augment(crop=None)` read share its file. An arena of examples that a
transform (or a tf.data service) decoded keeps its images as features, keyed by the
transform's code (or TensorFlow's version). The file format and its checks are
TensorFlow-free (`fast_tfds.cache.persistent`).
"""

from __future__ import annotations

import os

import tensorflow as tf

from fast_tfds.cache import persisted as stored
from fast_tfds.cache.tf_file_key import callable_identity
from fast_tfds.core import dataset_hooks
from fast_tfds.core.sizes import as_hw


def pictures_origin(reading) -> stored.Origin:
    """What `reading`'s caches are made from, named as the loader names it: a dataset
    hook's transform carries what its settings change; another transform (the user's
    own) is keyed by its code, and so never shared with the loader."""
    transform = reading.transform
    if transform is None:
        hook = {}
    elif hasattr(transform, dataset_hooks.PERSIST_IDENTITY):
        hook = getattr(transform, dataset_hooks.PERSIST_IDENTITY)
    else:
        hook = {"transform": callable_identity(transform)}
    return stored.Origin(
        dataset=reading.builder.info.full_name,
        split=reading.split,
        shard_files=tuple(os.fspath(fi.filename) for fi in reading.instructions),
        hook=hook,
    )


def arena_rows(reading, specs: dict[str, tf.TensorSpec]):
    """(allocate, filled_rows) for `reading`'s arena of `specs`: the rows of a persistent
    file to serve (filled_rows), a new persistent file to fill, or memory/disk rows as
    without `persist` (`placement`)."""
    # The JPEGs decoded here in blocks at the output size: the picture store's pixels.
    image = "image" if reading.encoded and set(reading.encoded) == {"image"} else None
    rows = stored.open_rows(
        pictures_origin(reading),
        reading.slots.index,
        image=image,
        output_size=as_hw(reading.image_size) if image is None else tuple(specs[image].shape[:2]),
        features={k: (tuple(s.shape.as_list()), s.dtype.as_numpy_dtype) for k, s in specs.items()},
        folder=reading.cache.folder,
        budget=reading.cache.budget,
        what=f"{reading.builder.info.full_name} {reading.split}",
        decoder=f"tensorflow {tf.__version__}" if reading.service_address is not None else None,
    )
    if rows is None:
        return reading.arena_allocator(specs), None
    return rows.allocate, rows.filled
