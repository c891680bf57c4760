"""The options of `as_fast_loader`, validated once, in one frozen object.

Users pass keywords (`as_fast_loader(name, split, batch_size=64, ...)`); the loader
turns them into a `LoaderOptions` whose constructor checks each one with the
checks the tf.data reader's `ReadOptions` uses, and raises a one-line ValueError
that starts with the argument. What depends on the split (its size against
`shard_count`, an image size for images stored at their own sizes) is checked
when the loader is made. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses

from fast_tfds.augment.mixing import check_mix
from fast_tfds.augment.progressive import check_progressive
from fast_tfds.augment.spec import check_augment
from fast_tfds.core.options import SharedOptions, check_int, check_shared

# cache="auto" (the default): cache=True in this process (num_workers=0); with worker
# processes, a complete persisted file if there is one, else no cache (one log line).
AUTO = "auto"


@dataclasses.dataclass(frozen=True)
class LoaderOptions(SharedOptions):
    """What `as_fast_loader` does (the options the tf.data reader takes too, with their
    defaults, are `SharedOptions`').

    Attributes:
      batch_size: examples per batch.
      image_size: int or (height, width) every image is resized to, only when
        its size differs; None keeps the stored size (the '224' config). With
        `augment` cropping, a `ProgressiveResize` gives each epoch its own size.
      shuffle, seed: a new permutation of the shard every epoch; with a seed the
        orders repeat from run to run (without one a seed is drawn, and kept in
        the iterator's state). Any 64-bit seed, as in tf.data: the shuffle (Grain's,
        of 32 bits) takes it modulo 2**32, the crops and mixes take all 64 bits.
        shuffle=False: the split's record order (shard file by shard file, record
        by record, as `tfds.data_source` indexes it), every epoch, on every path.
      num_epochs: epochs per `iter(loader)`; None = endless (JAX style, with
        steps). Each `iter()` starts at the epoch after the last one completed
        (`FastLoader.pass_clock`).
      drop_remainder: drop each epoch's last, partial batch.
      shard_index, shard_count: this process's share of the examples, for
        multi-host training (jax.process_index(), jax.process_count()):
        every shard_count-th example from shard_index; the shards are disjoint
        and together complete.
      num_threads: decoding threads per process (None: one per core).
      num_workers: decoding processes besides this one (0: decode in this
        process's threads, the fastest on few cores).
      worker_buffer_size: batches each worker process prepares ahead.
      augment: a `fast_tfds.Augment` (random-resized or center crop, flip, colour
        jitter), drawn for each example from (seed, epoch, example index): a new
        window every epoch, the same ones on a seeded rerun or after `set_state`.
        None: every image resized whole, as stored.
      cache: "auto" (default): True with num_workers=0; with worker processes, the
        persisted file of this read if one is complete (`persist`), else no cache,
        with one log line. True: keep each picture decoded in memory after its
        first epoch, so later epochs decode nothing. With `augment` cropping,
        the pictures are kept at `cache_shorter_side` (aspect kept, never enlarged)
        and every epoch's crops are cut from them; otherwise at the output size.
        Needs num_workers=0 (the cache lives in this process), unless persisted
        (`persist`). Its size is
        `FastLoader.cache_bytes`, fixed when the loader is made: for images of their
        own sizes (or cut to a hook's window) that reads each record's JPEG header
        once, decoding nothing.
        A cache over the memory budget goes to a memory-mapped file in `cache_dir`
        (one log line), as the tf.data reader's does. False: decode every epoch.
      cache_budget: bytes the in-memory cache may take. Default: three quarters of
        what the process may still use (its cgroup's memory limit in a container,
        else MemAvailable); over it, the cache goes to `cache_dir` (see
        `fast_tfds.cache.placement`).
      cache_shorter_side: the cached pictures' shorter side; None: output * 8/7
        (256 for 224), which serves a 0.875 center crop at full resolution.
      cache_dir: the local folder of caches on disk and persistent caches (default:
        $FAST_TFDS_CACHE_DIR, else $XDG_CACHE_HOME/fast_tfds, else ~/.cache/fast_tfds);
        `fast-tfds cache list|clean` shows and removes them.
      persist: True keeps the cache (cache=True) in a file in `cache_dir` that outlives
        the process: the first run fills it (one log line says where and how big),
        every later or concurrent run maps it and serves from its first epoch, reading
        no record. The file holds the pictures and labels, not the augmentation, and
        is the one `as_fast_dataset(augment=..., persist=True)` makes of the same build
        (the same key: dataset and version, split, this shard's examples, every shard
        file of the split in either format, output size, cache resolution, the
        dataset's settings, decoder version), so either back end serves the other's.
        With num_workers > 0 the file must be there, complete: each worker process maps
        it (the page cache holds one copy for all) and none fills it; without it the
        loader stops with one line that says to fill it once with num_workers=0.
        Targets beyond the label (with_boxes) are not kept: the run caches in memory,
        with one log line. Off by default (disk is used only when asked).
      with_index: batches are (images, targets, indices): each example's index in the
        split (int64, its position in record order, numbered before the hosts share
        the examples), to join predictions with the examples. With shard_count > 1
        and shuffle=False, every host then yields the same number of full batches
        (those of the largest share): padding examples, at the end, have index -1,
        label 0 and a zero image (the mask is `indices >= 0`). For your own loops:
        Keras' fit and evaluate read a third element as sample weights.
      mix: a `fast_tfds.Mix` (MixUp / CutMix, label smoothing): each batch, once made,
        is mixed with itself flipped (picture i with B - 1 - i), drawn from (seed,
        epoch, batch index), and its labels become float32 one-hot rows [batch,
        num_classes] summing to 1; the uint8 blend is rounded to whole levels. A last
        odd batch's middle picture is left as it is, with its own label. The tf.data
        reader's batches are other batches, so its mixes differ. Not for evaluation
        (shuffle=False, `Augment.eval()`). None: labels as stored.
    """

    cache: bool | str = AUTO
    num_threads: int | None = None
    num_workers: int = 0
    worker_buffer_size: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.cache, bool) and self.cache != AUTO:
            raise ValueError(f"cache={self.cache!r}: must be True, False or {AUTO!r}")
        check_shared(self, unbatched=False, in_memory=self.caches)
        check_progressive(self.image_size, self.augment, caller="as_fast_loader")
        check_int("num_threads", self.num_threads, optional=True)
        check_int("num_workers", self.num_workers, minimum=0)
        check_int("worker_buffer_size", self.worker_buffer_size)
        check_augment(self.augment)
        check_mix(self.mix, shuffle=self.shuffle, augment=self.augment)
        if self.cache is True and self.num_workers and not self.persist:
            raise ValueError(
                f"cache=True: needs num_workers=0 (not {self.num_workers}); the cache lives "
                "in this process, and its threads decode in parallel"
            )

    @property
    def caches(self) -> bool:
        """Whether a picture store is made: cache=True, or "auto" in this process (with
        workers "auto" looks for a persisted file, `fast_tfds.loader.cached`)."""
        return self.cache is True or self.cache == AUTO
