"""The loader: a Grain pipeline over a split's ArrayRecord files, yielding numpy batches.

One epoch of this process's shard is a Grain `MapDataset`, a pure function of the
batch index:

    records[shard_index::shard_count], tagged -> shuffle(seed) -> batch (decoded, augmented)

Grain's shuffle (its order, each epoch's permutation made at once: `shuffle`)
permutes the whole shard (no buffer) with a new seed every epoch, and its
batching keeps epochs apart, so batch `p` of the repeated dataset belongs to
epoch `p // len(loader)` and depends only on the seed, the shard and `p`. An
iterator's state is therefore just its position: resuming slices the dataset
there and gives exactly the rest of the epoch, whatever the number of threads
or workers.

Every read has that one shape: the shard's records are tagged with their epoch and
example index (numbered in the split), and whole batches are made by `augmented.AugmentedBatches`
(Grain's `batch_fn`): windows drawn from (seed, epoch, example), pictures decoded or
cut from the picture store (`cached`); a plain read is the identity augmentation.

The epoch an `iter()` starts at is the loader's `pass_clock`'s (`fast_tfds.core.passes`):
the number of passes completed, a pass being complete when its last batch has been
delivered. An iterator dropped early (a peek, Keras' shape reads) moves nothing.

The loader keeps one stream of batches running across epochs (decode threads,
or worker processes with their prefetch), so a new epoch neither restarts
workers nor waits for a first batch: the next `iter()` continues the stream
when it starts where the last epoch ended.

The loader is a `grain.IterDataset`, so that Keras 3 (any backend) takes it as it is.
"""

from __future__ import annotations

import atexit
import functools
import random
import weakref
from typing import Any

import grain
import numpy as np

from fast_tfds.augment import mixing
from fast_tfds.augment.progressive import ProgressiveResize
from fast_tfds.cache import persisted
from fast_tfds.core import platform
from fast_tfds.core.options import SEED_LIMIT
from fast_tfds.core.passes import PassClock
from fast_tfds.loader import augmented, cached, padding, shuffle
from fast_tfds.loader.array_records import SplitSource
from fast_tfds.loader.examples import DecodeExample
from fast_tfds.loader.options import LoaderOptions

STATE_VERSION = 1
# An iterator's first batches that the loader keeps a copy of, for the next iterator:
# Keras reads two to infer shapes, then starts the epoch with a new iterator.
PEEKED = 2

# Loaders with a running stream, closed at exit while the modules that Grain's
# shared-memory cleanup needs still exist.
_RUNNING: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_running_loaders() -> None:
    for loader in list(_RUNNING):
        loader.close()
    # Closing may have completed a persist=True fill: its file is written out first.
    persisted.finish_writing()


class FastLoader(grain.IterDataset):
    """Batches of one shard of a split, one epoch per `iter()` (`num_epochs` to change).

    Each `iter(loader)` starts at the epoch after the last one completed (its last
    batch delivered), in a new order, as a shuffling `torch.utils.data.DataLoader`
    does; with a seed the sequence of orders is the same on every run. An iterator
    dropped before the end of its epoch completes nothing: the next one starts that
    epoch again. `set_epoch(epoch, batch)` moves the start (a resumed run). Iterators
    are checkpointable (`FastLoaderIterator.get_state`). `close()` stops the decode
    threads and workers (garbage collection does it too).

    A `grain.IterDataset`: Keras 3 takes it as it is (`model.fit(loader, epochs=N)`,
    `validation_data=`, `predict`, `evaluate`), on every backend.
    """

    def __init__(
        self,
        source: SplitSource,
        decode: DecodeExample,
        options: LoaderOptions,
        *,
        persist_identity: dict | None = None,
    ):
        """`persist_identity`: what the dataset's settings change in pixels or targets
        (`DatasetHook.persist_identity`), for the key of a persistent cache; by default
        nothing without a hook's parts, and targets beyond the label with them."""
        super().__init__()
        if persist_identity is None and decode.parts is None:
            persist_identity = {}
        self.persist_identity = persist_identity
        self._stream = None  # The running batch iterator, and the position it is at.
        self._stream_position = -1
        self._peeked: dict[int, Any] = {}  # position: an iterator's first batches (copies)
        if len(source) < options.shard_count:
            raise ValueError(
                f"shard_count={options.shard_count}: {source.dataset} {source.split} has "
                f"only {len(source)} examples"
            )
        self.source = source
        self.decode = decode
        self.options = options
        # This process's examples: every `shard_count`-th of the split from `shard_index`.
        self.shard = range(options.shard_index, len(source), options.shard_count)
        # Drawn once, and kept in the iterators' state, so that a resumed run
        # continues with the same orders.
        self.seed = (
            random.SystemRandom().randrange(SEED_LIMIT) if options.seed is None else options.seed
        )
        self.num_threads = options.num_threads or platform.available_cpus()
        self.cache = cached.make_cache(source, decode, options, persist_identity)
        # Multi-host evaluation: every host the same number of full batches.
        self.padded = padding.padded_share(len(source), options)
        pad = padding.pad_target(source, decode, options.shard_index) if self.padded else None
        schedule = options.image_size
        self.batches = augmented.AugmentedBatches(
            decode,
            options.augment,
            self.seed,
            self.cache,
            schedule if isinstance(schedule, ProgressiveResize) else None,
            with_index=options.with_index,
            pad_target=pad,
        )
        self._epoch = self._one_epoch()
        if len(self._epoch) == 0:
            raise ValueError(
                f"batch_size={options.batch_size}: with drop_remainder it leaves no batch of "
                f"the {self.num_examples} examples of this shard"
            )
        self.pass_clock = PassClock(len(self._epoch), endless=options.num_epochs is None)

    def _one_epoch(self) -> grain.MapDataset:
        """One shape for every read: this host's share in record order (then padding, index
        -1, where hosts are padded), each element tagged with its epoch and example index,
        shuffled, then batches made whole by the one batch function (`augmented`): decoded
        or cut from the picture store, augmented or not (a plain read is the identity)."""
        options = self.options
        share = padding.Share(self.source.records, self.shard, self.padded, self.cache)
        ds = grain.MapDataset.source(share).map_with_index(augmented.Tag(len(share)))
        if options.shuffle:
            # Grain's order, each epoch's permutation made at once (`shuffle`).
            # Grain's shuffle takes 32 bits; a seed below 2**32 is taken as it is.
            ds = shuffle.EpochShuffle(ds, seed=self.seed % SEED_LIMIT)
        return ds.batch(
            options.batch_size, drop_remainder=options.drop_remainder, batch_fn=self.batches
        )

    @property
    def cache_bytes(self) -> int:
        """Bytes of the decoded cache (cache=True), allocated once: the pictures' pixels."""
        return 0 if self.cache is None else self.cache.pictures.nbytes

    @property
    def num_examples(self) -> int:
        """Examples per epoch in this shard (before drop_remainder)."""
        return len(self.shard)

    def __len__(self) -> int:
        """Batches per epoch."""
        return len(self._epoch)

    def __iter__(self) -> FastLoaderIterator:
        start = self.pass_clock.start()
        per_epoch = len(self)
        num_epochs = self.options.num_epochs
        stop = None if num_epochs is None else (start.epoch + num_epochs) * per_epoch
        return FastLoaderIterator(self, start.epoch * per_epoch + start.batch, stop)

    def set_epoch(self, epoch: int, batch: int = 0) -> None:
        """The next `iter()` starts at batch `batch` of epoch `epoch`: what a run that
        had completed `epoch` passes (and `batch` batches of the next) continues with.
        For a resumed run; Keras users add `fast_tfds.KerasEpochs(loader)` instead."""
        self.pass_clock.set_epoch(epoch, batch)

    def as_torch(self):
        """This loader as a torch `IterableDataset` (needs torch; see `TorchBatches`)."""
        from fast_tfds.loader.torch_adapter import TorchBatches

        return TorchBatches(self)

    def batch_at(self, position: int, *, first: bool = False):
        """Batch number `position` of the endless sequence of epochs; `first`: one of
        the first `PEEKED` batches of an iterator."""
        if self._stream is None or self._stream_position != position:
            if position in self._peeked:
                return self._peeked.pop(position)
            self.close()
            self._stream = iter(self._batches_from(position))
            _RUNNING.add(self)
        batch = next(self._stream)
        self._stream_position = position + 1
        if self.options.num_workers:
            # Workers hand batches over in shared memory, which Grain frees when the
            # array is deleted; a batch still referenced at interpreter exit would
            # then fail and leak. A copy makes it a plain array (its cost: docs/design.md).
            batch = augmented.map_arrays(np.array, batch)
        if first:
            # An iterator's first batches may be a peek (Keras reads two for the shapes,
            # then starts the epoch again): a copy of each (the caller may change its
            # own) lets the next iterator replay them and continue the stream, rather
            # than restart the threads and workers.
            self._peeked[position] = augmented.map_arrays(np.array, batch)
        else:
            self._peeked.clear()
        return batch

    def _batches_from(self, start: int) -> grain.IterDataset:
        ds = self._epoch.repeat()
        if self.options.mix is not None:
            # Numbered before the slice: batch p is batch p % len of epoch p // len.
            classes = len(self.source.label_names)
            mixed = functools.partial(_mixed, self.options.mix, self.seed, classes, len(self))
            ds = ds.map_with_index(mixed)
        ds = ds[start:]
        # Each thread makes whole batches. simplejpeg and OpenCV release the GIL, so
        # threads alone keep the cores busy; worker processes go past what the GIL
        # allows (parsing, batching) on machines with many cores.
        ds = ds.to_iter_dataset(
            grain.ReadOptions(
                num_threads=self.num_threads, prefetch_buffer_size=2 * self.num_threads
            )
        )
        if self.options.num_workers:
            _absl_flags_readable()
            ds = ds.mp_prefetch(
                grain.MultiprocessingOptions(
                    num_workers=self.options.num_workers,
                    per_worker_buffer_size=self.options.worker_buffer_size,
                )
            )
        return ds

    def close(self) -> None:
        """Stops the decode threads and worker processes; the next batch restarts them."""
        stream, self._stream, self._stream_position = self._stream, None, -1
        self._peeked.clear()
        if stream is not None and hasattr(stream, "close"):
            stream.close()

    def __del__(self):
        self.close()

    def state_key(self) -> dict[str, Any]:
        """What a saved position is valid for."""
        options = self.options
        return {
            "dataset": self.source.dataset,
            "split": self.source.split,
            "num_examples": len(self.source),
            "shard": [options.shard_index, options.shard_count],
            "shuffle": options.shuffle,
            "seed": self.seed,
            "batch_size": options.batch_size,
            "drop_remainder": options.drop_remainder,
            # Windows are drawn from the seed and the position: the same recipe only.
            "augment": None if options.augment is None else repr(options.augment),
            # Only where set, so that a state saved before the option existed restores.
            **({"with_index": True} if options.with_index else {}),
            **({"mix": repr(options.mix)} if options.mix is not None else {}),
        }


def _mixed(mix: mixing.Mix, seed: int, num_classes: int, per_epoch: int, position: int, batch):
    """`map_with_index` of the repeated epochs' batches, its first four arguments bound
    (`functools.partial`, picklable to workers): batch `position` mixed by `mixing.mix`,
    from (seed, epoch, batch in epoch); the images in place (each batch is a new array),
    the labels as float32 one-hot rows."""
    images, labels, *rest = batch
    if not isinstance(labels, np.ndarray) or labels.dtype.kind not in "iu":
        raise ValueError(
            "mix=: mixes integer labels, and this loader's targets are "
            f"{type(labels).__name__}; read without the dataset's extra targets"
        )
    epoch, batch_index = divmod(int(position), per_epoch)
    images, targets, _ = mixing.mix(
        images, labels, num_classes, mix, seed=seed, epoch=epoch, batch=batch_index
    )
    return (images, targets, *rest)


class FastLoaderIterator(grain.DatasetIterator):
    """Yields the loader's batches; `get_state()` / `set_state()` resume exactly.

    The state is a small JSON-able dict: the position (epoch, batch in epoch)
    and what it is valid for (dataset, split, shard, seed, batch size). Grain's
    and Orbax's checkpointing call these two methods.
    """

    def __init__(self, loader: FastLoader, start: int, stop: int | None):
        super().__init__()
        self._loader = loader
        self._position = self._start = start
        self._stop = stop

    @property
    def epoch(self) -> int:
        """The epoch of the next batch."""
        return self._position // len(self._loader)

    def __next__(self):
        if self._stop is not None and self._position >= self._stop:
            raise StopIteration
        position = self._position
        batch = self._loader.batch_at(position, first=position - self._start < PEEKED)
        self._position += 1
        per_epoch = len(self._loader)
        if self._position % per_epoch == 0:  # the epoch's last batch, delivered now
            self._loader.pass_clock.completed(position // per_epoch)
        return batch

    def get_state(self) -> dict[str, Any]:
        per_epoch = len(self._loader)
        return {
            "version": STATE_VERSION,
            "epoch": self._position // per_epoch,
            "batch_in_epoch": self._position % per_epoch,
            "stop_epoch": None if self._stop is None else self._stop // per_epoch,
            **self._loader.state_key(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        expected = self._loader.state_key()
        different = {k: (state.get(k), v) for k, v in expected.items() if state.get(k) != v}
        if state.get("version") != STATE_VERSION or different:
            raise ValueError(
                "this state was saved by a different loader (saved vs this one): "
                + ", ".join(f"{k}: {a!r} vs {b!r}" for k, (a, b) in different.items())
            )
        per_epoch = len(self._loader)
        self._position = self._start = state["epoch"] * per_epoch + state["batch_in_epoch"]
        stop_epoch = state["stop_epoch"]
        self._stop = None if stop_epoch is None else stop_epoch * per_epoch
        # The epochs before the restored one are complete: the loader's next iter() does
        # not start before it (and comes after it once this iterator completes it).
        if self._position >= per_epoch:
            self._loader.pass_clock.completed(self._position // per_epoch - 1)

    def start_prefetch(self) -> None:
        """Starts decoding now rather than at the first batch (Grain's checkpointing calls it)."""

    def close(self) -> None:
        """Nothing to release: the decode threads and workers are the loader's, and run on
        into its next pass (`FastLoader.close()` stops them). Grain's iterators close the
        iterators they wrap when they are collected, as Keras' do at every epoch's end."""

    def __del__(self):
        # Grain's iterators close themselves when collected. This one must not: a
        # finished epoch's iterator is dropped while the loader's stream goes on
        # into the next epoch. The loader stops the stream when it is closed or
        # collected itself.
        pass


def _absl_flags_readable() -> None:
    """Grain (0.2.18) reads an absl flag when it starts worker processes where JAX is
    installed, which raises UnparsedFlagAccessError in a program that absl did not
    start (google/grain#1355): mark absl's flags parsed, at their defaults, as Grain's
    maintainers advise. A program started by absl.app has parsed them already."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
