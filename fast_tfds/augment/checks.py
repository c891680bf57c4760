"""The check of the augmentation classes' number options. It imports nothing of ours, so
that the policies may use it while the spec's validation parses a policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def check_number(name: str, value: Any, fits: Callable, must: str, *, kind=(int, float)) -> None:
    """A one-line ValueError "name=value: must be <must>" unless `value` is a `kind`, not a
    bool, and `fits(value)` (NaN fits no range)."""
    if isinstance(value, bool) or not isinstance(value, kind) or not fits(value):
        raise ValueError(f"{name}={value!r}: must be {must}")
