"""`as_fast_dataset` and `read_split`: a split of a built dataset as fast tf.data batches.

`read_split` follows one of four plans, chosen from the options and the stored
features (see `plans` and the diagram in `fast_tfds.read`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.core import hooks
from fast_tfds.core.builder_lookup import load_builder
from fast_tfds.read import plans
from fast_tfds.read.options import ReadOptions


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
      name: registered dataset name, e.g. 'cats_vs_dogs_fast'.
      split: a split or a slice of one ('train', 'train[:80%]').
      data_dir: TFDS data dir (default: TFDS's own, ~/tensorflow_datasets).
      config: '224' (default) or 'original'.
      builder_dir: a built version folder (.../name/config/1.0.0) to read
        directly, e.g. one shared by a collaborator; needs no source archives.
      download_and_prepare: build the dataset first if it is not built yet.
      download_config: passed to the build, e.g. with a manual_dir.
      **options: see `read_split`.
    """
    builder = load_builder(
        name,
        data_dir=data_dir,
        config=config,
        builder_dir=builder_dir,
        download_and_prepare=download_and_prepare,
        download_config=download_config,
    )
    return _read_with_hook(name, builder, split, options)


def _read_with_hook(
    name: str, builder: tfds.core.DatasetBuilder, split: str, options: dict[str, Any]
) -> tf.data.Dataset:
    """`read_split`, with the keywords the dataset's hook declares (e.g. Stanford Dogs'
    crop_to_box) taken out of `options` and applied through the hook."""
    hook = hooks.hook_for(name)
    names = {"options", *(f.name for f in dataclasses.fields(ReadOptions))}
    settings, options = hooks.dataset_settings(
        hook.reader_keywords, options, options=names, caller="as_fast_dataset", dataset=name
    )
    if not settings:
        return read_split(builder, split, **options)
    hook.check(builder.info.features, settings)
    base = options.get("options") or ReadOptions()
    as_supervised = options.get("as_supervised", base.as_supervised)
    changes = hook.reader_options(settings, as_supervised=as_supervised)
    clash = sorted(k for k in changes if k != "as_supervised" and options.get(k, getattr(base, k)))
    if clash:
        asked = ", ".join(f"{key}={value!r}" for key, value in settings.items() if value)
        raise ValueError(f"{clash[0]}: {name} sets it itself for {asked}; pass one or the other")
    ds = read_split(builder, split, **{**options, **changes})
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
      options: a `ReadOptions`; keywords (below) override its fields.
      batch_size: examples per batch (the global batch when input_context is
        given); None for unbatched examples.
      image_size: output size, int or (height, width). Images are decoded a block
        at a time with libjpeg-turbo, at the smallest DCT scale that covers the
        output, and resized (close to `tf.image.resize(antialias=True)`; see
        docs/reading.md); stored images already at the size keep TensorFlow's exact
        pixels. None keeps stored sizes (then batching needs a fixed-size config
        such as '224').
      cache: True caches decoded uint8 images in memory: fixed-size examples in one
        arena per split that epoch 1 fills, served in a new global order every epoch
        (see `fast_tfds.read.arena_dataset`), others with `Dataset.cache()`. A path
        caches them in files with that prefix (its folder must exist; an existing folder
        holds them), False does not cache. File names add the dataset, split and a
        digest of the shard files (sizes, times), slice, image size, features and
        transform: a different pipeline or a rebuilt dataset never gets a stale cache.
        Only a full pass writes a cache that is later read (one stopped early, or
        killed, is discarded). One process at a time writes it (an OS lock on
        `<file>.lock`, freed when that process ends, so files left by a killed run are
        removed by the next); another process reads it once complete, and reads without
        a cache, with a warning, while it is being written. See `fast_tfds.cache.tf_file_cache`.
      cache_budget: bytes the in-memory cache may take. Default: three quarters of
        what the process may still use (its cgroup's memory limit in a container,
        else MemAvailable). A cache over the budget goes to a memory-mapped file in
        `cache_dir` instead, with one log line; if that folder lacks room too, the
        read fails at once with one line. See `fast_tfds.cache.placement`.
      cache_dir: the local folder of such files (default: $FAST_TFDS_CACHE_DIR, else
        ~/.cache/fast_tfds); `fast-tfds cache list|clean` shows and removes them.
      shuffle: shuffle file order and examples (a new order every epoch);
        epochs served from the arena are a permutation of the whole split.
      shuffle_buffer: examples in the shuffle buffer of epochs that decode
        (epoch 1 with the arena; every epoch without it).
      seed: seed for the shuffles; with deterministic=True the order of every
        epoch repeats from run to run.
      deterministic: keep a reproducible element order (slower). Default: True
        when a seed is given, else False.
      repeat: False for one epoch per iteration, True to repeat forever (the
        fastest for Keras: fit(steps_per_epoch=...) keeps one iterator), or a
        number of epochs. Batches never straddle two epochs.
      drop_remainder: drop each epoch's last incomplete batch.
      dtype: tf.float32 for images scaled to [0, 1], tf.uint8 for raw pixels.
      as_supervised: (image, label) tuples, else dicts of all features.
      input_context: a tf.distribute.InputContext: this input pipeline reads its
        own subset of the shard files.
      transform: an optional fn(example dict) -> example dict applied after
        parsing (the image still JPEG bytes) and before decoding and the cache;
        dataset-specific options such as cropping use it. To crop, it may add
        `decode.WINDOW_KEY` (int32 [top, left, height, width]) rather than decode.
      transform_keys: features `transform` needs besides the output's.
      service: 'grpc://HOST:PORT' of a tf.data service dispatcher: its workers
        read and decode (and `transform`) the examples, each exactly once per
        epoch; caching, shuffling, batching and the float conversion stay here.
        The workers need the shard files at the same path (shared or gs://
        data_dir). Order is never reproducible then. See `fast_tfds.read.service`.
      service_sharding: 'dynamic' (files handed out to whichever worker asks
        next: exactly once per epoch) or 'off' (every worker reads everything).
    """
    reading = plans.Reading.start(builder, split, _options(options, keywords))
    plan = plans.choose_plan(reading)
    ds = plans.PIPELINES[plan](reading)
    return plans.epochs(ds, reading)


def _options(options: ReadOptions | None, keywords: dict[str, Any]) -> ReadOptions:
    known = {f.name for f in dataclasses.fields(ReadOptions)}
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise TypeError(
            f"{unknown[0]}: not an option of as_fast_dataset/read_split; "
            f"the options are {', '.join(sorted(known))}"
        )
    return (options or ReadOptions()).replace(**keywords)
