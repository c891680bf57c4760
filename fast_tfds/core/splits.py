"""Which examples a split name selects: a split, or a slice of one ('train[:80%]')."""

from __future__ import annotations

from typing import Any


def split_info(info: Any, split: str) -> Any:
    """TFDS's SplitInfo for `split` of a dataset (`info`: its DatasetInfo).

    One line that starts with `split=` and lists the dataset's splits when the
    name or the slice is not one of them, or when it selects no example.
    """
    try:
        selected = info.splits[split]
    except (KeyError, ValueError, AssertionError, TypeError):
        available = ", ".join(sorted(info.splits.keys())) or "none"
        raise ValueError(
            f"split={split!r}: not a split or slice of {info.full_name} "
            f"(splits: {available}; slices look like 'train[:80%]')"
        ) from None
    if selected.num_examples == 0:
        raise ValueError(f"split={split!r}: selects no examples of {info.full_name}")
    return selected
