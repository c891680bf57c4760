"""The clock's delivery step after the prefetch: a tf.cond in the default executor against
a NumPy call per batch in the single-threaded executor.

    python benchmarks/experiments/delivery_step.py [--examples 5016] [--batch 32]
        [--rounds 10] [--dtype float32]

`fast_tfds.read.epochs` tells its pass clock of a batch only once the batch has left the
prefetch (a batch still in the buffer was not delivered), so one step runs on the
caller's thread for every batch. This times a served epoch (a gather of a permutation of
`--examples` rows of 224x224x3 uint8 pixels, converted to `--dtype` by the reader's
`to_unit_float`, parallel map, prefetch) with four ends, in one process, in interleaved
rounds (the CPU's speed swings hit every row alike); median, min and max of the epoch's
CPU time (all threads):

- no step: a map that drops the tag (what the epoch costs without a clock);
- tf.cond: the clock's NumPy call only on a pass's last batch, in a `tf.cond`, in
  `Dataset.map` (tf.data's default executor);
- numpy, single-threaded: the clock's NumPy call on every batch, with tf.data's map run
  in the single-threaded executor (`use_inter_op_parallelism=False`), as the reader does.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=5016)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--dtype", choices=["float32", "uint8"], default="float32")
    args = parser.parse_args()

    import tensorflow as tf
    from tensorflow.python.data.ops import map_op

    from fast_tfds.cache.memory import allocate_in_memory
    from fast_tfds.read.output import to_unit_float

    n, batch = args.examples, args.batch
    per_epoch = -(-n // batch)
    pixels = allocate_in_memory((n, 224, 224, 3), np.uint8)
    pixels[...] = np.random.default_rng(0).integers(0, 256, (224, 224, 3), np.uint8)
    labels = np.arange(n, dtype=np.int64) % 2
    told = []

    def delivered(epoch, position) -> np.int64:
        if int(position) == per_epoch - 1:
            told.append(int(epoch))
        return np.int64(0)

    def column(array, dtype):
        # As the reader does: the whole column through a numpy_function, once per epoch.
        return tf.ensure_shape(
            tf.numpy_function(lambda: array, [], dtype, stateful=True), array.shape
        )

    def served(epoch, slots, columns):
        images, labels = columns
        images = tf.gather(images, slots)
        if args.dtype == "float32":
            images = to_unit_float(images)
        return epoch, (images, tf.gather(labels, slots))

    def epoch_batches(epoch):
        order = tf.random.experimental.stateless_shuffle(
            tf.range(n, dtype=tf.int64), seed=tf.stack([tf.constant(0, tf.int64), epoch])
        )
        slots = tf.data.Dataset.from_tensor_slices(order).batch(batch)
        columns = tf.data.Dataset.from_tensors(
            (column(pixels, tf.uint8), column(labels, tf.int64))
        ).repeat()
        tags = tf.data.Dataset.from_tensors(epoch).repeat()
        return tf.data.Dataset.zip(tags, slots, columns)

    def with_cond(epoch, numbered):
        position, batch = numbered
        done = tf.cond(
            position == per_epoch - 1,
            lambda: tf.numpy_function(delivered, [epoch, position], tf.int64, stateful=True),
            lambda: tf.constant(0, tf.int64),
        )
        with tf.control_dependencies([done]):
            return tf.nest.map_structure(tf.identity, batch)

    def with_numpy(epoch, numbered):
        position, batch = numbered
        done = tf.numpy_function(delivered, [epoch, position], tf.int64, stateful=True)
        with tf.control_dependencies([done]):
            return tf.nest.map_structure(tf.identity, batch)

    def pipeline(end: str) -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensors(tf.constant(1, tf.int64)).flat_map(epoch_batches)
        ds = ds.map(served, num_parallel_calls=tf.data.AUTOTUNE).enumerate()
        ds = ds.map(lambda position, element: (element[0], (position, element[1])))
        ds = ds.prefetch(tf.data.AUTOTUNE)
        if end == "no step":
            ds = ds.map(lambda epoch, numbered: numbered[1])
        elif end == "tf.cond":
            ds = ds.map(with_cond)
        else:
            ds = map_op._MapDataset(
                ds, with_numpy, use_inter_op_parallelism=False, preserve_cardinality=True
            )
        options = tf.data.Options()
        options.autotune.enabled = False  # as the reader sets it
        return ds.with_options(options)

    ends = ["no step", "tf.cond", "numpy, single-threaded"]
    datasets = {end: pipeline(end) for end in ends}
    for ds in datasets.values():  # warm: each function traced and compiled once
        for _ in ds:
            pass
    cpu = {end: [] for end in ends}
    for _ in range(args.rounds):
        for end in ends:
            start = time.process_time()
            for _ in datasets[end]:
                pass
            cpu[end].append(time.process_time() - start)
    print(
        f"served epoch of {n} examples, batch {batch}, {args.dtype}: CPU ms (all threads), "
        f"median [min-max] of {args.rounds} interleaved rounds"
    )
    base = statistics.median(cpu["no step"])
    for end in ends:
        ms = [s * 1e3 for s in cpu[end]]
        median = statistics.median(cpu[end])
        print(
            f"  {end:24s} {statistics.median(ms):6.0f} [{min(ms):.0f}-{max(ms):.0f}]"
            f"  {median / base:.2f}x no step"
        )
    # Both steps told the clock of every epoch they ran (the warm one included).
    assert len(told) == 2 * (args.rounds + 1), told


if __name__ == "__main__":
    main()
