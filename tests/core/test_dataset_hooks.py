"""Dataset hooks: the keywords a dataset adds are split from a back end's own, an
unknown one lists both, and Stanford Dogs' hook is found by its name."""

from __future__ import annotations

import numpy as np
import pytest

import stanford_dogs_tfrecord
from fast_tfds.core import dataset_hooks

LOADER_OPTIONS = frozenset({"batch_size", "seed"})


def settings(name: str, keywords: dict):
    hook = dataset_hooks.hook_for(name)
    return dataset_hooks.dataset_settings(
        hook.loader_keywords,
        keywords,
        options=LOADER_OPTIONS,
        caller="as_fast_loader",
        dataset=name,
    )


def test_a_datasets_keywords_are_its_own_with_their_defaults():
    own, rest = settings(stanford_dogs_tfrecord.NAME, {"crop_to_box": True, "batch_size": 8})
    assert own == {"with_boxes": False, "crop_to_box": True, "max_boxes": 16}
    assert rest == {"batch_size": 8}


def test_a_dataset_without_a_hook_takes_only_the_back_ends_options():
    assert dataset_hooks.hook_for("cats_vs_dogs_fast").loader_keywords == {}
    assert settings("cats_vs_dogs_fast", {"seed": 1}) == ({}, {"seed": 1})
    with pytest.raises(TypeError) as excinfo:
        settings("cats_vs_dogs_fast", {"crop_to_box": True, "seed": 1})
    assert str(excinfo.value) == (
        "crop_to_box: not an option of as_fast_loader for cats_vs_dogs_fast; "
        "the options are batch_size, seed"
    )


def test_stanfords_loader_side_crops_and_pads_its_boxes():
    hook = dataset_hooks.hook_for(stanford_dogs_tfrecord.NAME)
    assert hook.example_parts({"crop_to_box": False, "with_boxes": False, "max_boxes": 4}) is None
    parts = hook.example_parts({"crop_to_box": True, "with_boxes": True, "max_boxes": 3})
    values = {"objects/bbox": np.array([0.1, 0.25, 0.6, 1.0, 0.0, 0.0, 0.5, 0.5], np.float32)}
    assert parts.window(values)(40, 48) == (4, 12, 20, 36)
    target = parts.target(values, np.int64(7))
    assert target["label"] == 7 and target["num_boxes"] == 2
    np.testing.assert_array_equal(target["bbox"][2], np.zeros(4, np.float32))
    np.testing.assert_allclose(target["bbox"][:2].reshape(-1), values["objects/bbox"])
    # An image without boxes stays whole.
    assert parts.window({"objects/bbox": np.zeros(0, np.float32)})(40, 48) == (0, 0, 40, 48)
