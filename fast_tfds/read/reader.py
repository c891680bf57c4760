"""The fast reader shared by both datasets.

    shard files ─ interleave(TFRecordDataset)
      ├ stored JPEGs at the output size, fixed-size features (the default path):
      │   shuffle the serialized records ─ batch ─ parse the block (one op)
      │   ├ cache=True: the arena (memory_cache): epoch 1 decodes each block
      │   │   into its rows (jpeg_blocks), later epochs gather a global permutation
      │   └ no cache: decode the block (jpeg_blocks)
      └ otherwise: map(parse, decode + resize per example) ─ cache ─ shuffle ─ batch
      ─ to float32, per batch (the arena: in its write or gather function)
      ─ repeat ─ prefetch ─ assert_cardinality

Why this order: decoding is the expensive step, so it runs in parallel and its
uint8 output is what gets cached (0.15 MiB per 224 image, against 0.57 MiB as
float32); the float conversion is one vectorized op per batch; later epochs
never decode again.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.read import cache as file_cache
from fast_tfds.read import memory_cache, records, service
from fast_tfds.read.decode import (
    decode_jpeg_blocks,
    make_batch_parser,
    make_decoder,
    make_output_fn,
    stored_output_shape,
)
from fast_tfds.read.options import ReadOptions

AUTOTUNE = tf.data.AUTOTUNE


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
    return read_split(builder, split, **options)


def load_builder(
    name: str,
    *,
    data_dir=None,
    config: str | None = None,
    builder_dir=None,
    download_and_prepare: bool = True,
    download_config: tfds.download.DownloadConfig | None = None,
) -> tfds.core.DatasetBuilder:
    """The builder for `name`/`config`, built first when asked to and needed."""
    if builder_dir is not None:
        if not tf.io.gfile.exists(os.fspath(builder_dir)):
            raise ValueError(f"builder_dir={os.fspath(builder_dir)!r}: folder does not exist")
        return tfds.builder_from_directory(builder_dir)
    known_configs = _config_names(name)
    if config is not None and known_configs and str(config) not in known_configs:
        raise ValueError(
            f"config={config!r}: {name} has no such config; choose one of {sorted(known_configs)}"
        )
    builder = tfds.builder(name, config=None if config is None else str(config), data_dir=data_dir)
    if not builder.is_prepared():
        if not download_and_prepare:
            raise ValueError(
                f"download_and_prepare=False: {builder.info.full_name} is not built in "
                f"{builder.data_dir_root}; run `tfds build {name}` "
                "or pass download_and_prepare=True"
            )
        builder.download_and_prepare(download_config=download_config)
    return builder


def _config_names(name: str) -> set[str]:
    try:
        cls = tfds.builder_cls(name)
    except Exception as err:  # TFDS raises its own DatasetNotFoundError.
        raise ValueError(f"name={name!r}: no such registered dataset ({err})") from None
    return {c.name for c in (cls.BUILDER_CONFIGS or [])}


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
      image_size: output size, int or (height, width); images are resized only
        when the stored size differs. None keeps stored sizes (then batching
        needs a fixed-size config such as '224').
      cache: True caches decoded uint8 images in memory: fixed-size examples in one
        arena per split that epoch 1 fills, served in a new global order every epoch
        (see `fast_tfds.read.memory_cache`), others with `Dataset.cache()`. A path
        caches them in files with that prefix (its folder must exist; an existing folder
        holds them), False does not cache. File names add the dataset, split and a
        digest of the shard files (sizes, times), slice, image size, features and
        transform: a different pipeline or a rebuilt dataset never gets a stale cache.
        Only a full pass writes a cache that is later read (one stopped early, or
        killed, is discarded). One process at a time writes it (an OS lock on
        `<file>.lock`, freed when that process ends, so files left by a killed run are
        removed by the next); another process reads it once complete, and reads without
        a cache, with a warning, while it is being written. See `fast_tfds.read.cache`.
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
        dataset-specific options such as cropping use it.
      transform_keys: features `transform` needs besides the output's.
      service: 'grpc://HOST:PORT' of a tf.data service dispatcher: its workers
        read and decode (and `transform`) the examples, each exactly once per
        epoch; caching, shuffling, batching and the float conversion stay here.
        The workers need the shard files at the same path (shared or gs://
        data_dir). Order is never reproducible then. See `fast_tfds.read.service`.
      service_sharding: 'dynamic' (files handed out to whichever worker asks
        next: exactly once per epoch) or 'off' (every worker reads everything).
    """
    opts = _options(options, keywords)
    instructions = records.file_instructions(builder, split)
    service_address = None
    if opts.service is not None:
        service_address = service.check_reachable(opts.service)
    if opts.input_context is not None:
        instructions = records.shard_for_pipeline(instructions, opts.input_context)
        if opts.batch_size is not None:
            opts = opts.replace(
                batch_size=opts.input_context.get_per_replica_batch_size(opts.batch_size)
            )
    deterministic = opts.is_deterministic
    num_examples = records.num_examples(instructions)

    ds = records.read_records(
        instructions, shuffle=opts.shuffle, seed=opts.seed, deterministic=deterministic
    )
    keys = None
    if opts.as_supervised:
        keys = {*(builder.info.supervised_keys or ("image", "label")), *opts.transform_keys}
    features = builder.info.features
    output_fn = make_output_fn(opts.dtype, opts.as_supervised, builder.info.supervised_keys)
    encoded = _decoded_in_blocks(features, opts)
    parse_batch = None if encoded is None else make_batch_parser(features, keys)
    if parse_batch is not None and opts.cache is True:
        if not memory_cache.supports({**parse_batch.example_spec, **encoded}):
            parse_batch = None  # Strings cannot live in an arena: Dataset.cache() keeps them.
    if parse_batch is None:
        # The stored JPEGs need a resize, a transform or a tf.data service worker,
        # or a feature varies in length: parsed and decoded one example at a time.
        decode = make_decoder(features, opts.image_size, opts.transform, keys)
        ds = ds.map(decode, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    if service_address is not None:  # Everything above runs on the service's workers.
        ds = service.distribute(ds, service_address, opts.service_sharding)
    if parse_batch is not None and opts.cache is True:
        # The default path: stored JPEGs at the output size, decoded a block at a
        # time straight into the arena's rows in epoch 1.
        arena = _arena_options(opts, output_fn)
        ds, _ = memory_cache.cached_batches(
            ds, num_examples, parse_batch=parse_batch, encoded=encoded, **arena
        )
    elif parse_batch is not None:
        ds = _block_pipeline(ds, parse_batch, encoded, opts, output_fn)
    elif opts.cache is True and memory_cache.supports(ds.element_spec):
        ds, _ = memory_cache.cached_batches(ds, num_examples, **_arena_options(opts, output_fn))
    else:
        ds = _per_example_pipeline(ds, builder, split, instructions, opts, output_fn)
    if opts.epochs != 1:
        ds = ds.repeat(opts.epochs)
    ds = ds.prefetch(AUTOTUNE)
    if opts.service is None or opts.service_sharding == "dynamic":
        # Keras shows N/N steps and does not warn that the input "ran out of data".
        ds = ds.apply(tf.data.experimental.assert_cardinality(_cardinality(num_examples, opts)))
    tf_options = tf.data.Options()
    tf_options.deterministic = deterministic
    tf_options.autotune.enabled = True
    return ds.with_options(tf_options)


def _arena_options(opts: ReadOptions, output_fn) -> dict[str, Any]:
    return {
        "batch_size": opts.batch_size,
        "drop_remainder": opts.drop_remainder,
        "shuffle": opts.shuffle,
        "shuffle_buffer": opts.shuffle_buffer,
        "seed": opts.seed,
        "deterministic": opts.is_deterministic,
        "output_fn": output_fn,
    }


def _decoded_in_blocks(features, opts: ReadOptions) -> dict[str, tf.TensorSpec] | None:
    """{'image': its decoded spec} when the stored JPEGs already have the output
    size and are decoded a block at a time (no cache, or the arena), else None."""
    if opts.cache not in (True, False) or opts.service is not None:
        return None
    shape = stored_output_shape(features, opts.image_size, opts.transform)
    return None if shape is None else {"image": tf.TensorSpec(shape, tf.uint8)}


def _block_pipeline(records, parse_batch, encoded, opts: ReadOptions, output_fn):
    """shuffle buffer (of serialized records) ─ batch ─ parse and decode the block ─
    output: no cache, stored JPEGs at the output size."""
    deterministic = opts.is_deterministic
    if opts.shuffle:
        records = records.shuffle(
            opts.shuffle_buffer, seed=opts.seed, reshuffle_each_iteration=True
        )
    batch_size = opts.batch_size or memory_cache.UNBATCHED_BLOCK
    drop = opts.drop_remainder and opts.batch_size is not None
    decode_blocks = decode_jpeg_blocks(encoded, batch_size if drop else None)
    ds = records.batch(batch_size, drop_remainder=drop)
    ds = ds.map(
        lambda serialized: decode_blocks(parse_batch(serialized)),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )
    if opts.batch_size is None:
        ds = ds.unbatch()
    return ds.map(output_fn, num_parallel_calls=AUTOTUNE, deterministic=deterministic)


def _per_example_pipeline(ds, builder, split, instructions, opts: ReadOptions, output_fn):
    """cache (per example) ─ shuffle buffer ─ batch ─ output: for variable-size examples,
    file caches, and no cache."""
    deterministic = opts.is_deterministic
    if opts.cache is True:
        ds = ds.cache()
    elif opts.cache:  # Keyed by what is cached, and safe against killed and concurrent runs.
        ds = file_cache.cache_in_files(
            ds,
            opts.cache,
            dataset_name=builder.info.full_name,
            split=split,
            instructions=instructions,
            transform=opts.transform,
        )
    if opts.shuffle:
        ds = ds.shuffle(opts.shuffle_buffer, seed=opts.seed, reshuffle_each_iteration=True)
    if opts.batch_size is not None:
        ds = ds.batch(
            opts.batch_size,
            drop_remainder=opts.drop_remainder,
            num_parallel_calls=AUTOTUNE,
            deterministic=deterministic,
        )
    return ds.map(output_fn, num_parallel_calls=AUTOTUNE, deterministic=deterministic)


def _cardinality(num_examples: int, opts: ReadOptions) -> int:
    """Elements (batches, or examples) the dataset yields per iteration."""
    if opts.epochs is None:
        return tf.data.INFINITE_CARDINALITY
    per_epoch = records.batches_per_epoch(num_examples, opts.batch_size, opts.drop_remainder)
    return per_epoch * opts.epochs


def _options(options: ReadOptions | None, keywords: dict[str, Any]) -> ReadOptions:
    known = {f.name for f in dataclasses.fields(ReadOptions)}
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise TypeError(
            f"{unknown[0]}: not an option of as_fast_dataset/read_split; "
            f"the options are {', '.join(sorted(known))}"
        )
    return (options or ReadOptions()).replace(**keywords)
