"""Multi-host evaluation's padding, for both back ends: how many examples every host's
epoch holds when the hosts' shares are padded to the same full batches.

A JAX or multi-worker evaluation step runs on every host together: a host whose share
ran out a batch early would leave the others waiting forever. So every host yields the
batches of the largest share, each full; the examples past a host's own are padding
(index -1). The tf.data reader (`read.epochs`) and the Grain loader (`loader.padding`)
take this one length; how each finds its largest share (whole shard files, or every
`shard_count`-th example) is its own.
"""

from __future__ import annotations


def padded_length(largest_share: int, batch_size: int | None, drop_remainder: bool) -> int:
    """Examples per epoch on every host: the largest share in whole batches (its last,
    partial batch filled up with padding, or dropped with `drop_remainder`); unbatched
    (`batch_size` None), the largest share itself."""
    if batch_size is None:
        return largest_share
    if drop_remainder:
        return largest_share // batch_size * batch_size
    return -(-largest_share // batch_size) * batch_size
