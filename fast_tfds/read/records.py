"""Reading a split's TFRecord shards: which files, which pipeline reads which, and
record counts checked so that a damaged shard is named, never silently short.

Shards in an object store (gs://, s3://, az://) are read from whole-object local copies
where the store's client is installed (always, for s3:// and az://: `shard_copies`, the
loader's machinery in `fast_tfds.cache.remote.copies`): an epoch asks for every shard's
copy as it starts, in the order it opens them, and opening a shard waits for its copy.
TensorFlow's own GCS client, which reads gs:// otherwise, costs more CPU per shard (TLS, a
64 MB buffer per file opened: docs/buckets.md).
"""

from __future__ import annotations

import itertools
import os
import weakref

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.cache.remote.copies import ObjectCopies, reader_copies
from fast_tfds.cache.remote.object_stores import BucketReadError
from fast_tfds.core import splits

AUTOTUNE = tf.data.AUTOTUNE


def file_instructions(builder, split: str) -> list[tfds.core.utils.shard_utils.FileInstruction]:
    _check_tfrecord(builder)
    split_info = splits.split_info(builder.info, split)
    instructions = [fi for fi in split_info.file_instructions if fi.take != 0]
    if not instructions:
        raise ValueError(f"split={split!r}: selects no examples of {builder.info.full_name}")
    return instructions


def _check_tfrecord(builder) -> None:
    """A dataset built as ArrayRecord (`--file_format array_record`) has no TFRecords to read."""
    file_format = builder.info.file_format
    tfrecord = tfds.core.file_adapters.FileFormat.TFRECORD
    if file_format is None or file_format == tfrecord:
        return
    raise ValueError(
        f"{builder.info.full_name} in {builder.data_dir} is stored as {file_format.value}, "
        "and as_fast_dataset reads TFRecord files: read it with as_fast_loader() (no "
        "TensorFlow), or build it as TFRecord (tfds build without --file_format); "
        "`tfds convert_format --out_file_format array_record` then adds ArrayRecord files "
        "next to the TFRecords, so that one folder serves both readers"
    )


def shard_for_pipeline(instructions, opts):
    """This host's share of the shard files (`ReadOptions.shard_index`/`shard_count`)."""
    n, i = opts.shard_count, opts.shard_index
    if len(instructions) < n:
        said = "input_context" if opts.input_context is not None else f"shard_count={n}"
        raise ValueError(
            f"{said}: {n} input pipelines but only {len(instructions)} shard files "
            "in this split; rebuild with more shards or use fewer pipelines"
        )
    return instructions[i::n]


def read_indexed_records(
    instructions,
    offsets,
    *,
    file_seed: tf.Tensor | None = None,
    deterministic: bool = True,
    records: bool = True,
    indices: bool = True,
    copies: ObjectCopies | None = None,
) -> tf.data.Dataset:
    """(example index, serialized example) pairs of the given file instructions, files
    read in parallel; with `records=False` the indices alone, in the same order.

    The index is `offsets[k]` + the record's position within instruction k, so neither
    the file order nor the interleave changes it: it is the example's position in the
    split, as the Grain loader numbers examples.

    Without `file_seed` the order is the split's record order (TFDS's: instruction by
    instruction, records in shard order): an ordered interleave whose blocks hold a
    whole instruction reads `cycle_length` files ahead in parallel and yields each one
    whole, in turn. With `file_seed` ([2] int64, stateless: the same seed gives the same
    order in any process) the files come in a permuted order, a record of each in turn.
    `records=False` gives the same order from ranges alone (nothing read), which is how
    a filled cache replays an epoch that was streamed; `indices=False` the records
    alone (a zip per record less, where nothing needs the index).

    `copies` (`shard_copies(instructions)`): the shards are read from local copies of
    their objects, every copy asked for when the files are first listed (in the order
    they are opened), and each shard opened once its copy is there. The caller keeps
    `copies` alive as long as the dataset (`keep_copies` on the dataset it returns).
    """
    count = len(instructions)
    with_indices = indices
    takes = [int(fi.take) for fi in instructions]
    files = tf.data.Dataset.range(count)
    if file_seed is not None:
        files = tf.data.Dataset.from_tensor_slices(
            tf.random.experimental.stateless_shuffle(tf.range(count, dtype=tf.int64), file_seed)
        )
    filenames = tf.constant([os.fspath(fi.filename) for fi in instructions])
    skip = tf.constant([int(fi.skip) for fi in instructions], tf.int64)
    take = tf.constant(takes, tf.int64)
    offset = tf.constant(list(offsets), tf.int64)

    if records and copies is not None:
        # The prefetch runs through the whole file order as the epoch starts: every
        # copy is asked for at once, in that order (PARALLEL_COPIES of them run at a time).
        files = files.map(_copy_starter(copies)).prefetch(count)

    # Branches on Python values only: autograph's rewrite of it was 0.6 s of every
    # opening (see epochs.NO_AUTOGRAPH).
    @tf.autograph.experimental.do_not_convert
    def indexed(k):
        indices = tf.data.Dataset.range(offset[k], offset[k] + take[k])
        if not records:
            return indices
        if copies is None:
            shard = checked_shard_records(filenames[k], skip[k], take[k])
        else:
            local = _local_copy(copies, k)
            shard = checked_shard_records(local, skip[k], take[k], name=filenames[k])
        return tf.data.Dataset.zip(indices, shard) if with_indices else shard

    return files.interleave(
        indexed,
        cycle_length=min(count, max(4, os.cpu_count() or 1)),
        block_length=max(takes) if file_seed is None else 1,
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic or file_seed is None,
    )


def shard_copies(instructions) -> ObjectCopies | None:
    """Local copies of the shards, where they are objects in a store whose client is
    installed (for s3:// and az://, the builder's loading required it); else None:
    TensorFlow's GCS client reads gs:// (without gcsfs, said once per process in the
    log). The copies stay until the object is collected (the dataset that reads them) or
    the process ends, so that every epoch that reads the shards reads local files; they
    need the shards' size free under TMPDIR."""
    files = [os.fspath(fi.filename) for fi in instructions]
    return reader_copies(files, without="are read through TensorFlow's GCS client (more CPU)")


# The numpy functions below hold their copies by a weak reference: TensorFlow keeps
# every numpy function of a tf.data pipeline (and what it holds) in the process's
# default graph for good, and the copies must go with their dataset, which holds them
# (`keep_copies`; an iterator holds its dataset).


def keep_copies(ds: tf.data.Dataset, copies: ObjectCopies | None) -> tf.data.Dataset:
    """`ds`, holding `copies` for its life (and the datasets made from it, theirs)."""
    if copies is not None:
        ds._fast_tfds_shard_copies = copies
    return ds


def _copy_starter(copies: ObjectCopies):
    """fn(file index k) -> k, once file k's copy is asked for (not waited for)."""
    held = weakref.ref(copies)

    def start(k):
        copies = held()
        if copies is not None:  # else _local_copy says so
            copies.start(int(k))
        return k

    def started(k):
        return tf.ensure_shape(tf.numpy_function(start, [k], tf.int64, stateful=True), [])

    return started


def _local_copy(copies: ObjectCopies, k: tf.Tensor) -> tf.Tensor:
    """The path of file k's copy, once it is there; an InvalidArgumentError whose message
    is the one line of `BucketReadError` where it cannot be had (raised in Python, it
    would come with a traceback of the numpy function's)."""

    held, folder = weakref.ref(copies), os.path.dirname(copies.files[0])

    def wait(k):
        copies = held()
        if copies is None:
            gone = f"fast_tfds: the dataset reading the shards in {folder} is gone"
            return b"", gone.encode()
        try:
            return copies.wait(int(k)).encode(), b""
        except BucketReadError as error:
            return b"", f"fast_tfds: {error}".encode()

    local, said = tf.numpy_function(wait, [k], (tf.string, tf.string), stateful=True)
    check = tf.debugging.Assert(tf.equal(said, ""), [said])
    with tf.control_dependencies([check]):
        return tf.ensure_shape(tf.identity(local), [])


def instruction_offsets(instructions) -> list[int]:
    """The example index of each file instruction's first record: its position in the
    split as read (TFDS's order: the instructions in turn, records in shard order)."""
    return list(itertools.accumulate((int(fi.take) for fi in instructions), initial=0))[:-1]


# Records are counted in groups: a tf.data function call per record (a map, a
# filter) halves the record rate, one per group costs nothing measurable.
_CHECK_GROUP = 32


def checked_shard_records(filename, skip, take, name=None) -> tf.data.Dataset:
    """Records skip..skip+take of one shard, or an error that names the shard (`name`:
    the object in a bucket that `filename` is a whole local copy of).

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
        copied = name is not None
        message = _shard_error(name if copied else filename, n, take, copied)
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


def _shard_error(filename: tf.Tensor, n: tf.Tensor, take: tf.Tensor, copied: bool) -> tf.Tensor:
    """The one line for a shard that gave `n` of its `take` records: which shard, how many
    it gave, and the advice for where it was read (`_ADVICE`): a whole copy of an object
    (`copied`), else an object in a bucket or a local file, told apart by the name."""
    if copied:
        return _said(filename, n, take, "copy")
    return tf.cond(
        tf.strings.regex_full_match(filename, r"[A-Za-z][A-Za-z0-9+.-]*://.*"),
        lambda: _said(filename, n, take, "object"),
        lambda: _said(filename, n, take, "local"),
    )


# Where a short shard was read: (the pattern cut off its name for what the advice names,
# None: the name itself; the advice before that name; the advice after it).
_ADVICE = {
    "local": (
        r"[/\\][^/\\]*$",
        "it is missing, truncated or "
        "corrupt (a TFRecord length or CRC check failed). Check every shard with "
        "`fast-tfds verify ",
        "`, then rebuild the dataset (`tfds build ... --overwrite`).",
    ),
    # A shard in a bucket: its read failed once TensorFlow's GCS client had retried it
    # (up to GCS_RETRY_CONFIG_MAX_RETRIES times), so the bucket is the likelier cause
    # than the file, and the advice is the bucket's. A failed read ends the shard at
    # once (TFRecordDataset moves past a file whose read fails), never retried again here:
    # the time to this error is one retry cycle of TensorFlow's client.
    "object": (
        None,
        "reading it from the bucket failed (the "
        "bucket unreachable, the object missing, or truncated or corrupt). Check that it "
        "can be read from here (`gcloud storage ls -l ",
        "`); where a bucket may be unreachable, fail sooner with "
        "GCS_RETRY_CONFIG_MAX_RETRIES=2 (TensorFlow retries a read 10 times, with "
        "back-off up to 32 s) set before the process first reads gs://.",
    ),
    # A shard read from a whole copy of its object: the copy came complete, so the
    # object itself is short or corrupt.
    "copy": (
        r"/[^/]*$",
        "the object in the bucket is truncated "
        "or corrupt (its whole copy failed a TFRecord length or CRC check). Compare the "
        "objects' sizes with the local build's (`gcloud storage ls -l ",
        "`), check that build with `fast-tfds verify`, and copy it to the bucket again, whole.",
    ),
}


def _said(filename: tf.Tensor, n: tf.Tensor, take: tf.Tensor, where: str) -> tf.Tensor:
    """The words every short shard's error starts with (which shard, and how many of its
    records it gave), then the advice of `where` it was read (`_ADVICE`)."""
    cut, before, after = _ADVICE[where]
    named = filename if cut is None else tf.strings.regex_replace(filename, cut, "")
    return tf.strings.join(
        [
            "fast_tfds: shard ",
            filename,
            " gave ",
            tf.strings.as_string(n),
            " of the ",
            tf.strings.as_string(take),
            " records the dataset's metadata lists: ",
            before,
            named,
            after,
        ]
    )


def num_examples(instructions) -> int:
    """How many examples the file instructions select."""
    return sum(int(fi.take) for fi in instructions)


def batches_per_epoch(num_examples: int, batch_size: int | None, drop_remainder: bool) -> int:
    """Elements one epoch yields: batches (the last one partial unless dropped), or examples."""
    if batch_size is None:
        return num_examples
    if drop_remainder:
        return num_examples // batch_size
    return -(-num_examples // batch_size)


class Slots:
    """Cache row (slot) <-> example index for one pipeline's file instructions: the same
    numbers unless an input_context took a share of the files, then the index within
    the share. Every cache keeps an example at its slot, whatever order filled it."""

    def __init__(self, starts: np.ndarray, firsts: np.ndarray, index: np.ndarray):
        self.starts = starts  # Example index of each instruction's first record.
        self.firsts = firsts  # Slot of each instruction's first record.
        self.index = index  # [n]: the example index of each slot.

    @classmethod
    def of(cls, instructions, offsets) -> Slots:
        takes = np.array([int(fi.take) for fi in instructions], np.int64)
        starts = np.array(offsets, np.int64)
        firsts = np.concatenate([[0], np.cumsum(takes)[:-1]]).astype(np.int64)
        index = np.concatenate(
            [np.arange(s, s + t, dtype=np.int64) for s, t in zip(starts, takes, strict=True)]
        )
        return cls(starts, firsts, index)

    def slots(self, indices) -> np.ndarray:
        indices = np.asarray(indices, np.int64)
        k = np.searchsorted(self.starts, indices, side="right") - 1
        return self.firsts[k] + indices - self.starts[k]

    def tf_slots(self, indices: tf.Tensor) -> tf.Tensor:
        """`slots` in the graph."""
        if len(self.starts) == 1 or np.array_equal(self.starts, self.firsts):
            return indices - int(self.starts[0])  # The whole split, or one run of it.
        starts = tf.constant(self.starts)
        k = tf.searchsorted(starts, indices, side="right") - 1
        return tf.gather(tf.constant(self.firsts), k) + indices - tf.gather(starts, k)

    def tf_index(self, slots: tf.Tensor) -> tf.Tensor:
        """`index[slots]` in the graph, from the instructions' runs: no constant of the
        whole index in the graph (every new iterator's instantiation copies it)."""
        if len(self.starts) == 1 or np.array_equal(self.starts, self.firsts):
            return slots + int(self.starts[0] - self.firsts[0])
        firsts = tf.constant(self.firsts)
        k = tf.searchsorted(firsts, slots, side="right") - 1
        return tf.gather(tf.constant(self.starts), k) + slots - tf.gather(firsts, k)
