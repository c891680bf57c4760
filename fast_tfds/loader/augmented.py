"""The loader's one batch function: whole batches made at once, for every read (a plain
read is the identity augmentation, `augment=None`: each picture whole, resized).

Each element carries its epoch and its example index (its position in the split as
read), which Grain's index arithmetic gives exactly (`tag`): the dataset is indexed
across epochs, `epoch * len(split) + example`, and shuffling or slicing a shard
keep that. Windows drawn from (seed, epoch, example) are then the same however the
batches are made (threads, worker processes) and after `set_state`, which only
moves the position.

Without a cache, each JPEG is decoded by the shared decoder with its window (the
hook's, e.g. Stanford Dogs' box, with the augmentation's crop inside it), chosen
before decoding so that the decoder picks its DCT scale for the part kept; then
flipped and jittered. With `cache=True` the pictures come from the shard's picture
store (`cached`), filled the first time each example comes, and its batches are cut
from it. Both are the serving step of `fast_tfds.augment.step`, which the tf.data
reader calls too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from fast_tfds.augment import step
from fast_tfds.augment.progressive import ProgressiveResize
from fast_tfds.augment.spec import Augment
from fast_tfds.augment.windows import Draw
from fast_tfds.cache.store import Store
from fast_tfds.loader import cached
from fast_tfds.loader.examples import DecodeExample, reference_box


@dataclasses.dataclass(frozen=True)
class Tag:
    """`map_with_index` of the records: (epoch, example index, record)."""

    num_examples: int

    def __call__(self, position: int, element: tuple[int, Any]) -> tuple[int, int, Any]:
        index, record = element
        return position // self.num_examples, index, record


@dataclasses.dataclass
class AugmentedBatches:
    """Grain's `batch_fn`: [(epoch, index, record)] -> (images [B, H, W, 3] uint8, targets),
    and the indices with `with_index`; `augment` None: each picture whole (a plain read),
    `cache` None: decoded from its record."""

    decode: DecodeExample
    augment: Augment | None
    seed: int
    cache: Store | None = None
    sizes: ProgressiveResize | None = None  # each epoch's size, else decode.image_size
    with_index: bool = False  # (images, targets, indices) batches
    pad_target: Any = None  # the targets of a padding example (index -1): `padding`

    def __call__(self, elements: Sequence[tuple[int, int, Any]]):
        epochs = {int(epoch) for epoch, _, _ in elements}
        if len(epochs) != 1:  # Grain batches each epoch apart; anything else is a bug.
            raise RuntimeError(f"a batch spans epochs {sorted(epochs)}")
        (epoch,) = epochs
        indices = np.array([index for _, index, _ in elements], np.int64)
        # Padding (index -1) ends a host's unshuffled share: the real examples lead.
        real = int(np.count_nonzero(indices >= 0))
        size = self.decode.image_size if self.sizes is None else self.sizes.size(epoch)
        out = np.empty((len(elements), *size, 3), np.uint8)
        out[real:] = 0
        records = [r for _, _, r in elements[:real]]
        targets = []
        if real:
            into = self._decode_into if self.cache is None else self._serve_into
            draw = Draw(self.augment, self.seed, epoch, indices[:real])
            targets = into(draw, records, out[:real])
        targets += [self.pad_target] * (len(elements) - real)
        if self.with_index:
            return out, stack(targets), indices
        return out, stack(targets)

    def _decode_into(self, draw: Draw, records, out) -> list:
        parsed = [self.decode.parse(record) for record in records]
        boxes = np.array([reference_box(jpeg, window) for jpeg, _, window in parsed], np.int64)
        jpegs = [jpeg for jpeg, _, _ in parsed]
        step.decode_into(jpegs, boxes, draw, out)
        return [target for _, target, _ in parsed]

    def _serve_into(self, draw: Draw, records, out) -> list:
        slots = cached.fill(self.cache, draw.indices, records, self.decode)
        step.serve_into(self.cache.pictures, slots, draw, out)
        return cached.targets(self.cache, slots)


def stack(targets: list):
    """What Grain's default batching makes of the targets: arrays stacked, dicts by key."""
    first = targets[0]
    if isinstance(first, dict):
        return {key: np.stack([t[key] for t in targets]) for key in first}
    return np.stack(targets)


def map_arrays(function, tree):
    """`function` of each array of a batch or a target (dicts and tuples of arrays), in
    the same structure: the batch copy, the torch adapter and a padding example's targets."""
    if isinstance(tree, dict):
        return {key: map_arrays(function, value) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(map_arrays(function, value) for value in tree)
    return function(tree)
