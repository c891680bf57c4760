"""The four ways `read_split` turns a split's records into batches, and how one is chosen.

Decoding is the expensive step, so it runs in parallel, a block of JPEGs at a time
where the stored images already have the output size; its uint8 output is what gets
cached (4x smaller than float32), so later epochs never decode again. The plans are
drawn in `fast_tfds.read`'s docstring.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable

import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.cache import placement, tf_file_cache
from fast_tfds.read import arena_dataset, records, service
from fast_tfds.read.decode import (
    UNBATCHED_BLOCK,
    BatchParser,
    BlockImages,
    block_images,
    decode_jpeg_blocks,
    make_batch_parser,
    make_decoder,
    make_output_fn,
)
from fast_tfds.read.options import ReadOptions

AUTOTUNE = tf.data.AUTOTUNE


class Plan(enum.Enum):
    """How `read_split` turns a split's records into batches."""

    # cache=True, JPEGs to a fixed output size: epoch 1 parses blocks of records and
    # decodes (at a reduced scale and resized, where the size differs) straight into
    # the arena's rows; later epochs gather from the arena.
    ARENA = "arena"
    # cache=False, JPEGs to a fixed output size: each batch of records is parsed and
    # its JPEGs decoded as one block.
    BLOCK_STREAM = "block stream"
    # cache=True, fixed-size examples decoded one at a time (transformed, e.g. cropped,
    # or decoded by a tf.data service): epoch 1 copies its batches into the arena.
    ARENA_OF_EXAMPLES = "arena of examples"
    # Everything else: examples decoded one at a time, cached per example (in memory
    # or in files) if asked, shuffled and batched.
    PER_EXAMPLE = "per example"


def choose_plan(reading: Reading) -> Plan:
    """The fastest plan that can produce what the options ask for."""
    opts = reading.opts
    if reading.parse_batch is not None:  # JPEGs decoded in blocks to the output size.
        if opts.cache is False:
            return Plan.BLOCK_STREAM
        if arena_dataset.supports(reading.block_spec):
            return Plan.ARENA
    # Strings (filenames) and features that vary in size cannot live in an arena.
    if opts.cache is True and arena_dataset.supports(reading.examples.element_spec):
        return Plan.ARENA_OF_EXAMPLES
    return Plan.PER_EXAMPLE


@dataclasses.dataclass(frozen=True)
class Reading:
    """One split read with one set of options: what every plan builds from. The parts
    only some plans use are made on first use."""

    builder: tfds.core.DatasetBuilder
    split: str
    instructions: list  # This input pipeline's file instructions.
    opts: ReadOptions  # With the batch size per replica under an input_context.
    service_address: str | None

    @classmethod
    def start(cls, builder, split: str, opts: ReadOptions) -> Reading:
        """Checks the split and the service, and takes this input pipeline's share."""
        instructions = records.file_instructions(builder, split)
        service_address = None
        if opts.service is not None:
            service_address = service.check_reachable(opts.service)
        context = opts.input_context
        if context is not None:
            instructions = records.shard_for_pipeline(instructions, context)
            if opts.batch_size is not None:
                opts = opts.replace(batch_size=context.get_per_replica_batch_size(opts.batch_size))
        return cls(builder, split, instructions, opts, service_address)

    @property
    def features(self) -> tfds.features.FeaturesDict:
        return self.builder.info.features

    @functools.cached_property
    def num_examples(self) -> int:
        return records.num_examples(self.instructions)

    @functools.cached_property
    def keys(self) -> set[str] | None:
        """The features to parse: those of the (image, label) output and what
        `transform` needs, or None for all of them."""
        if not self.opts.as_supervised:
            return None
        supervised = self.builder.info.supervised_keys or ("image", "label")
        return {*supervised, *self.opts.transform_keys}

    @functools.cached_property
    def output_fn(self) -> Callable:
        opts = self.opts
        return make_output_fn(opts.dtype, opts.as_supervised, self.builder.info.supervised_keys)

    @functools.cached_property
    def serialized(self) -> tf.data.Dataset:
        """The serialized records, shard files read in parallel (in a new order every
        epoch when shuffling)."""
        opts = self.opts
        return records.read_records(
            self.instructions,
            shuffle=opts.shuffle,
            seed=opts.seed,
            deterministic=opts.is_deterministic,
        )

    @functools.cached_property
    def encoded(self) -> dict[str, BlockImages] | None:
        """{'image': how its JPEGs decode} when they are decoded here in blocks to a
        fixed output size, else None: the size varies, a transform works on each
        example, a tf.data service decodes them, or a file cache keeps the examples."""
        opts = self.opts
        if opts.cache not in (True, False) or opts.service is not None:
            return None
        images = block_images(self.features, opts.image_size, opts.transform)
        return None if images is None else {"image": images}

    @functools.cached_property
    def parse_batch(self) -> BatchParser | None:
        """Parses a block of records in one op, when the JPEGs are decoded in blocks
        and every feature is one fixed-size value per example; else None."""
        if self.encoded is None:
            return None
        return make_batch_parser(self.features, self.keys)

    @property
    def block_spec(self) -> dict[str, tf.TensorSpec]:
        """One example of a parsed block, its JPEGs decoded."""
        return arena_dataset.arena_specs(self.serialized, self.parse_batch, self.encoded)

    def arena_allocator(self, specs: dict[str, tf.TensorSpec]):
        """Where the arena of examples of `specs` gets its rows: memory, or disk when
        they do not fit the budget (one log line says so; no room at all: an error)."""
        opts = self.opts
        need = self.num_examples * arena_dataset.row_bytes(specs)
        return placement.allocator(
            need,
            what=f"{self.builder.info.full_name} {self.split}",
            cache_budget=opts.cache_budget,
            cache_dir=opts.cache_dir,
        )

    @functools.cached_property
    def examples(self) -> tf.data.Dataset:
        """The records parsed and decoded one example at a time, on the tf.data
        service's workers when one is given (everything after runs here)."""
        opts = self.opts
        decode = make_decoder(
            self.features,
            opts.image_size,
            opts.transform,
            self.keys,
            graph_ops_only=self.service_address is not None,
        )
        ds = self.serialized.map(
            decode, num_parallel_calls=AUTOTUNE, deterministic=opts.is_deterministic
        )
        if self.service_address is not None:
            ds = service.distribute(ds, self.service_address, opts.service_sharding)
        return ds


def _arena(reading: Reading) -> tf.data.Dataset:
    """Plan.ARENA: records shuffled ─ batched ─ parsed and decoded into the arena's rows
    (epoch 1); later epochs gather from the arena."""
    epochs = arena_dataset.ArenaEpochs.of(reading.opts, reading.num_examples, reading.output_fn)
    ds, _ = arena_dataset.arena_batches(
        reading.serialized,
        epochs,
        parse_batch=reading.parse_batch,
        encoded=reading.encoded,
        allocate=reading.arena_allocator(reading.block_spec),
    )
    return ds


def _block_stream(reading: Reading) -> tf.data.Dataset:
    """Plan.BLOCK_STREAM: records shuffled (still serialized: a smaller buffer entry than
    a parsed example) ─ batched ─ parsed and decoded as one block ─ output."""
    opts, deterministic = reading.opts, reading.opts.is_deterministic
    ds = reading.serialized
    if opts.shuffle:
        ds = ds.shuffle(opts.shuffle_buffer, seed=opts.seed, reshuffle_each_iteration=True)
    batch_size = opts.batch_size or UNBATCHED_BLOCK
    drop = opts.drop_remainder and opts.batch_size is not None
    decode_blocks = decode_jpeg_blocks(reading.encoded, batch_size if drop else None)
    parse_batch = reading.parse_batch
    ds = ds.batch(batch_size, drop_remainder=drop)
    ds = ds.map(
        lambda serialized: decode_blocks(parse_batch(serialized)),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )
    if opts.batch_size is None:
        ds = ds.unbatch()
    return ds.map(reading.output_fn, num_parallel_calls=AUTOTUNE, deterministic=deterministic)


def _arena_of_examples(reading: Reading) -> tf.data.Dataset:
    """Plan.ARENA_OF_EXAMPLES: decoded examples shuffled ─ batched ─ copied into the
    arena (epoch 1); later epochs gather from the arena."""
    epochs = arena_dataset.ArenaEpochs.of(reading.opts, reading.num_examples, reading.output_fn)
    allocate = reading.arena_allocator(reading.examples.element_spec)
    ds, _ = arena_dataset.arena_batches(reading.examples, epochs, allocate=allocate)
    return ds


def _per_example(reading: Reading) -> tf.data.Dataset:
    """Plan.PER_EXAMPLE: decoded examples ─ cache (in memory or files) ─ shuffle buffer
    ─ batch ─ output."""
    opts, deterministic = reading.opts, reading.opts.is_deterministic
    ds = reading.examples
    if opts.cache is True:
        ds = ds.cache()
    elif opts.cache:  # Keyed by what is cached, and safe against killed and concurrent runs.
        ds = tf_file_cache.cache_in_files(
            ds,
            opts.cache,
            dataset_name=reading.builder.info.full_name,
            split=reading.split,
            instructions=reading.instructions,
            transform=opts.transform,
        )
    if opts.shuffle:
        ds = ds.shuffle(opts.shuffle_buffer, seed=opts.seed, reshuffle_each_iteration=True)
    if opts.batch_size is not None:
        ds = ds.batch(
            opts.batch_size,
            drop_remainder=opts.drop_remainder,
            num_parallel_calls=AUTOTUNE,
            deterministic=deterministic,
        )
    return ds.map(reading.output_fn, num_parallel_calls=AUTOTUNE, deterministic=deterministic)


PIPELINES: dict[Plan, Callable[[Reading], tf.data.Dataset]] = {
    Plan.ARENA: _arena,
    Plan.BLOCK_STREAM: _block_stream,
    Plan.ARENA_OF_EXAMPLES: _arena_of_examples,
    Plan.PER_EXAMPLE: _per_example,
}


def epochs(ds: tf.data.Dataset, reading: Reading) -> tf.data.Dataset:
    """One epoch's batches ─ repeat ─ prefetch, with the dataset's exact length."""
    opts = reading.opts
    if opts.epochs != 1:
        ds = ds.repeat(opts.epochs)
    ds = ds.prefetch(AUTOTUNE)
    if opts.service is None or opts.service_sharding == "dynamic":
        # Keras shows N/N steps and does not warn that the input "ran out of data".
        cardinality = _cardinality(reading.num_examples, opts)
        ds = ds.apply(tf.data.experimental.assert_cardinality(cardinality))
    tf_options = tf.data.Options()
    tf_options.deterministic = opts.is_deterministic
    tf_options.autotune.enabled = True
    return ds.with_options(tf_options)


def _cardinality(num_examples: int, opts: ReadOptions) -> int:
    """Elements (batches, or examples) the dataset yields per iteration."""
    if opts.epochs is None:
        return tf.data.INFINITE_CARDINALITY
    per_epoch = records.batches_per_epoch(num_examples, opts.batch_size, opts.drop_remainder)
    return per_epoch * opts.epochs
