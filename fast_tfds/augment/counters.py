"""Counter-based uniforms: every number a hash of (seed, epoch, example, column).

The draws of every recipe read columns of `uniforms` (the windows' own, then those of
`draws`), so a number does not depend on the order examples are read in, on threads or
worker processes, or on what else was drawn. It imports nothing of ours, so that the
spec's validation may parse a policy (whose draws read it) without a cycle.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def uniforms(seed: int, epoch: int, indices, draws: int) -> np.ndarray:
    """[len(indices), draws] float64 uniforms in [0, 1), a pure function of
    (seed, epoch, index, column): a SplitMix64 hash of the four."""
    indices = np.asarray(indices, np.uint64).reshape(-1, 1)
    with np.errstate(over="ignore"):
        key = _mix(np.uint64(seed & (2**64 - 1)) + _GOLDEN)
        key = _mix(key ^ (np.uint64(epoch & (2**64 - 1)) + _GOLDEN * np.uint64(2)))
        key = _mix(key ^ (indices + _GOLDEN * np.uint64(3)))
        counters = np.arange(1, draws + 1, dtype=np.uint64) * _GOLDEN
        bits = _mix(key + counters)
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _mix(x):
    """SplitMix64's finalizer: a bijection of uint64 that spreads every input bit."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))
