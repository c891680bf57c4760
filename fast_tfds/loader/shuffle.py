"""The loader's global shuffle: Grain's `MapDataset.shuffle(seed)`, element for element,
with each epoch's permutation computed once, in numpy.

Grain's `ShuffleMapDataset` asks its C++ `index_shuffle` for one element at a time,
holding the GIL: it builds the cipher's round keys on every call and walks the cycle
of a 2^16 or larger block, about 5-10 us an element on this project's 2-core machine.
In a served epoch of the loader's picture store that was 13% of the samples of a
profile (py-spy, against 57% for the resize of the crops). Here the same cipher runs
over a whole epoch's positions at once: a Simon cipher of `ROUNDS` rounds with round
keys from C++'s `std::seed_seq`, cycle-walked into [0, length), seeded by
(seed + epoch) mod 2^32 as Grain seeds each epoch. The order is Grain's
(tests/loader/test_shuffle.py compares the two for many lengths and seeds), so a state
saved by a loader that shuffled with Grain resumes here at the same element. One
exception: a shard of 2^k + 1 examples (k even, 16 or more), where Grain's order holds
one example twice and never the last one; here every example comes once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import grain
import numpy as np

# Grain's `ShuffleMapDataset` calls `index_shuffle(..., rounds=4)`.
ROUNDS = 4
# Grain's smallest block: smaller ones showed patterns in its permutations.
MIN_BLOCK_BITS = 16
# Blocks up to 2^24 values (128 MiB of uint64 while a permutation is made) are
# encrypted whole; larger ones walk each position's cycle.
TABLE_BITS = 24
_M32 = 0xFFFFFFFF


def round_keys(seed: int, rounds: int = ROUNDS) -> list[int]:
    """`std::seed_seq{seed}.generate` of `rounds` 32-bit words (C++ [rand.util.seedseq])."""
    n, seeds = rounds, [seed & _M32]
    s = len(seeds)
    out = [0x8B8B8B8B] * n
    t = 11 if n >= 623 else 7 if n >= 68 else 5 if n >= 39 else 3 if n >= 7 else (n - 1) // 2
    p = (n - t) // 2
    q = p + t
    m = max(s + 1, n)

    def mix(x: int) -> int:
        return x ^ (x >> 27)

    for k in range(m):
        r1 = (1664525 * mix(out[k % n] ^ out[(k + p) % n] ^ out[(k - 1) % n])) & _M32
        r2 = (r1 + (s if k == 0 else (k % n + seeds[k - 1] if k <= s else k % n))) & _M32
        out[(k + p) % n] = (out[(k + p) % n] + r1) & _M32
        out[(k + q) % n] = (out[(k + q) % n] + r2) & _M32
        out[k % n] = r2
    for k in range(m, m + n):
        total = (out[k % n] + out[(k + p) % n] + out[(k - 1) % n]) & _M32
        r3 = (1566083941 * mix(total)) & _M32
        r4 = (r3 - k % n) & _M32
        out[(k + p) % n] ^= r3
        out[(k + q) % n] ^= r4
        out[k % n] = r4
    return out


def _encrypt(values: np.ndarray, keys: list[int], word: int) -> np.ndarray:
    """Grain's Simon rounds on blocks of 2 * `word` bits (unsigned values, uint32 for
    blocks of up to 32 bits, else uint64)."""
    kind = values.dtype.type
    mask = kind((1 << word) - 1)
    w = kind(word)
    left = (values >> w) & mask
    right = values & mask

    def rotl(x: np.ndarray, r: int) -> np.ndarray:
        return ((x << kind(r)) | (x >> (w - kind(r)))) & mask

    def f(x: np.ndarray) -> np.ndarray:
        return (rotl(x, 1) & rotl(x, 8)) ^ rotl(x, 2)

    for i in range(0, len(keys), 2):
        left ^= f(right) ^ (kind(keys[i] & ((1 << word) - 1)))
        right ^= f(left) ^ (kind(keys[i + 1] & ((1 << word) - 1)))
    return (left << w) | right


def permutation(length: int, seed: int, rounds: int = ROUNDS) -> np.ndarray:
    """int64 [length]: position i of the shuffled epoch holds element `out[i]`, as
    Grain's `index_shuffle(i, max_index=length - 1, seed=seed, rounds=rounds)`."""
    if length <= 1:
        return np.zeros(max(length, 0), np.int64)
    max_index = length - 1
    bits = math.ceil(math.log2(max_index))
    bits = max(bits + bits % 2, MIN_BLOCK_BITS)
    if length > 1 << bits:
        # max_index an even power of two from 2^16 on: Grain's block leaves it out, and
        # its order holds one element twice and never the last one. The next block
        # size keeps every element once (the one place this order is not Grain's).
        bits += 2
    keys = round_keys(seed, rounds)
    word = bits // 2
    dtype = np.uint32 if bits <= 32 else np.uint64  # half the memory traffic
    if bits <= TABLE_BITS:
        # The cipher over the whole block once, then each step of a walk is a lookup: a
        # block holds fewer than 4x `length` values (or 2^16), where each walk takes as
        # many steps on average.
        step = _encrypt(np.arange(1 << bits, dtype=dtype), keys, word).__getitem__
    else:
        step = functools.partial(_encrypt, keys=keys, word=word)

    out = step(np.arange(length, dtype=dtype))
    outside = np.flatnonzero(out > max_index)
    while len(outside):  # Cycle-walking: encrypt again until inside [0, max_index].
        out[outside] = step(out[outside])
        outside = outside[out[outside] > max_index]
    return out.astype(np.int64)


class EpochShuffle(grain.MapDataset):
    """`parent.shuffle(seed)` as Grain orders it (a new permutation each epoch: index
    e * len + i is epoch e's position i), each epoch's permutation made once."""

    _MUTATES_ELEMENT_SPEC = False

    def __init__(self, parent: grain.MapDataset, *, seed: int):
        super().__init__(parent)
        if not 0 <= seed < 2**32:
            raise ValueError(f"seed: must be in [0, 2**32), got {seed}")
        self._seed = int(seed)
        self._length = len(parent)
        # The two most recent epochs' permutations, for a boundary. Replaced whole, never
        # changed in place, so the decode threads share it without a lock (a permutation
        # two threads make at once is made twice, one kept).
        self._epochs: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return self._length

    def __str__(self) -> str:
        return "EpochShuffle"

    def __getstate__(self):
        # Pickled to worker processes: each makes its own epochs' permutations.
        return {**self.__dict__, "_epochs": {}}

    def _order(self, epoch: int) -> np.ndarray:
        epochs = self._epochs
        order = epochs.get(epoch)
        if order is None:
            order = permutation(self._length, (self._seed + epoch) % 2**32)
            self._epochs = dict(sorted({**epochs, epoch: order}.items())[-2:])
        return order

    def _shuffled(self, index: int) -> int:
        epoch, position = divmod(int(index), self._length)
        return int(self._order(epoch)[position]) + epoch * self._length

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.slice(index)
        return self._parent[self._shuffled(index)]

    def _getitems(self, indices: Sequence[int]):
        return self._parent._getitems([self._shuffled(i) for i in indices])  # noqa: SLF001
