"""Which epoch a pass over a reader is: counted in completed passes, not in iterators.

Both back ends draw each epoch's order, crops and progressive size from (seed, epoch),
so the epoch number must mean the same thing everywhere: the number of passes this
reader (a dataset from `as_fast_dataset`, or a `FastLoader`) has completed before.
A pass is complete when its last batch has reached the consumer. An iterator dropped
before that (`next(iter(ds))`, Keras' shape reads, the iterator Keras drops at an epoch
boundary) completes nothing, so the next one starts the same epoch again, from its
first batch.

A new process starts at epoch 0; a resumed run moves the clock with `set_epoch`
(`fast_tfds.set_epoch`, or the `fast_tfds.KerasEpochs` callback, which does it from
Keras' epoch number).
"""

from __future__ import annotations

import dataclasses
import threading


@dataclasses.dataclass(frozen=True)
class Start:
    """Where a new iterator starts: batch `batch` of epoch `epoch`."""

    epoch: int
    batch: int = 0


class PassClock:
    """The epoch (and first batch) the next iterator over one reader starts at."""

    def __init__(self, batches_per_epoch: int, *, endless: bool):
        """`batches_per_epoch`: batches (or examples, unbatched) of one pass; `endless`:
        one iterator runs epoch after epoch (num_epochs=None)."""
        self.batches_per_epoch = batches_per_epoch
        self.endless = endless
        self._lock = threading.Lock()
        self._start = Start(0)

    def start(self) -> Start:
        """Where an iterator made now starts (it may still be dropped: nothing moves)."""
        with self._lock:
            return self._start

    def completed(self, epoch: int) -> None:
        """An iterator delivered the last batch of `epoch`: the next one starts after it."""
        with self._lock:
            if epoch >= self._start.epoch:
                self._start = Start(epoch + 1)

    def set_epoch(self, epoch: int, batch: int = 0) -> None:
        """The next iterator starts at batch `batch` of `epoch` (a resumed run)."""
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise ValueError(f"epoch={epoch!r}: must be an int >= 0")
        if not isinstance(batch, int) or isinstance(batch, bool) or batch < 0:
            raise ValueError(f"batch={batch!r}: must be an int >= 0")
        if batch >= self.batches_per_epoch:
            raise ValueError(
                f"batch={batch}: an epoch of this reader has {self.batches_per_epoch} "
                "batches (0 to one less)"
            )
        with self._lock:
            self._start = Start(epoch, batch)

    def set_position(self, position: int) -> None:
        """The next iterator starts at batch `position` counted from epoch 0's first."""
        epoch, batch = divmod(position, self.batches_per_epoch)
        self.set_epoch(epoch, batch)


def find_clock(reader) -> PassClock:
    """The clock of a reader: a `FastLoader` (or its torch view), or a dataset from
    `as_fast_dataset`, also after further tf.data transformations of it."""
    seen, todo = set(), [reader]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        clock = getattr(item, "pass_clock", None) or getattr(item, "_fast_tfds_clock", None)
        if isinstance(clock, PassClock):
            return clock
        for attr in ("loader",):  # the torch view of a loader
            if getattr(item, attr, None) is not None:
                todo.append(getattr(item, attr))
        inputs = getattr(item, "_inputs", None)  # a tf.data dataset's inputs
        if callable(inputs):
            try:
                todo.extend(inputs())
            except (TypeError, NotImplementedError):
                pass
    raise ValueError(
        f"{type(reader).__name__}: not a reader of fast_tfds (a dataset from "
        "as_fast_dataset(), or a loader from as_fast_loader()), so it has no epoch to set"
    )


def set_epoch(reader, epoch: int, batch: int = 0) -> None:
    """Starts the reader's next iterator at batch `batch` of epoch `epoch`, as a run
    that had completed `epoch` passes (and `batch` batches of the next) would continue.

    For a resumed run: the order, the crops and the progressive size of every later
    batch are then those an uninterrupted run would have had (with the same seed).
    Keras users add `fast_tfds.KerasEpochs(train)` to `fit`'s callbacks instead.
    """
    find_clock(reader).set_epoch(epoch, batch)
