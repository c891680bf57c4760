"""Each host's share of the examples, the example index in the output, and multi-host
evaluation's padding.

Every read of the loader starts from `Share`: this host's examples (every
`shard_count`-th from `shard_index`) in record order, each with its index in the split.

With `with_index=True` every batch carries each example's index in the split (its
position as read in record order, numbered before the hosts share the examples), so
that predictions join the examples they were made for.

With several hosts (`shard_count > 1`), `shuffle=False` and `with_index=True`, a JAX
evaluation step runs on every host together: a host whose share ran out a batch early
would leave the others waiting forever. Each host's share (every `shard_count`-th
example from `shard_index`) is padded at its end to the batches of the largest share,
every batch full. A padding example has index -1, label 0 (zero targets) and a zero
image: the mask of real examples is `index >= 0`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fast_tfds.core import shares
from fast_tfds.loader.augmented import map_arrays
from fast_tfds.loader.examples import DecodeExample


def padded_share(num_examples: int, options) -> int | None:
    """Examples per epoch on every host where these `LoaderOptions` pad each host's share
    (several hosts, shuffle=False, with_index=True): the largest share in whole batches;
    None where they do not."""
    if options.shard_count == 1 or options.shuffle or not options.with_index:
        return None
    largest = -(-num_examples // options.shard_count)
    return shares.padded_length(largest, options.batch_size, options.drop_remainder)


def pad_target(source, decode: DecodeExample, first: int) -> Any:
    """The targets of a padding example: zeros, shaped as a real example's (the host's
    first, parsed once; its picture, zeros too, is the batch's)."""
    return map_arrays(np.zeros_like, decode.parse(source.records[first])[1])


class Share:
    """The pipeline's source: one host's examples in record order as (index, record),
    then (-1, None) up to `length` where hosts are padded (None: no padding); (index,
    None) for an example the picture store already holds (its record is not read)."""

    def __init__(self, records: Any, indices: range, length: int | None = None, cache=None):
        self.records, self.indices, self.cache = records, indices, cache
        self.length = len(indices) if length is None else length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, position: int) -> tuple[int, Any]:
        position = int(position)
        if position >= len(self.indices):
            return -1, None
        index = self.indices[position]
        if self.cache is not None and self.cache.has(index):
            return index, None
        return index, self.records[index]
