"""The fast reader shared by both datasets.

    shard files ─ interleave(TFRecordDataset) ─ map(parse + decode to uint8)
      ─ cache(uint8) ─ shuffle ─ repeat ─ batch ─ map(to float32, per batch)
      ─ prefetch

Why this order: decoding is the expensive step, so it runs in parallel and its
uint8 output is what gets cached (0.15 MiB per 224 image, against 0.57 MiB as
float32); the float conversion is one vectorized op per batch; shuffling after
the cache gives a new order every epoch without decoding again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from typing import Any

import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_datasets.core import example_parser

from fast_tfds import cache as file_cache
from fast_tfds.service import check_service as _check_service
from fast_tfds.service import distribute as _distribute

AUTOTUNE = tf.data.AUTOTUNE
DEFAULT_IMAGE_SIZE = 224


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
    *,
    batch_size: int | None = 32,
    image_size: int | tuple[int, int] | None = DEFAULT_IMAGE_SIZE,
    cache: bool | str | os.PathLike = True,
    shuffle: bool = True,
    shuffle_buffer: int = 1024,
    seed: int | None = None,
    deterministic: bool | None = None,
    repeat: bool | int = False,
    drop_remainder: bool = False,
    dtype: tf.DType = tf.float32,
    as_supervised: bool = True,
    input_context: tf.distribute.InputContext | None = None,
    transform: Callable[[dict], dict] | None = None,
    transform_keys: Collection[str] = (),
    service: str | None = None,
    service_sharding: str = "dynamic",
) -> tf.data.Dataset:
    """Reads `split` of a prepared builder through the fast pipeline.

    Args:
      builder: a prepared TFDS builder (of any image dataset with an 'image' feature).
      split: split or slice ('train[:80%]'): the split's file instructions are used.
      batch_size: examples per batch (the global batch when input_context is
        given); None for unbatched examples.
      image_size: output size, int or (height, width); images are resized only
        when the stored size differs. None keeps stored sizes (then batching
        needs a fixed-size config such as '224').
      cache: True caches decoded uint8 images in memory, a path caches them in
        files with that prefix (its folder must exist; an existing folder holds
        them), False does not cache. File names add the dataset, split and a
        digest of the shard files (sizes, times), slice, image size, features
        and transform: a different pipeline or a rebuilt dataset never gets a
        stale cache. Only a full pass writes a cache that is later read (one
        stopped early, or killed, is discarded). One process at a time writes
        it (an OS lock on `<file>.lock`, freed when that process ends, so files
        left by a killed run are removed by the next); another process reads
        it once complete, and reads without a cache, with a warning, while it
        is being written. See `fast_tfds.cache`.
      shuffle: shuffle file order and examples (a new order every epoch).
      shuffle_buffer: examples in the shuffle buffer.
      seed: seed for both shuffles; with deterministic=True the order repeats.
      deterministic: keep a reproducible element order (slower). Default: True
        when a seed is given, else False.
      repeat: False for one epoch per iteration, True to repeat forever (the
        fastest for Keras: fit(steps_per_epoch=...) keeps one iterator), or a
        number of epochs.
      drop_remainder: drop the last incomplete batch.
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
        data_dir). Order is never reproducible then. See `fast_tfds.service`.
      service_sharding: 'dynamic' (files handed out to whichever worker asks
        next: exactly once per epoch) or 'off' (every worker reads everything).
    """
    if service is not None:  # Checked first: it decides `deterministic`.
        service = _check_service(service, service_sharding, deterministic)
        deterministic = False
    instructions = _file_instructions(builder, split)
    _validate(batch_size, image_size, cache, shuffle_buffer, dtype, repeat)
    if deterministic is None:
        deterministic = seed is not None
    if input_context is not None:
        instructions = _shard_for_pipeline(instructions, input_context)
        if batch_size is not None:
            batch_size = input_context.get_per_replica_batch_size(batch_size)

    ds = read_records(instructions, shuffle=shuffle, seed=seed, deterministic=deterministic)
    keys = None
    if as_supervised:
        keys = {*(builder.info.supervised_keys or ("image", "label")), *transform_keys}
    ds = ds.map(
        make_decoder(builder.info.features, image_size, transform, keys),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )
    if service is not None:  # Everything above runs on the service's workers.
        ds = _distribute(ds, service, service_sharding)
    if cache:
        if cache is True:
            ds = ds.cache()
        else:  # Keyed by what is cached, and safe against killed and concurrent runs.
            ds = file_cache.cache_in_files(
                ds,
                cache,
                dataset_name=builder.info.full_name,
                split=split,
                instructions=instructions,
                transform=transform,
            )
    if shuffle:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat is True:
        ds = ds.repeat()
    elif repeat:
        ds = ds.repeat(int(repeat))
    if batch_size is not None:
        ds = ds.batch(
            batch_size,
            drop_remainder=drop_remainder,
            num_parallel_calls=AUTOTUNE,
            deterministic=deterministic,
        )
    ds = ds.map(
        _make_output_fn(dtype, as_supervised, builder.info.supervised_keys),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )
    ds = ds.prefetch(AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = deterministic
    options.autotune.enabled = True
    return ds.with_options(options)


# -- reading -------------------------------------------------------------------


def _file_instructions(builder, split: str) -> list[tfds.core.utils.shard_utils.FileInstruction]:
    try:
        split_info = builder.info.splits[split]
    except (KeyError, ValueError, AssertionError) as err:
        available = ", ".join(sorted(builder.info.splits.keys())) or "none"
        raise ValueError(
            f"split={split!r}: not a split or slice of {builder.info.full_name} "
            f"(splits: {available}; slices look like 'train[:80%]'): {err}"
        ) from None
    instructions = [fi for fi in split_info.file_instructions if fi.take != 0]
    if not instructions:
        raise ValueError(f"split={split!r}: selects no examples of {builder.info.full_name}")
    return instructions


def _shard_for_pipeline(instructions, input_context: tf.distribute.InputContext):
    n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
    if len(instructions) < n:
        raise ValueError(
            f"input_context: {n} input pipelines but only {len(instructions)} shard files "
            "in this split; rebuild with more shards or use fewer pipelines"
        )
    return instructions[i::n]


def read_records(
    instructions, *, shuffle: bool, seed: int | None, deterministic: bool
) -> tf.data.Dataset:
    """Serialized examples of the given file instructions, files read in parallel."""
    files = tf.data.Dataset.from_tensor_slices(
        (
            [os.fspath(fi.filename) for fi in instructions],
            tf.constant([fi.skip for fi in instructions], tf.int64),
            tf.constant([fi.take for fi in instructions], tf.int64),
        )
    )
    if shuffle:
        files = files.shuffle(len(instructions), seed=seed, reshuffle_each_iteration=True)
    return files.interleave(
        checked_shard_records,
        cycle_length=min(len(instructions), max(4, os.cpu_count() or 1)),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )


# Records are counted in groups: a tf.data function call per record (a map, a
# filter) halves the record rate, one per group costs nothing measurable.
_CHECK_GROUP = 32


def checked_shard_records(filename, skip, take) -> tf.data.Dataset:
    """Records skip..skip+take of one shard, or an error that names the shard.

    TFRecordDataset's own DataLossError ("corrupted record at 99398") does not
    say which file, and tf.data has no per-file error hook. So a read error
    ends the shard's records early (`ignore_errors`: a one-file TFRecordDataset
    ends after its first bad record), a count checks that all `take` came, and
    if not, an InvalidArgumentError names the file and what to do. Nothing is
    skipped silently: the epoch fails.
    """
    records = tf.data.TFRecordDataset(filename).skip(skip).take(take)
    # ignore_errors retries its input until it gets an element or the end. A
    # shard that cannot be opened (missing, unreadable) fails every retry: the
    # zip with a range bounds the retries, since each one uses up a number.
    bounded = tf.data.Dataset.zip(tf.data.Dataset.range(take + 1), records).ignore_errors()
    groups = bounded.batch(_CHECK_GROUP).map(lambda _, group: (group, tf.constant(False)))
    end = tf.data.Dataset.from_tensors((tf.constant([b""]), tf.constant(True)))

    def fail(n):
        # Built only on failure: the message costs a regex and a join.
        message = _shard_error(filename, n, take)
        with tf.control_dependencies([tf.debugging.Assert(False, [message])]):
            return tf.constant(False)

    def count(n, item):
        group, is_end = item
        complete = tf.logical_or(tf.logical_not(is_end), tf.equal(n, take))
        check = tf.cond(complete, lambda: tf.constant(True), lambda: fail(n))
        with tf.control_dependencies([check]):
            return n + tf.size(group, out_type=tf.int64), (tf.identity(group), is_end)

    counted = groups.concatenate(end).scan(tf.constant(0, tf.int64), count)
    checked = counted.filter(lambda group, is_end: tf.logical_not(is_end))
    return checked.map(lambda group, is_end: group).unbatch()


def _shard_error(filename: tf.Tensor, n: tf.Tensor, take: tf.Tensor) -> tf.Tensor:
    folder = tf.strings.regex_replace(filename, r"[/\\][^/\\]*$", "")
    return tf.strings.join(
        [
            "fast_tfds: shard ",
            filename,
            " gave ",
            tf.strings.as_string(n),
            " of the ",
            tf.strings.as_string(take),
            " records the dataset's metadata lists: it is missing, truncated or "
            "corrupt (a TFRecord length or CRC check failed). Check every shard with "
            "`fast-tfds verify ",
            folder,
            "`, then rebuild the dataset (`tfds build ... --overwrite`).",
        ]
    )


# -- decoding ------------------------------------------------------------------


def make_decoder(
    features: tfds.features.FeaturesDict,
    image_size: int | tuple[int, int] | None,
    transform: Callable[[dict], dict] | None = None,
    keys: Collection[str] | None = None,
) -> Callable[[tf.Tensor], dict]:
    """fn(serialized example) -> dict with 'image' as uint8 [H, W, 3] and the other features.

    Only `keys` (default: all features) are parsed: skipping the filename string
    of every example is measurable at thousands of images per second. Labels,
    filenames and boxes go through TFDS's own feature decoders; the image is
    decoded here, resized only when the stored size differs.
    """
    keys = set(features.keys() if keys is None else keys) | {"image"}
    serialized_info = features.get_serialized_info()
    parser = example_parser.ExampleParser({k: serialized_info[k] for k in keys})
    target = _as_hw(image_size)
    # A transform (a crop) changes the size, so the stored size is known only without one.
    stored = features["image"].shape[:2] if transform is None else (None, None)
    other = {k: features[k] for k in keys if k != "image"}

    def decode(serialized: tf.Tensor) -> dict:
        raw = parser.parse_example(serialized)
        example = {k: feature.decode_example(raw[k]) for k, feature in other.items()}
        example["image"] = raw["image"]  # Still JPEG bytes: `transform` may crop them.
        if transform is not None:
            example = transform(example)
        if example["image"].dtype == tf.string:
            example["image"] = tf.io.decode_jpeg(example["image"], channels=3)
        example["image"] = resize_uint8(example["image"], target, stored)
        return example

    return decode


def resize_uint8(
    image: tf.Tensor, target: tuple[int, int] | None, stored=(None, None)
) -> tf.Tensor:
    """Bilinear resize to `target`, skipped when the stored size already matches."""
    if target is None:
        return image
    if tuple(stored) == tuple(target):
        return tf.ensure_shape(image, (*target, 3))

    def resized():
        return tf.cast(tf.round(tf.image.resize(image, target)), tf.uint8)

    same = tf.reduce_all(tf.equal(tf.shape(image)[:2], target))
    image = tf.cond(same, lambda: image, resized)
    return tf.ensure_shape(image, (*target, 3))


@tf.function(jit_compile=True)
def to_unit_float(images: tf.Tensor) -> tf.Tensor:
    """uint8 -> float32 in [0, 1]. XLA fuses the cast and the scale into one pass
    over memory: ~2.7x faster than the two separate ops on a 2-core CPU, where
    this conversion otherwise costs as much as decoding the JPEGs."""
    return tf.cast(images, tf.float32) * (1.0 / 255.0)


def _make_output_fn(dtype: tf.DType, as_supervised: bool, supervised_keys):
    def output(example: dict):
        image = example["image"]
        if dtype == tf.float32:
            image = to_unit_float(image)
        example = {**example, "image": image}
        if as_supervised:
            image_key, label_key = supervised_keys or ("image", "label")
            return example[image_key], example[label_key]
        return example

    return output


# -- arguments -----------------------------------------------------------------


def _as_hw(image_size) -> tuple[int, int] | None:
    if image_size is None:
        return None
    if isinstance(image_size, int) and not isinstance(image_size, bool):
        return (image_size, image_size)
    return tuple(image_size)


def _validate(batch_size, image_size, cache, shuffle_buffer, dtype, repeat) -> None:
    if batch_size is not None and (
        not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1
    ):
        raise ValueError(f"batch_size={batch_size!r}: must be a positive integer or None")
    if image_size is not None:
        ok_int = isinstance(image_size, int) and not isinstance(image_size, bool) and image_size > 0
        ok_pair = (
            isinstance(image_size, (tuple, list))
            and len(image_size) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in image_size)
        )
        if not (ok_int or ok_pair):
            raise ValueError(
                f"image_size={image_size!r}: must be a positive int, "
                "a (height, width) pair, or None"
            )
    if cache is not True and cache is not False:
        if not isinstance(cache, (str, os.PathLike)) or not os.fspath(cache):
            raise ValueError(f"cache={cache!r}: must be True, False or a file path prefix")
        folder = os.path.dirname(os.path.abspath(os.fspath(cache)))
        if not tf.io.gfile.isdir(folder):
            raise ValueError(f"cache={os.fspath(cache)!r}: folder {folder} does not exist")
    if not isinstance(shuffle_buffer, int) or shuffle_buffer < 1:
        raise ValueError(f"shuffle_buffer={shuffle_buffer!r}: must be a positive integer")
    if dtype not in (tf.float32, tf.uint8):
        raise ValueError(f"dtype={dtype!r}: must be tf.float32 (scaled to [0, 1]) or tf.uint8")
    if repeat is not True and repeat is not False and (not isinstance(repeat, int) or repeat < 1):
        raise ValueError(f"repeat={repeat!r}: must be True, False or a positive number of epochs")
