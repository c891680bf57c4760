"""The counter-based uniforms every draw reads, and which of their columns each
per-example draw of a recipe reads.

`uniforms(seed, epoch, indices, draws)` hashes (seed, epoch, example, column), so a
number does not depend on the order examples are read in, on threads or worker
processes, or on what else was drawn; and column j is the same number whatever `draws`
is: the stronger recipes take columns after the windows' own (0 .. windows.DRAWS - 1),
each its own block, and adding one never changes another's draws, nor today's windows.
This module imports nothing of ours, so that the spec's validation may parse a policy
(whose draws read it) without a cycle.
"""

from __future__ import annotations

import numpy as np

# The windows' own columns (`windows.DRAWS`, which a test checks this against): not
# imported, since the windows read the spec, whose validation parses policies.
WINDOW_DRAWS = 27
ROTATE = WINDOW_DRAWS  # the angle of a uniform rotation
ERASE = ROTATE + 1
ERASE_TRIES = 10  # timm's RandomErasing: tries per box
# Erasing: whether, then per try: area, aspect, top, left; then the pixels' seed.
ERASE_DRAWS = 1 + 4 * ERASE_TRIES + 1
POLICY = ERASE + ERASE_DRAWS
POLICY_SLOT = 5  # per op of a policy: which op, magnitude (2: a gaussian's), sign, whether
MAX_OPS = 16

# SplitMix64's increment: 2**64 over the golden ratio.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def block(seed: int, epoch: int, indices, start: int, count: int) -> np.ndarray:
    """[len(indices), count] uniforms in [0, 1): columns start .. start + count - 1."""
    return uniforms(seed, epoch, indices, start + count)[:, start:]


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
