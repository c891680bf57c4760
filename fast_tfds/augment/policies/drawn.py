"""A batch's drawn policy ops, as arrays (for tests and statistics) and as recipes."""

from __future__ import annotations

import dataclasses

import numpy as np

from fast_tfds.augment import draws
from fast_tfds.core.options import check_number


@dataclasses.dataclass(frozen=True)
class Drawn:
    """ops: int [n, k], indices into `names`; magnitude: float [n, k], the policy's own
    magnitude (signed where the op is; a bin's value for torchvision, a 0-10 level for
    timm); arguments: float [n, k], what the op module takes; applied: bool [n, k]
    (timm applies each chosen op with its probability)."""

    names: tuple[str, ...]
    ops: np.ndarray
    magnitude: np.ndarray
    arguments: np.ndarray
    applied: np.ndarray

    def recipes(self) -> list[list[tuple[str, float]]]:
        """Per example, the (op name, argument) pairs applied, in order."""
        return [
            [(self.names[o], float(a)) for o, a, on in zip(ops, args, applied, strict=True) if on]
            for ops, args, applied in zip(
                self.ops.tolist(), self.arguments.tolist(), self.applied.tolist(), strict=True
            )
        ]


def check_num_ops(n) -> None:
    """A RandAugment's `num_ops`: ops chosen per example, as many as the draws hold."""
    must = f"an integer in [0, {draws.MAX_OPS}]"
    check_number("num_ops", n, lambda v: 0 <= v <= draws.MAX_OPS, must, kind=int)


def choose_ops(seed: int, epoch: int, indices, num_ops: int, num_names: int):
    """Each example's `num_ops` op slots: the policy block's uniforms, float [n, k,
    POLICY_SLOT] (column 0 chose the op; the others are the op's to use), and the op each
    slot chose, int [n, k] (indices into the policy's `num_names` ops)."""
    u = draws.block(seed, epoch, indices, draws.POLICY, draws.POLICY_SLOT * max(num_ops, 1))
    u = u.reshape(len(u), max(num_ops, 1), draws.POLICY_SLOT)[:, :num_ops]
    op = np.minimum(np.floor(u[..., 0] * num_names), num_names - 1).astype(np.int64)
    return u, op
