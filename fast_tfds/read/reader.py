"""`as_fast_dataset` and `read_split`: a split of a built dataset as fast tf.data batches.

`read_split` follows one of four plans, chosen from the options and the stored
features (see `plans` and the diagram in `fast_tfds.read`).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.cache.remote import copies
from fast_tfds.core import dataset_hooks, platform
from fast_tfds.core.builder_lookup import load_builder, name_and_config, version_folder
from fast_tfds.read import plans
from fast_tfds.read.epochs import repeat_epochs
from fast_tfds.read.options import ReadOptions
from fast_tfds.read.split_reading import Reading


def as_fast_dataset(
    name: str,
    split: str = "train",
    *,
    data_dir: str | os.PathLike | None = None,
    config: str | None = None,
    builder_dir: str | os.PathLike | None = None,
    download_and_prepare: bool = True,
    download_config: tfds.download.DownloadConfig | None = None,
    **options: Any,
) -> tf.data.Dataset:
    """A split of a built dataset as a fast `tf.data.Dataset` of batches.

    Args:
      name: registered dataset name, e.g. 'cats_vs_dogs_fast' (or 'cats_vs_dogs_fast/224',
        naming the config as tfds.load takes it).
      split: a split or a slice of one ('train', 'train[:80%]').
      data_dir: TFDS data dir (default: TFDS's own, ~/tensorflow_datasets).
      config: '224' (default) or 'original'.
      builder_dir: a built version folder (.../name/config/1.0.0) to read
        directly, e.g. one shared by a collaborator; needs no source archives.
      download_and_prepare: build the dataset first if it is not built yet.
      download_config: passed to the build, e.g. with a manual_dir.
      **options: the fields of `ReadOptions`, which documents each one.
    """
    platform.keep_freed_buffers()  # Each batch's buffer: not a page fault per 4 KiB.
    name, config = name_and_config(name, config)  # 'name/config' as tfds.load takes it
    # A build in a bucket: its shards' copies start while the builder loads, for a read
    # that surely reads them all (`cache.remote.copies.opening`).
    folder = None
    if _reads_every_shard(options):
        folder = version_folder(name, data_dir=data_dir, config=config, builder_dir=builder_dir)
    with copies.opening(folder, name, split, "tfrecord"):
        builder = load_builder(
            name,
            data_dir=data_dir,
            config=config,
            builder_dir=builder_dir,
            download_and_prepare=download_and_prepare,
            download_config=download_config,
            copy_metadata=copies.copy_metadata,
        )
        return _read_with_hook(name, builder, split, options)


def _reads_every_shard(options: dict[str, Any]) -> bool:
    """Whether a read with these options reads every shard of its split in its first
    epoch: not a share of them (input_context, shard_count), not through the tf.data service (its
    workers read the files), not from a file or persisted cache that may hold the split
    already. Unknown values count as no: the options are checked later, in their turn."""
    return (
        _given(options, "input_context") is None
        and _given(options, "shard_count") == 1
        and _given(options, "service") is None
        and _given(options, "persist") is False
        and isinstance(_given(options, "cache"), bool)
    )


def _given(options: dict[str, Any], key: str) -> Any:
    """Option `key` of a front door's keywords, unchecked: the keyword, else the field of
    the `options=` `ReadOptions` it passes, else the default."""
    base = options.get("options")
    return options.get(key, getattr(base if isinstance(base, ReadOptions) else ReadOptions, key))


def _read_with_hook(
    name: str, builder: tfds.core.DatasetBuilder, split: str, options: dict[str, Any]
) -> tf.data.Dataset:
    """`read_split`, with the keywords the dataset's hook declares (e.g. Stanford Dogs'
    crop_to_box) taken out of `options` and applied through the hook."""
    hook = dataset_hooks.hook_for(name)
    names = {"options", *ReadOptions.names()}
    settings, options = dataset_hooks.dataset_settings(
        hook.reader_keywords, options, options=names, caller="as_fast_dataset", dataset=name
    )
    if not settings:
        return read_split(builder, split, **options)
    hook.check(builder.info.features, settings)
    as_supervised = _given(options, "as_supervised")
    changes = hook.reader_options(settings, as_supervised=as_supervised)
    clash = sorted(k for k in changes if k != "as_supervised" and _given(options, k))
    if clash:
        asked = ", ".join(f"{key}={value!r}" for key, value in settings.items() if value)
        raise ValueError(f"{clash[0]}: {name} sets it itself for {asked}; pass one or the other")
    identity = None
    if changes.get("transform") is not None:
        # A persistent cache of augmented reads keys on what the settings change.
        identity = functools.partial(hook.persist_identity, settings)
    merged = {**options, **changes}
    ds = _read(builder, split, _options(merged.pop("options", None), merged), identity)
    return hook.finish_dataset(ds, settings, as_supervised=as_supervised)


def read_split(
    builder: tfds.core.DatasetBuilder,
    split: str = "train",
    options: ReadOptions | None = None,
    **keywords: Any,
) -> tf.data.Dataset:
    """Reads `split` of a prepared builder through the fast pipeline.

    Args:
      builder: a prepared TFDS builder (of any image dataset with an 'image' feature).
      split: split or slice ('train[:80%]'): the split's file instructions are used.
      options: a `ReadOptions`; keywords override its fields. `ReadOptions`
        documents every option (batch_size, image_size, cache, shuffle, seed,
        num_epochs, shard_index, dtype, ...).
    """
    return _read(builder, split, _options(options, keywords))


def _read(builder, split: str, opts: ReadOptions, hook_identity=None) -> tf.data.Dataset:
    """`read_split` with its options checked; `hook_identity`: `Reading.hook_identity`."""
    reading = Reading.start(builder, split, opts, hook_identity)
    plan = plans.choose_plan(reading)
    make_epoch, serve, cache = plans.pipeline(plan, reading)
    return repeat_epochs(make_epoch, reading, cache, serve)


def _options(options: ReadOptions | None, keywords: dict[str, Any]) -> ReadOptions:
    known = ReadOptions.names()
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise TypeError(
            f"{unknown[0]}: not an option of as_fast_dataset/read_split; "
            f"the options are {', '.join(sorted(known))}"
        )
    return (options or ReadOptions()).replace(**keywords)
