"""An iteration of the reader's dataset: passes numbered by a `PassClock`, repeated as
asked, padded across pipelines where asked, prefetched, with the exact number of
batches declared (Keras then shows N/N steps and never warns that the input ran out).

Each plan gives one epoch's batches as a function of the epoch number (and the first
batch to yield, for a resumed run): every random choice in it comes from (seed, epoch).
The epoch an iterator starts at comes from the dataset's clock when the iterator
starts; the clock moves only when the last batch of a pass has been delivered, by a
step after the prefetch (a batch still in the prefetch buffer was not delivered). So
a peek, Keras' shape reads or an iterator dropped mid-epoch do not shift the epochs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf
from tensorflow.python.data.ops import map_op

from fast_tfds.core import shares
from fast_tfds.core.passes import PassClock
from fast_tfds.read import exit_iterators, records
from fast_tfds.read.output import INDEX_KEY
from fast_tfds.read.split_reading import Reading

AUTOTUNE = tf.data.AUTOTUNE
# fn(epoch, first) -> the batches first.. of that epoch (both int64 scalar tensors).
MakeEpoch = Callable[[tf.Tensor, tf.Tensor], tf.data.Dataset]
# fn(epoch, element) -> the batch an epoch's element stands for (a cached plan's slots),
# run once per iteration after the epochs; None: the elements are the batches.
Serve = Callable[[tf.Tensor, tf.Tensor], object] | None
# Epochs of an endless iteration (repeat=True): more than any run takes.
_ENDLESS = 2**62
# The functions below branch on Python values only (the reading's settings), never on
# tensors (tf.cond and tf.where where they must): autograph's source rewrite of them,
# which tf.data ran at every opening for the same graph, was 0.35 to 1.5 s of the
# opening call on a 2-core machine (docs/benchmarks.md, the next run from the local file).
NO_AUTOGRAPH = tf.autograph.experimental.do_not_convert


def repeat_epochs(
    make_epoch: MakeEpoch, reading: Reading, cache: object = None, serve: Serve = None
) -> tf.data.Dataset:
    """The epochs of one iteration from the clock's start ─ served (`serve`) and mixed
    ─ prefetch ─ delivered (the clock told of each completed pass), with the dataset's
    exact length. `cache`: the arena or picture store the epochs' numpy functions reach
    by key (None: no cache), which the dataset keeps alive."""
    # Its iterators run numpy functions on tf.data's threads: closed before Python's
    # finalization, or a script that stops reading them hangs at exit (`exit_iterators`).
    exit_iterators.close_at_exit()
    per_epoch = batches_per_epoch(reading)
    clock = PassClock(per_epoch, endless=reading.epochs is None)
    if reading.padded_examples is not None:
        assert serve is None, "padding follows an epoch's batches: served in the epoch"
        make_epoch = _padded(make_epoch, reading, per_epoch)

    finite = reading.epochs is not None

    def where():
        at = clock.start()
        return np.array([at.epoch, at.batch], np.int64)

    @NO_AUTOGRAPH
    def passes(_):
        """(epoch, `at`) for each pass of the iteration that starts where the clock says
        (`at`: [epoch, batch]): `epochs` passes, one more when it starts mid-epoch
        (set_epoch with a batch): it then ends as far into the pass after its last, and
        the next iteration goes on from there. No function of its own for the clock:
        each one costs its instantiation (grappler's pass over it) at every iterator."""
        at = tf.ensure_shape(tf.numpy_function(where, [], tf.int64, stateful=True), [2])
        first_epoch, first_batch = at[0], at[1]
        count = tf.constant(_ENDLESS, tf.int64)
        if finite:
            count = reading.epochs + tf.cast(first_batch > 0, tf.int64)
        epochs = tf.data.Dataset.range(first_epoch, first_epoch + count)
        return tf.data.Dataset.zip(epochs, tf.data.Dataset.from_tensors(at).repeat())

    @NO_AUTOGRAPH
    def one_epoch(epoch, at):
        """The batches of pass `epoch`, tagged ([epoch, stop], (position, batch)): the
        iteration ends after position stop - 1 (stop -1: at the pass's end).
        From an epoch's start the pass runs to its end (no `take`): a cache in it
        (Dataset.cache, the file cache) completes only when its input ends; only the
        extra pass of an iteration started mid-epoch stops where that one started."""
        first_epoch, first_batch = at[0], at[1]
        first = tf.where(epoch == first_epoch, first_batch, tf.constant(0, tf.int64))
        ds = make_epoch(epoch, first).enumerate(first)
        stop = tf.constant(-1, tf.int64)
        if finite:
            last = tf.logical_and(first_batch > 0, epoch == first_epoch + reading.epochs)
            stop = tf.where(last, first_batch, stop)
            ds = ds.take(stop)
        # Tagged by a zip, not a map: a map's function is instantiated at every epoch.
        tags = tf.data.Dataset.from_tensors(tf.stack([epoch, stop])).repeat()
        return tf.data.Dataset.zip(tags, ds)

    @NO_AUTOGRAPH
    def served(tag, numbered):
        """The batch of an epoch's element (`serve`), mixed by (seed, epoch, batch
        index) (see `mixed`): one function for every epoch of the iteration."""
        position, batch = numbered
        if serve is not None:
            batch = serve(tag[0], batch)
        if reading.mix_batch is not None:
            batch = reading.mix_batch(tag[0], position, batch)
        return tag, (position, batch)

    def delivered(epoch, position, stop) -> np.int64:
        """Tells the clock of a delivered batch that ends a pass, or the iteration (one
        that started mid-epoch: `stop`); the other batches change nothing."""
        epoch, position = int(epoch), int(position)
        if position == per_epoch - 1:
            clock.completed(epoch)
        elif position == int(stop) - 1:
            clock.set_epoch(epoch, position + 1)
        return np.int64(0)

    @NO_AUTOGRAPH
    def deliver(tag, numbered):
        (epoch, stop), (position, batch) = tf.unstack(tag), numbered
        done = tf.numpy_function(delivered, [epoch, position, stop], tf.int64, stateful=True)
        with tf.control_dependencies([done]):
            return tf.nest.map_structure(tf.identity, batch)

    # The passes and their batches are two flat_maps in a row, not one inside the other:
    # a new iterator instantiates (and optimizes) every function it reaches, and a
    # nested one holds the whole pipeline, optimized again at every epoch's start.
    ds = tf.data.Dataset.from_tensors(0).flat_map(passes).flat_map(one_epoch)
    if serve is not None or reading.mix_batch is not None:
        ds = ds.map(served, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic)
    # The delivery runs on the caller's thread, after the prefetch, in TensorFlow's
    # single-threaded executor (a private option of tf.data's map): the default executor
    # hands the step's few ops to other threads at every batch, which cost served epochs
    # more than a NumPy call per batch does (docs/design.md, "Figures behind the code").
    ds = map_op._MapDataset(
        ds.prefetch(AUTOTUNE), deliver, use_inter_op_parallelism=False, preserve_cardinality=True
    )
    if reading.service_address is None or reading.service_sharding == "dynamic":
        ds = ds.apply(tf.data.experimental.assert_cardinality(cardinality(reading)))
    tf_options = tf.data.Options()
    tf_options.deterministic = reading.order.deterministic
    # tf.data's autotuning off: every AUTOTUNE map then runs one call per core, and
    # prefetch keeps its own buffer tuning. With it on, whole epochs of our pipelines
    # (and TensorFlow's own decode pipelines) ran on one core, at half the rate on
    # two, whatever parallelism the decoding map was given (docs/design.md).
    tf_options.autotune.enabled = False
    # The epoch and the caches live outside the graph (numpy functions): a tf.data
    # iterator checkpoint cannot hold them, so saving one fails rather than saving a
    # position that would not resume. Resume with fast_tfds.set_epoch / KerasEpochs.
    tf_options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.FAIL
    ds = ds.with_options(tf_options)
    ds._fast_tfds_clock = clock
    # Datasets made from this one keep the cache alive, and it goes with them.
    ds._fast_tfds_cache = cache
    # The shards' local copies (a bucket's), if the epochs read any: the same.
    return records.keep_copies(ds, reading.__dict__.get("shard_copies"))


def batches_per_epoch(reading: Reading) -> int:
    """Elements (batches, or examples) one pass yields."""
    batching = reading.batching
    examples = reading.num_examples
    if reading.padded_examples is not None:  # Every batch full: the last one padded too.
        examples = shares.padded_length(
            reading.padded_examples, batching.batch_size, batching.drop_remainder
        )
    return records.batches_per_epoch(examples, batching.batch_size, batching.drop_remainder)


def cardinality(reading: Reading) -> int:
    """Elements (batches, or examples) the dataset yields per iteration."""
    if reading.epochs is None:
        return tf.data.INFINITE_CARDINALITY
    return batches_per_epoch(reading) * reading.epochs


def _padded(make_epoch: MakeEpoch, reading: Reading, per_epoch: int) -> MakeEpoch:
    """Each epoch's batches, the last one filled up and followed by full batches of
    padding (index -1, label 0, zero image) up to `per_epoch`: every pipeline then runs
    the same number of steps (a JAX or multi-worker step would wait forever for one
    that ran out). The mask is index >= 0."""
    batch_size = reading.batching.batch_size

    def pad_value(spec: tf.TensorSpec, count, index: bool):
        shape = [count, *spec.shape[1:]] if batch_size is not None else spec.shape.as_list()
        if spec.dtype == tf.string:
            return tf.fill(shape, "")
        return tf.fill(shape, tf.constant(-1 if index else 0, spec.dtype))

    def fields(spec) -> list[tuple[tf.TensorSpec, bool]]:
        """(spec, is the index) of each output field, in tf.nest order."""
        if isinstance(spec, dict):
            return [(spec[k], k == INDEX_KEY) for k in sorted(spec)]
        return [(s, i == 2) for i, s in enumerate(spec)]  # (image, label, index)

    def make(epoch, first):
        ds = make_epoch(epoch, tf.constant(0, tf.int64))
        spec = ds.element_spec
        specs = fields(spec)
        if batch_size is None:
            padding = tf.nest.pack_sequence_as(spec, [pad_value(s, 1, i) for s, i in specs])
            missing = per_epoch - reading.num_examples
            ds = ds.concatenate(tf.data.Dataset.from_tensors(padding).repeat(missing))
            return ds.skip(first)

        def fill_up(*batch):
            batch = batch[0] if len(batch) == 1 else batch
            values = tf.nest.flatten(batch)
            missing = batch_size - tf.shape(values[0])[0]
            filled = [
                tf.ensure_shape(
                    tf.concat([v, pad_value(s, missing, i)], 0), [batch_size, *s.shape[1:]]
                )
                for v, (s, i) in zip(values, specs, strict=True)
            ]
            return tf.nest.pack_sequence_as(spec, filled)

        full = tf.nest.pack_sequence_as(spec, [pad_value(s, batch_size, i) for s, i in specs])
        # Padding batches after this pipeline's own (its last one filled up); no `take`
        # past them, so that a cache in the epoch sees its end.
        own = -(-reading.num_examples // batch_size)
        ds = ds.map(fill_up).concatenate(tf.data.Dataset.from_tensors(full).repeat(per_epoch - own))
        return ds.skip(first)

    return make
