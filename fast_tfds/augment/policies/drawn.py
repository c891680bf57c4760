"""A batch's drawn policy ops, as arrays (for tests and statistics) and as recipes."""

from __future__ import annotations

import dataclasses

import numpy as np


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
