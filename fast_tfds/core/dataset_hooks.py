"""Dataset-specific behaviour, behind one hook that both back ends call.

The reader and the loader know images and labels. A dataset that offers more
(Stanford Dogs' boxes: `crop_to_box`, `with_boxes`) subclasses `DatasetHook` in
its own package and registers it under its name when the package is imported:

    dataset_hooks.register("stanford_dogs_tfrecord", StanfordDogsHook())

Each back end then takes the keywords the hook declares besides its own
options, and calls the hook's side for itself: `reader_options` and
`finish_dataset` for the tf.data reader, `example_parts` for the Grain loader.
The hook is looked up by the dataset's name, so it applies to a `builder_dir`
read as well (the dataset's package must be imported, as it is for its own
`as_fast_dataset` and `as_fast_loader`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

# (height, width) of the whole image -> (top, left, height, width) of the part to keep.
Window = Callable[[int, int], tuple[int, int, int, int]]


class ExampleParts(Protocol):
    """The loader's side of a hook: what a dataset adds to each decoded example.

    `values` holds the raw values (flat numpy arrays) of the serialized features
    named in `keys`, e.g. {'objects/bbox': float32 [4 * n]}. Instances are pickled
    to the loader's worker processes.
    """

    keys: tuple[str, ...]

    def window(self, values: Mapping[str, np.ndarray]) -> Window | None:
        """The part of the image to keep (None: all of it)."""

    def target(self, values: Mapping[str, np.ndarray], label: np.int64) -> Any:
        """What comes with the image in place of the bare label."""


class DatasetHook:
    """What a dataset adds to both back ends; this base adds nothing.

    `reader_keywords` and `loader_keywords` are the dataset's own keywords of
    `as_fast_dataset` and `as_fast_loader`, with their defaults. The methods
    receive `settings`: those keywords, each with the caller's value or the default.
    """

    reader_keywords: Mapping[str, Any] = {}
    loader_keywords: Mapping[str, Any] = {}

    def check(self, features: Any, settings: Mapping[str, Any]) -> None:
        """Raises a one-line ValueError when the dataset's `features` cannot serve `settings`."""

    def reader_options(self, settings: Mapping[str, Any], *, as_supervised: bool) -> dict:
        """`ReadOptions` fields for the tf.data reader (`transform`, `transform_keys`,
        `as_supervised`); empty when the settings ask for nothing."""
        return {}

    def finish_dataset(self, ds: Any, settings: Mapping[str, Any], *, as_supervised: bool) -> Any:
        """The reader's `tf.data.Dataset` as the dataset's users get it."""
        return ds

    def example_parts(self, settings: Mapping[str, Any]) -> ExampleParts | None:
        """The loader's per-example additions; None when the settings ask for nothing."""
        return None

    def persist_identity(self, settings: Mapping[str, Any]) -> dict | None:
        """What of `settings` changes the pixels or the targets of a cached example, named
        the same from either back end's settings: part of the key of a persistent cache
        of augmented reads, which both back ends share. {} when nothing changes; None
        when the targets are more than the label, which such a cache does not keep."""
        return {}


_HOOKS: dict[str, DatasetHook] = {}
_NO_HOOK = DatasetHook()


def register(name: str, hook: DatasetHook) -> None:
    """Makes `hook` the hook of dataset `name` (a registered TFDS name)."""
    _HOOKS[name] = hook


def hook_for(name: str) -> DatasetHook:
    """The hook registered for dataset `name`, or one that adds nothing."""
    return _HOOKS.get(name, _NO_HOOK)


def dataset_settings(
    declared: Mapping[str, Any],
    keywords: Mapping[str, Any],
    *,
    options: set[str] | frozenset[str],
    caller: str,
    dataset: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Splits a front door's `keywords` into (the dataset's settings, the back end's options).

    `declared` is the hook's `reader_keywords` or `loader_keywords`; `options`
    the back end's own option names. A keyword that is neither is a TypeError
    that lists both, as Python's own is for an unexpected keyword.
    """
    unknown = sorted(set(keywords) - set(options) - set(declared))
    if unknown:
        known = ", ".join(sorted({*options, *declared}))
        raise TypeError(
            f"{unknown[0]}: not an option of {caller} for {dataset}; the options are {known}"
        )
    settings = {key: keywords.get(key, default) for key, default in declared.items()}
    rest = {key: value for key, value in keywords.items() if key not in declared}
    return settings, rest
