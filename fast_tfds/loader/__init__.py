"""A fast loader for JAX and PyTorch: ArrayRecord files read with Grain, numpy batches.

    import cats_vs_dogs_fast
    loader = cats_vs_dogs_fast.as_fast_loader("train[:80%]", batch_size=64, seed=0)
    for images, labels in loader:  # uint8 [64, 224, 224, 3], int64 [64]
        ...

It reads a dataset built with `tfds build ... --file_format array_record` (or
converted with `tfds convert_format`) without TensorFlow: importing this module
does not import it, and neither does reading, in threads or worker processes.
What it shares with the tf.data reader (finding and building the dataset, the
checks of splits and options, dataset hooks) is in `fast_tfds.core`.
"""

from fast_tfds.loader import deps

deps.require()

import os  # noqa: E402

import tensorflow_datasets as tfds  # noqa: E402

from fast_tfds.augment import progressive  # noqa: E402
from fast_tfds.cache.remote import copies  # noqa: E402
from fast_tfds.core import dataset_hooks, platform, sizes  # noqa: E402
from fast_tfds.core.builder_lookup import (  # noqa: E402
    DatasetNotBuilt,
    load_builder,
    name_and_config,
    version_folder,
)
from fast_tfds.loader.array_records import (  # noqa: E402
    ARRAY_RECORD,
    NoArrayRecordFiles,
    check_emulator_settings,
    open_reader,
    split_source,
)
from fast_tfds.loader.examples import BadRecord, DecodeExample  # noqa: E402
from fast_tfds.loader.options import LoaderOptions  # noqa: E402
from fast_tfds.loader.pipeline import FastLoader, FastLoaderIterator  # noqa: E402

DEFAULT_IMAGE_SIZE = sizes.DEFAULT_IMAGE_SIZE


def as_fast_loader(
    name: str,
    split: str = "train",
    *,
    data_dir: str | os.PathLike | None = None,
    config: str | None = None,
    builder_dir: str | os.PathLike | None = None,
    download_and_prepare: bool = True,
    download_config: tfds.download.DownloadConfig | None = None,
    options: LoaderOptions | None = None,
    **keywords,
) -> FastLoader:
    """`split` of dataset `name` as numpy batches, decoded in threads (and, with
    num_workers, in worker processes).

    Args:
      name: the TFDS name, e.g. 'cats_vs_dogs_fast' (or 'cats_vs_dogs_fast/224', naming
        the config as tfds.load takes it).
      split: a split or a slice of one ('train', 'train[:80%]').
      data_dir, config: where the dataset is and which config ('224' default,
        'original'); or builder_dir: a built version folder.
      download_and_prepare: build the dataset, as ArrayRecord, if it is missing.
      download_config: passed to that build, e.g. with a manual_dir.
      options: a `LoaderOptions`; keywords override its fields: batch_size,
        image_size, shuffle, seed, num_epochs, drop_remainder, shard_index,
        shard_count, num_threads, num_workers, worker_buffer_size, augment,
        cache, cache_budget, cache_shorter_side, cache_dir, persist, with_index, mix
        (see `LoaderOptions` for each).
      **keywords: those fields, and the dataset's own options (for Stanford
        Dogs: crop_to_box, with_boxes, max_boxes; see
        stanford_dogs_tfrecord.as_fast_loader).
    """
    platform.keep_freed_buffers()  # Each batch's buffer: not a page fault per 4 KiB.
    name, config = name_and_config(name, config)  # 'name/config' as tfds.load takes it
    hook = dataset_hooks.hook_for(name)
    settings, keywords = dataset_hooks.dataset_settings(
        hook.loader_keywords,
        keywords,
        options=LoaderOptions.names(),
        caller="as_fast_loader",
        dataset=name,
    )
    options = (options or LoaderOptions()).replace(**keywords)
    # A build in a bucket: its shards' copies start while the builder loads
    # (`cache.remote.copies.opening`), unless a persisted cache may hold the split already. Every
    # epoch reads every shard: a shard_count takes every shard_count-th record.
    folder = None
    if not options.persist:
        folder = version_folder(name, data_dir=data_dir, config=config, builder_dir=builder_dir)
    if folder is not None and "://" in folder:
        check_emulator_settings(folder)  # before any request, the copies' included
    with copies.opening(folder, name, split, ARRAY_RECORD.value, opener=open_reader):
        builder = load_builder(
            name,
            data_dir=data_dir,
            config=config,
            builder_dir=builder_dir,
            download_and_prepare=download_and_prepare,
            download_config=download_config,
            file_format="array_record",
            copy_metadata=copies.copy_metadata,
        )
        source = split_source(builder, split)
        hook.check(builder.info.features, settings)
        largest = progressive.largest(options.image_size)  # a ProgressiveResize's largest
        size = sizes.output_size(source.stored_size, largest, dataset=source.dataset)
        decode = DecodeExample(image_size=size, parts=hook.example_parts(settings))
        return FastLoader(source, decode, options, persist_identity=hook.persist_identity(settings))


__all__ = [
    "BadRecord",
    "DatasetNotBuilt",
    "FastLoader",
    "FastLoaderIterator",
    "LoaderOptions",
    "NoArrayRecordFiles",
    "as_fast_loader",
]
