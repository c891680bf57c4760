"""The options of `read_split`, validated once, in one frozen object.

Users pass keywords (`as_fast_dataset(split, batch_size=64, ...)`); the reader
turns them into a `ReadOptions` whose constructor checks each one and raises a
one-line ValueError that names the argument. The plans read small typed parts of it
(`cache_choice`, `order`, `batching`), never the whole bag.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Callable, Collection

import tensorflow as tf

from fast_tfds.augment.mixing import check_mix
from fast_tfds.augment.progressive import check_progressive
from fast_tfds.augment.spec import check_augment
from fast_tfds.cache.remote import object_stores
from fast_tfds.core.options import (
    SharedOptions,
    check_bool,
    check_int,
    check_shared,
    is_int,
    warn_renamed,
)

SHARDING_POLICIES = ("dynamic", "off")


class CacheKind(enum.Enum):
    """What `cache=` asks for: True, a path, or False."""

    MEMORY = "memory"  # cache=True
    FILES = "files"  # cache="PATH"
    OFF = "off"  # cache=False


@dataclasses.dataclass(frozen=True)
class CacheChoice:
    """The `cache`, `cache_budget`, `cache_dir` and `persist` keywords, read once."""

    kind: CacheKind
    path: str | None = None  # FILES: the prefix of the cache's files.
    budget: int | None = None  # MEMORY: bytes its rows may take in memory.
    folder: str | os.PathLike | None = None  # MEMORY: where rows over the budget go.
    persist: bool = False  # MEMORY: the arena is a file in `folder` that outlives the run.

    @classmethod
    def of(
        cls, cache: bool | str | os.PathLike, budget=None, folder=None, persist=False
    ) -> CacheChoice:
        if cache is True:
            return cls(CacheKind.MEMORY, budget=budget, folder=folder, persist=persist)
        if cache is False:
            return cls(CacheKind.OFF)
        return cls(CacheKind.FILES, path=os.fspath(cache))


@dataclasses.dataclass(frozen=True)
class Order:
    """How examples are ordered: shuffled or not, reproducibly or not."""

    shuffle: bool
    shuffle_buffer: int
    seed: int | None
    deterministic: bool


@dataclasses.dataclass(frozen=True)
class Batching:
    """How examples become batches: None for unbatched examples."""

    batch_size: int | None
    drop_remainder: bool


@dataclasses.dataclass(frozen=True)
class ReadOptions(SharedOptions):
    """What `read_split` (and `as_fast_dataset`) does. Every field is a keyword of both
    (those the loader takes too, with their defaults, are `SharedOptions`').

    Attributes:
      batch_size: examples per batch (the global batch when `input_context` is
        given, this host's with `shard_count`); None for unbatched examples.
      image_size: output size, int or (height, width). Images are decoded a block
        at a time with libjpeg-turbo, at a reduced DCT scale where that is faster
        than a full decode, and resized (close to `tf.image.resize(antialias=True)`;
        see docs/reading.md); stored images already at the size keep TensorFlow's
        exact pixels. None keeps stored sizes (then batching needs a fixed-size
        config such as '224'). With `augment` cropping, a `ProgressiveResize` gives
        each epoch its own size (small first, growing), cut from the same cache.
      cache: True caches decoded uint8 images in memory: fixed-size examples in one
        arena per split that epoch 1 fills, served in a new global order every epoch
        (see `fast_tfds.cache.arena`), others with `Dataset.cache()`. A path caches
        them in files with that prefix (its folder must exist; an existing folder
        holds them), False does not cache. File names add the dataset, split and a
        digest of the shard files (sizes, times), slice, image size, features and
        transform: a different pipeline or a rebuilt dataset never gets a stale cache.
        Only a full pass writes a cache that is later read (one stopped early, or
        killed, is discarded). One process at a time writes it (an OS lock on
        `<file>.lock`, freed when that process ends, so files left by a killed run are
        removed by the next); another process reads it once complete, and reads
        without a cache, with a warning, while it is being written. See
        `fast_tfds.cache.tf_file_cache`.
      cache_budget: bytes the in-memory cache may take. Default: three quarters of
        what the process may still use (its cgroup's memory limit in a container,
        else MemAvailable). A cache over the budget goes to a memory-mapped file in
        `cache_dir` instead, with one log line; if that folder lacks room too, the
        read fails at once with one line. See `fast_tfds.cache.placement`.
      cache_dir: the local folder of such files, and of persistent caches (default:
        $FAST_TFDS_CACHE_DIR, else $XDG_CACHE_HOME/fast_tfds, else ~/.cache/fast_tfds);
        `fast-tfds cache list|clean` shows and removes them.
      persist: True keeps the arena (cache=True) in a file in `cache_dir` that outlives
        the process: the first run fills it (one log line says where and how big),
        every later or concurrent run with the same key (dataset and version, split,
        shard files and their times, output size, dtype, features, decoder version)
        maps it and serves from its first epoch, without decoding. Off by default: the
        decoded cache is many times the size of the JPEGs (150 KB per image at 224 px),
        so disk is used only when asked. A damaged or stale file is refilled; a read-only
        folder is read without writing. With `augment`, the file holds the cached
        pictures (at `cache_shorter_side`) and the label, not the augmentation, so any
        recipe of that cache resolution, and `as_fast_loader(persist=True)` of the
        same build, shares it; features that are strings (as_supervised=False) cannot
        be kept, and are cached in memory for the run (one log line). See
        docs/reading.md and `fast_tfds.cache.persisted`.
      shuffle: shuffle file order and examples (a new order every epoch); epochs
        served from the arena are a permutation of the whole split. False: the
        split's record order (as `tfds.data_source` and `tfds.load(...,
        shuffle_files=False)` index it), the same on every pass and in every process,
        whatever the cache; the files are still read and decoded in parallel.
      shuffle_buffer: examples in the shuffle buffer of epochs that decode (epoch 1
        with the arena; every epoch without it).
      seed: seed for the shuffles and the augmentation: each epoch's order, crops and
        size come from (seed, epoch), so a run resumed at an epoch with
        `fast_tfds.set_epoch` (or the `fast_tfds.KerasEpochs` callback) continues as
        an uninterrupted one would. Without a seed one is drawn per dataset.
      deterministic: keep a reproducible element order (slower). Default: True when
        a seed is given or shuffle=False, else False.
      num_epochs: passes per iteration: 1 (default), a number N, or None to repeat
        forever (the fastest for Keras: fit(steps_per_epoch=...) keeps one iterator).
        Batches never straddle two epochs. The epoch of a pass is the number
        of passes over this dataset completed before it (its last batch delivered),
        not of iterators made: a peek (`next(iter(ds))`) or a dropped iterator does
        not move it (`fast_tfds.core.passes`).
      repeat: the former name of `num_epochs` (False: 1, True: None, N: N); it warns
        (FutureWarning) and goes in the next minor version.
      drop_remainder: drop each epoch's last incomplete batch.
      dtype: tf.float32 for images scaled to [0, 1], tf.uint8 for raw pixels.
      as_supervised: (image, label) tuples, else dicts of all features.
      shard_index: this host's share, for multi-host training: whole shard files,
        every shard_count-th from shard_index (instructions[i::n]); the shares are
        disjoint and together complete. With shard_count > 1, shuffle=False and
        with_index=True, every host yields the same number of full batches (that of
        the largest share), padded with examples of index -1.
      shard_count: the number of hosts sharing the split (1: all of it here).
      input_context: a tf.distribute.InputContext: gives shard_index and shard_count
        (its input_pipeline_id and num_input_pipelines), and batch_size is then the
        global batch, divided among the replicas.
      with_index: add each example's index in the split (its position in the record
        order, numbered before an input_context takes its share): (image, label,
        index) with as_supervised, else an "index" feature; int64.
      transform: an optional fn(example dict) -> example dict applied after parsing
        (the image still JPEG bytes) and before decoding and the cache;
        dataset-specific options such as cropping use it. To crop, it may add
        `fast_tfds.read.decoding.WINDOW_KEY` (int32 [top, left, height, width])
        rather than decode.
      transform_keys: features `transform` needs besides the output's.
      service: 'grpc://HOST:PORT' of a tf.data service dispatcher: its workers read
        and decode (and `transform`) the examples, each exactly once per epoch;
        caching, shuffling, batching and the float conversion stay here. The workers
        need the shard files at the same path (shared or gs:// data_dir). Order is
        never reproducible then. See `fast_tfds.read.service`.
      service_sharding: 'dynamic' (files handed out to whichever worker asks next:
        exactly once per epoch) or 'off' (every worker reads everything).
      augment: a `fast_tfds.Augment` (random-resized or center crop, flip, colour
        jitter) drawn for each example from (seed, epoch, example index): a new
        window every epoch, the same as the Grain loader's for the same seed, epoch
        and example (the example's position in the split as read; epochs count from
        0, counted in completed passes). Without a seed one is drawn, so epochs
        still differ. With cache=True each picture is decoded once, in epoch 1, at
        `cache_shorter_side` (in memory, or on disk over the memory budget), and
        every epoch's crops are cut from it: later epochs neither decode nor open
        the shard files. With cache=False each crop is chosen before decoding and
        only what it needs is decoded. Needs a fixed `image_size`; not with a
        file cache (cache=PATH) nor `service`. None: no augmentation.
      cache_shorter_side: with `augment` and cache=True, the cached pictures'
        shorter side (aspect kept, never enlarged); None: output * 8/7 (256 for
        224), which serves a 0.875 center crop at full resolution.
      mix: a `fast_tfds.Mix` (MixUp / CutMix, label smoothing): each batch, once made,
        is mixed with itself flipped (picture i with B - 1 - i), drawn from (seed,
        epoch, batch index), and its labels become float32 one-hot rows [batch,
        num_classes] of the label feature's classes, summing to 1. The blend is made
        on uint8 pixels, rounded to whole levels (float32 output is that / 255).
        A last odd batch's middle picture is left as it is, with its own label. The
        loader's batches are other batches, so its mixes differ. Needs batch_size;
        not for evaluation (shuffle=False, `Augment.eval()`). None: labels as stored.
    """

    shuffle_buffer: int = 1024
    deterministic: bool | None = None
    repeat: bool | int | None = None  # The former name of num_epochs: None when not given.
    dtype: tf.DType = tf.float32
    as_supervised: bool = True
    input_context: tf.distribute.InputContext | None = None
    transform: Callable[[dict], dict] | None = None
    transform_keys: Collection[str] = ()
    service: str | None = None
    service_sharding: str = "dynamic"

    def __post_init__(self) -> None:
        if self.repeat is not None:
            self._take_repeat()
        if self.input_context is not None:
            self._take_input_context()
        _check_cache(self.cache)
        check_shared(self, unbatched=True, in_memory=self.cache is True)
        check_progressive(self.image_size, self.augment, caller="as_fast_dataset")
        check_int("shuffle_buffer", self.shuffle_buffer)
        if self.deterministic is not None:
            check_bool("deterministic", self.deterministic)
        check_bool("as_supervised", self.as_supervised)
        if self.dtype not in (tf.float32, tf.uint8):
            raise ValueError(
                f"dtype={self.dtype!r}: must be tf.float32 (scaled to [0, 1]) or tf.uint8"
            )
        if self.service is not None:
            if self.service_sharding not in SHARDING_POLICIES:
                raise ValueError(
                    f"service_sharding={self.service_sharding!r}: must be one of "
                    f"{', '.join(SHARDING_POLICIES)}"
                )
            if self.deterministic:
                raise ValueError(
                    "deterministic=True: with service= the workers deliver examples as they "
                    "decode them, so the order cannot be reproduced; leave deterministic unset"
                )
        check_augment(self.augment)
        if self.augment is not None:
            _check_augmented(self)
        check_mix(self.mix, shuffle=self.shuffle, augment=self.augment)
        if self.mix is not None and self.batch_size is None:
            raise ValueError(
                "batch_size=None: mix= mixes the pictures of a batch; give batch_size="
            )
        object.__setattr__(self, "transform_keys", tuple(self.transform_keys))

    def _take_repeat(self) -> None:
        """`repeat=` as `num_epochs=`, with a FutureWarning at the user's line."""
        repeat = self.repeat
        if not isinstance(repeat, bool) and (not is_int(repeat) or repeat < 1):
            raise ValueError(
                f"repeat={repeat!r}: must be True, False or a positive number of epochs"
            )
        if self.num_epochs != 1:
            raise ValueError(
                f"repeat={repeat!r}: is the former name of num_epochs=; give num_epochs= alone"
            )
        warn_renamed("repeat", "num_epochs")
        num_epochs = None if repeat is True else 1 if repeat is False else repeat
        object.__setattr__(self, "num_epochs", num_epochs)
        object.__setattr__(self, "repeat", None)  # so that `replace` does not warn again

    def _take_input_context(self) -> None:
        """`shard_index`/`shard_count` from the input context (they must agree if given)."""
        context = self.input_context
        index, count = context.input_pipeline_id, context.num_input_pipelines
        if (self.shard_index, self.shard_count) not in ((0, 1), (index, count)):
            raise ValueError(
                f"shard_index={self.shard_index}, shard_count={self.shard_count}: input_context "
                f"gives {index} of {count}; give one of them"
            )
        object.__setattr__(self, "shard_index", index)
        object.__setattr__(self, "shard_count", count)

    @property
    def cache_choice(self) -> CacheChoice:
        """`cache`, `cache_budget`, `cache_dir` and `persist` as one typed value."""
        return CacheChoice.of(self.cache, self.cache_budget, self.cache_dir, self.persist)

    @property
    def order(self) -> Order:
        return Order(self.shuffle, self.shuffle_buffer, self.seed, self.is_deterministic)

    @property
    def batching(self) -> Batching:
        return Batching(self.batch_size, self.drop_remainder)

    @property
    def is_deterministic(self) -> bool:
        """Reproducible order: asked for, or implied by a seed (never with a service)."""
        if self.service is not None:
            return False
        if self.deterministic is None:
            # shuffle=False promises the split's record order; shuffle=True only
            # repeats with a seed, and is fastest unordered without one.
            return self.seed is not None or not self.shuffle
        return bool(self.deterministic)

    @property
    def epochs(self) -> int | None:
        """Epochs per iteration: None for forever."""
        return self.num_epochs


def _check_augmented(opts: ReadOptions) -> None:
    """What `augment` cannot go with, each a one-line ValueError naming the argument."""
    if opts.image_size is None:
        raise ValueError(
            "image_size=None: augment= crops and resizes every picture to one output "
            "size; give image_size= (e.g. 224)"
        )
    if opts.cache is not True and opts.cache is not False:
        raise ValueError(
            f"cache={os.fspath(opts.cache)!r}: a file cache would freeze the augmented "
            "pictures of epoch 1; with augment= use cache=True (pictures cached, new crops "
            "every epoch) or cache=False"
        )
    if opts.service is not None:
        raise ValueError(
            f"service={opts.service!r}: augment= crops before decoding, here; read "
            "without service= or without augment="
        )


def _check_cache(cache) -> None:
    if cache is True or cache is False:
        return
    if not isinstance(cache, (str, os.PathLike)) or not os.fspath(cache):
        raise ValueError(f"cache={cache!r}: must be True, False or a file path prefix")
    path = os.fspath(cache)
    if "://" in path:
        # gs://, s3://, ram://: a folder is not a thing to check on object stores;
        # TensorFlow's file system reports what it cannot write.
        scheme, _, location = path.partition("://")
        store = object_stores.STORES.get(scheme)
        if store is not None and not store.tensorflow_reads:
            raise ValueError(
                f"cache={path!r}: TensorFlow's file cache cannot write {scheme}:// (TensorFlow "
                "reads gs:// only); give a local or gs:// file prefix, or cache=True (memory)"
            )
        if "/" not in location.strip("/"):
            raise ValueError(
                f"cache={path!r}: give a file prefix inside a bucket or folder, "
                f"e.g. {scheme}://BUCKET/cache"
            )
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not tf.io.gfile.isdir(folder):
        raise ValueError(f"cache={path!r}: folder {folder} does not exist")
