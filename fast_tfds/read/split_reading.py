"""One split read with one set of options: what every plan builds its pipeline from.

`Reading.start` checks the split and the service and takes this input pipeline's
share of the shard files; the options are kept as the typed parts the plans need.
The parts only some plans use (the records, the block parser, the arena's rows) are
made on first use.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import random
from collections.abc import Callable

import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.augment import progressive
from fast_tfds.augment.progressive import ProgressiveResize
from fast_tfds.augment.spec import Augment
from fast_tfds.core.options import SEED_LIMIT
from fast_tfds.read import mixed, records, service
from fast_tfds.read.decoding import BlockImages, block_images, make_decoder
from fast_tfds.read.options import Batching, CacheChoice, CacheKind, Order, ReadOptions
from fast_tfds.read.output import make_output_fn
from fast_tfds.read.parsing import BatchParser, make_batch_parser

AUTOTUNE = tf.data.AUTOTUNE


@dataclasses.dataclass(frozen=True)
class Reading:
    """A split, this input pipeline's file instructions, and what to make of them."""

    builder: tfds.core.DatasetBuilder
    split: str
    instructions: list  # This input pipeline's file instructions.
    order: Order
    batching: Batching  # The batch size per replica under an input_context.
    cache: CacheChoice
    image_size: int | tuple[int, int] | None
    transform: Callable[[dict], dict] | None
    keys: set[str] | None  # The features to parse; None for all of them.
    output_fn: Callable  # fn(batch dict) -> the output (dtype, (image, label) or dict)
    # The image's dtype in the output: the asked one, or uint8 with `mix_batch`.
    output_dtype: tf.DType
    epochs: int | None  # Epochs per iteration; None for forever.
    service_address: str | None
    service_sharding: str
    # The example index of each instruction's first record (`records.instruction_offsets`
    # of the whole split, before an input_context takes its share).
    offsets: list[int] = dataclasses.field(default_factory=list)
    augment: Augment | None = None
    # The seed's value, or one drawn per dataset: every epoch's order, windows and size
    # come from (seed, epoch), so epochs differ, and a resumed run repeats them.
    seed: int = 0
    with_index: bool = False
    # Several pipelines, shuffle=False, with_index: examples of the largest pipeline's
    # share, which every pipeline pads its own up to (index -1); else None.
    padded_examples: int | None = None
    cache_shorter_side: int | None = None
    # image_size=ProgressiveResize(...): each epoch's size (image_size is its largest).
    size_schedule: ProgressiveResize | None = None
    # With `mix=`: fn(epoch, batch index, batch) -> the batch mixed, in the asked dtype
    # (`output_fn` then leaves the pictures uint8, to be blended first).
    mix_batch: Callable | None = None
    # Where a dataset's hook made `transform`: fn() -> what its settings change
    # (`DatasetHook.persist_identity`), for the key of a persistent cache; None: the
    # transform is the user's own, keyed by its code.
    hook_identity: Callable[[], dict | None] | None = None

    @classmethod
    def start(
        cls,
        builder,
        split: str,
        opts: ReadOptions,
        hook_identity: Callable[[], dict | None] | None = None,
    ) -> Reading:
        """Checks the split and the service, and takes this input pipeline's share."""
        instructions = records.file_instructions(builder, split)
        seed = random.SystemRandom().randrange(SEED_LIMIT) if opts.seed is None else opts.seed
        offsets = records.instruction_offsets(instructions)
        service_address = None
        if opts.service is not None:
            service.check_readable(opts.service, os.fspath(instructions[0].filename))
            service_address = service.check_reachable(opts.service)
        padded = None
        index, count = opts.shard_index, opts.shard_count
        if count > 1:
            shares = [records.num_examples(instructions[i::count]) for i in range(count)]
            if opts.with_index and not opts.shuffle:
                padded = max(shares)
            instructions = records.shard_for_pipeline(instructions, opts)
            offsets = offsets[index::count]
            if padded is not None:  # Every batch is full, padding included: none dropped.
                opts = opts.replace(drop_remainder=False)
        context = opts.input_context
        if context is not None and opts.batch_size is not None:
            opts = opts.replace(batch_size=context.get_per_replica_batch_size(opts.batch_size))
        supervised_keys = builder.info.supervised_keys or ("image", "label")
        output_dtype = opts.dtype if opts.mix is None else tf.uint8  # a mix blends uint8
        mix_batch = None
        if opts.mix is not None:
            mix_batch = mixed.mixer(
                opts.mix,
                seed,
                mixed.label_classes(builder, supervised_keys[1]),
                opts.dtype,
                None if opts.as_supervised else supervised_keys,
            )
        keys = None  # The (image, label) output and what `transform` needs, else all.
        if opts.as_supervised:
            keys = {*supervised_keys, *opts.transform_keys}
        return cls(
            builder=builder,
            split=split,
            instructions=instructions,
            order=opts.order,
            batching=opts.batching,
            cache=opts.cache_choice,
            image_size=progressive.largest(opts.image_size),
            transform=opts.transform,
            keys=keys,
            output_fn=make_output_fn(
                output_dtype, opts.as_supervised, supervised_keys, opts.with_index
            ),
            output_dtype=output_dtype,
            epochs=opts.epochs,
            service_address=service_address,
            service_sharding=opts.service_sharding,
            offsets=offsets,
            augment=opts.augment,
            seed=seed,
            with_index=opts.with_index,
            padded_examples=padded,
            cache_shorter_side=opts.cache_shorter_side,
            size_schedule=(
                opts.image_size if isinstance(opts.image_size, ProgressiveResize) else None
            ),
            hook_identity=hook_identity,
            mix_batch=mix_batch,
        )

    @property
    def features(self) -> tfds.features.FeaturesDict:
        return self.builder.info.features

    @functools.cached_property
    def num_examples(self) -> int:
        return records.num_examples(self.instructions)

    @functools.cached_property
    def slots(self) -> records.Slots:
        """Cache row <-> example index of this pipeline's share."""
        return records.Slots.of(self.instructions, self.offsets)

    def epoch_seed(self, epoch, salt: int = 0) -> tf.Tensor:
        """[2] int64: the stateless seed of `epoch`'s random choices (salted per use)."""
        return tf.stack([tf.constant(self.seed, tf.int64), tf.cast(epoch, tf.int64) + (salt << 32)])

    def records(self, epoch=None, *, indices_only: bool = False) -> tf.data.Dataset:
        """(example index, serialized record) pairs of `epoch`, files in the order the
        epoch reads them (the record order unless shuffling; `epoch` None: always the
        record order). `indices_only`: the indices alone, in the same order, nothing
        read."""
        file_seed = None
        if self.order.shuffle and epoch is not None:
            file_seed = self.epoch_seed(epoch, salt=1)
        return records.read_indexed_records(
            self.instructions,
            self.offsets,
            file_seed=file_seed,
            deterministic=self.order.deterministic,
            records=not indices_only,
            copies=None if indices_only else self.shard_copies,
        )

    @functools.cached_property
    def shard_copies(self):
        """Local copies of this pipeline's shards where they are in a bucket (with gcsfs:
        `records.shard_copies`), one set for every epoch of the dataset, which keeps
        them; None otherwise, and with the tf.data service, whose workers read the shard
        files themselves (a Python function does not travel to them)."""
        if self.service_address is not None:
            return None
        return records.shard_copies(self.instructions)

    def shuffled(self, ds: tf.data.Dataset, epoch) -> tf.data.Dataset:
        """`ds` through `epoch`'s shuffle buffer when shuffling (seeded from (seed, epoch):
        the same order for the same epoch, whichever iterator or process reads it)."""
        if not self.order.shuffle or epoch is None:
            return ds
        seed = tf.random.stateless_uniform(
            [], self.epoch_seed(epoch, salt=2), minval=0, maxval=2**62, dtype=tf.int64
        )
        return ds.shuffle(self.order.shuffle_buffer, seed=seed, reshuffle_each_iteration=False)

    @property
    def serialized(self) -> tf.data.Dataset:
        """The serialized records in the split's record order (for their specs)."""
        return self.records().map(lambda _index, record: record)

    @functools.cached_property
    def encoded(self) -> dict[str, BlockImages] | None:
        """{'image': how its JPEGs decode} when they are decoded here in blocks to a
        fixed output size, else None: the size varies, a transform works on each
        example, a tf.data service decodes them, or a file cache keeps the examples."""
        if self.cache.kind is CacheKind.FILES or self.service_address is not None:
            return None
        images = block_images(self.features, self.image_size, self.transform)
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
        parse_batch = self.parse_batch
        parsed = self.serialized.element_spec if parse_batch is None else parse_batch.example_spec
        return {**parsed, **{k: images.spec for k, images in (self.encoded or {}).items()}}

    @functools.cached_property
    def decode_example(self) -> Callable:
        """fn(serialized record) -> the example, parsed and decoded (transformed)."""
        return make_decoder(
            self.features,
            self.image_size,
            self.transform,
            self.keys,
            graph_ops_only=self.service_address is not None,
        )

    def examples(self, epoch=None) -> tf.data.Dataset:
        """(example index, example) pairs of `epoch`'s records (see `records`), parsed and
        decoded one at a time; on the tf.data service's workers when one is given
        (unordered: the service hands files to whichever worker asks)."""
        if self.service_address is not None:
            return self.served_examples
        decode = self.decode_example
        return self.records(epoch).map(
            lambda index, record: (index, decode(record)),
            num_parallel_calls=AUTOTUNE,
            deterministic=self.order.deterministic,
        )

    @functools.cached_property
    def served_examples(self) -> tf.data.Dataset:
        """The examples decoded by the tf.data service, one distributed dataset that
        every epoch iterates again (a new job epoch each time)."""
        decode = self.decode_example
        ds = self.records().map(
            lambda index, record: (index, decode(record)), num_parallel_calls=AUTOTUNE
        )
        return service.distribute(ds, self.service_address, self.service_sharding)
