"""Augmented batches in tf.data: each example's crop, flip and jitter from (seed, epoch,
example index), the windows the Grain loader draws for the same three.

Records come tagged with their example index (`records.read_indexed_records`), and
each epoch is made from its number (`epochs`: passes counted by the dataset's clock),
so its order, windows and size are those of (seed, epoch) in any run.

This module holds the stream (cache=False, plain or augmented): blocks of records are
parsed, and in one
`tf.numpy_function` per block each picture's window is drawn from its stored size (or
its hook window, e.g. Stanford Dogs' box) before it is decoded, so the decoder picks
its DCT scale for the part kept; then flip and jitter (`step.decode_into`, the step the
loader calls too); and what the cached plan shares with it (blocks, sizes, the finish).
With cache=True the pictures go to the picture store: `fast_tfds.read.cached`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from fast_tfds.augment import step
from fast_tfds.augment.spec import Augment
from fast_tfds.augment.windows import Draw
from fast_tfds.core import aligned, jpeg_blocks
from fast_tfds.core.sizes import as_hw
from fast_tfds.read.decoding import WINDOW_KEY
from fast_tfds.read.output import INDEX_KEY
from fast_tfds.read.parsing import UNBATCHED_BLOCK, make_parser
from fast_tfds.read.split_reading import Reading

AUTOTUNE = tf.data.AUTOTUNE


# -- what both plans share ----------------------------------------------------------


def output_size(reading: Reading) -> tuple[int, int]:
    """The output size; with a `ProgressiveResize`, its largest (the cache's layout)."""
    return tuple(as_hw(reading.image_size))


def epoch_sizes(reading: Reading) -> Callable[[int], tuple[int, int]]:
    """fn(epoch) -> that epoch's output size (one size unless progressive)."""
    if reading.size_schedule is not None:
        return reading.size_schedule.size
    size = output_size(reading)
    return lambda _epoch: size


def image_shape(reading: Reading) -> list:
    """The static shape of a block of images: height and width unknown when they
    change from epoch to epoch."""
    if reading.size_schedule is not None:
        return [None, None, None, 3]
    return [None, *output_size(reading), 3]


def block_size(reading: Reading) -> int:
    return reading.batching.batch_size or UNBATCHED_BLOCK


def record_blocks(reading: Reading, indexed: tf.data.Dataset):
    """(indices [b], block) blocks of the (index, record) pairs `indexed`, in their order;
    the last block may be partial. Where the dataset's features parse in blocks, a block
    is the serialized records, which `parsed` parses in the map that uses the block (a
    pipeline stage less per block: the fill decodes in that map too); else the examples a
    transform made of them (`parsed` gives them as they are)."""
    order, block = reading.order, block_size(reading)
    ds = indexed
    if reading.parse_batch is not None:
        return ds.batch(block)
    parse = make_parser(reading.features, reading.transform, reading.keys)
    ds = ds.map(
        lambda index, serialized: (index, parse(serialized)),
        num_parallel_calls=AUTOTUNE,
        deterministic=order.deterministic,
    )
    image_spec = ds.element_spec[1]["image"]
    if image_spec.dtype != tf.string:
        raise ValueError(
            "augment=: the transform decodes the image itself; with augment= it must leave "
            f"the JPEG bytes (and may name a window as {WINDOW_KEY!r})"
        )
    return ds.batch(block)


def epoch_blocks(reading: Reading, epoch) -> tf.data.Dataset:
    """`record_blocks` of `epoch`'s records, in the order that epoch streams them (files
    and shuffle buffer seeded from (seed, epoch)); epoch None: the record order."""
    return record_blocks(reading, reading.shuffled(reading.records(epoch), epoch))


def parsed(reading: Reading, block) -> dict:
    """A block of `record_blocks` as a batch dict: 'image' JPEG bytes [b], the other
    features and, where a transform names one, WINDOW_KEY [b, 4]."""
    return dict(block) if reading.parse_batch is None else reading.parse_batch(block)


def windows_of(batch: dict) -> tf.Tensor:
    """The hook's windows [b, 4] (top, left, height, width), or [b, 0] for none."""
    window = batch.pop(WINDOW_KEY, None)
    if window is None:
        return tf.zeros([tf.shape(batch["image"])[0], 0], tf.int32)
    return tf.cast(window, tf.int32)


def finish(
    reading: Reading,
    ds: tf.data.Dataset,
    *,
    dropped: bool,
    first: Callable[..., dict] | None = None,
) -> tf.data.Dataset:
    """Blocks of output dicts -> the reader's batches (or examples). `first`: fn(element)
    -> the block's output dict, run in the same map as the output conversion: every
    epoch instantiates each map's function again when it starts, so an epoch's
    gather, index and output are one function, not three."""
    batch_size = reading.batching.batch_size
    deterministic = reading.order.deterministic
    with_index, drop = reading.with_index, reading.batching.drop_remainder

    def block_of(*element):
        block = dict(first(*element)) if first is not None else dict(element[0])
        if not with_index:
            block.pop(INDEX_KEY, None)
        return block

    if batch_size is None:
        ds = ds.map(block_of, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
        return ds.unbatch().map(reading.output_fn)

    def output(*element):
        return finished(reading, block_of(*element))

    if drop and not dropped:
        if first is not None:  # The filter needs the block itself.
            ds = ds.map(first, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
            return finish(reading, ds, dropped=dropped)
        ds = ds.filter(lambda batch: tf.shape(tf.nest.flatten(batch)[0])[0] == batch_size)
    return ds.map(output, num_parallel_calls=AUTOTUNE, deterministic=deterministic)


def finished(reading: Reading, block: dict):
    """A batch's output dict -> the reader's batch: the index dropped unless asked
    for, the static batch size that drop_remainder guarantees, the output conversion."""
    block = dict(block)
    if not reading.with_index:
        block.pop(INDEX_KEY, None)
    batch_size = reading.batching.batch_size
    if reading.batching.drop_remainder:
        block = tf.nest.map_structure(
            lambda v: (
                tf.ensure_shape(v, [batch_size, *v.shape[1:]]) if isinstance(v, tf.Tensor) else v
            ),
            block,
        )
    return reading.output_fn(block)


# -- cache=False: crops chosen before decoding ----------------------------------------


@dataclasses.dataclass(frozen=True)
class CroppedDecoder:
    """fn(epoch, indices, jpegs, boxes) -> uint8 [b, H, W, 3]: each picture's window
    drawn in its reference size (its box, else the stored picture) as example
    indices[i] of `epoch`, only that part decoded and resized, then flipped and
    jittered: the Grain loader's `AugmentedBatches` without a cache, pixel for pixel."""

    augment: Augment | None  # None: a plain read, each picture whole
    seed: int
    sizes: Callable[[int], tuple[int, int]]  # epoch -> output size

    def __call__(self, epoch, indices, jpegs, boxes) -> np.ndarray:
        out = aligned.empty((len(jpegs), *self.sizes(int(epoch)), 3))
        # The block's windows in one vectorized draw, in their reference boxes (a draw
        # per picture costs a quarter of its decode).
        refs = reference_boxes(indices, jpegs, boxes)
        step.decode_into(jpegs, refs, Draw(self.augment, self.seed, int(epoch), indices), out)
        return out


def reference_boxes(indices, jpegs, boxes) -> np.ndarray:
    """[b, 4] int64 reference boxes (top, left, height, width) in the stored pictures, of
    examples `indices`: the hook's windows `boxes` ([b, 4]; [b, 0]: none), else each
    picture whole, from its JPEG header alone (one that does not read: the one line of
    `step.decode_error`). Windows are drawn in them."""
    if boxes.shape[1]:
        return np.asarray(boxes, np.int64)
    refs = np.zeros((len(jpegs), 4), np.int64)
    for i, data in enumerate(jpegs):
        try:
            refs[i, 2:] = jpeg_blocks.stored_size(data)
        except (OSError, ValueError) as err:
            raise step.decode_error(indices[i], err) from None
    return refs


def stream(reading: Reading):
    """fn(epoch, first) -> every epoch: records shuffled ─ blocks parsed ─ cropped decode
    ─ output, from batch `first` on (the blocks before it skipped undecoded)."""
    decode = CroppedDecoder(reading.augment, reading.seed, epoch_sizes(reading))
    shape = image_shape(reading)
    drop = reading.batching.drop_remainder and reading.batching.batch_size is not None
    batched = reading.batching.batch_size is not None

    def one_epoch(epoch, first):
        ds = epoch_blocks(reading, epoch)
        if drop:
            ds = ds.filter(lambda indices, _: tf.shape(indices)[0] == block_size(reading))
        if batched:
            ds = ds.skip(first)

        def run(indices, block):
            batch = parsed(reading, block)
            boxes = windows_of(batch)
            images = tf.numpy_function(
                decode, [epoch, indices, batch["image"], boxes], tf.uint8, stateful=False
            )
            batch["image"] = tf.ensure_shape(images, shape)
            batch[INDEX_KEY] = indices
            return batch

        ds = ds.map(run, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic)
        ds = finish(reading, ds, dropped=True)
        return ds if batched else ds.skip(first)

    return one_epoch
