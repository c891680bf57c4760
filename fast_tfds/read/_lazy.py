"""Package attributes imported on first use (PEP 562), so that importing a package (this
one, or fast_tfds itself) loads none of the modules behind its public names until one is
used. It sits in `read`, the bottom layer, so every layer may use it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def exports(package: str, table: dict[str, str]) -> tuple[list[str], Callable, Callable]:
    """(__all__, __getattr__, __dir__) for `package`, whose names are in `table`: name ->
    module."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return sorted([*vars(sys.modules[package]), *table])

    return sorted(table), __getattr__, __dir__
