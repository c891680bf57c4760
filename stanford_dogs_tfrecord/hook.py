"""Stanford Dogs' boxes in both back ends: the dataset's `DatasetHook`.

`crop_to_box` (the image cut to its first box, the annotated dog) and
`with_boxes` (the boxes next to the label) are options of this dataset only,
so they live here, and the generic reader and loader reach them through the
hook that `stanford_dogs_tfrecord` registers. The tf.data side is
`stanford_dogs_tfrecord.boxes` (TensorFlow, imported when used); the loader's
side is `BoxParts` below (numpy). Both cut the window of `crops.pixel_window`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from fast_tfds.core import dataset_hooks, options
from stanford_dogs_tfrecord import crops

# The serialized feature that holds an example's boxes: [4 * n] floats.
BBOX_KEY = "objects/bbox"


class StanfordDogsHook(dataset_hooks.DatasetHook):
    reader_keywords = {"with_boxes": False, "crop_to_box": False}
    loader_keywords = {"with_boxes": False, "crop_to_box": False, "max_boxes": 16}

    def check(self, features: Any, settings: Mapping[str, Any]) -> None:
        asked = [key for key in ("crop_to_box", "with_boxes") if settings.get(key)]
        has_boxes = "objects" in features and "bbox" in features["objects"].feature
        if asked and not has_boxes:
            raise ValueError(f"{asked[0]}=True: this build has no boxes ({BBOX_KEY})")
        if "max_boxes" in settings:
            options.check_int("max_boxes", settings["max_boxes"], minimum=0)

    def reader_options(self, settings: Mapping[str, Any], *, as_supervised: bool) -> dict:
        # Example dicts (as_supervised=False) always hold the boxes, which must batch.
        if as_supervised and not (settings["with_boxes"] or settings["crop_to_box"]):
            return {}
        from stanford_dogs_tfrecord import boxes  # TensorFlow: the reader's side only.

        return boxes.reader_options(
            with_boxes=settings["with_boxes"],
            crop_to_box=settings["crop_to_box"],
            as_supervised=as_supervised,
        )

    def finish_dataset(self, ds: Any, settings: Mapping[str, Any], *, as_supervised: bool) -> Any:
        # `boxes.finish` returns the (image, label) pairs as they are, with or without crops.
        from stanford_dogs_tfrecord import boxes

        return boxes.finish(ds, with_boxes=settings["with_boxes"], as_supervised=as_supervised)

    def persist_identity(self, settings: Mapping[str, Any]) -> dict | None:
        # The boxes as targets are not kept in a persistent cache; the crop changes pixels.
        if settings["with_boxes"]:
            return None
        return {"crop_to_box": True} if settings["crop_to_box"] else {}

    def example_parts(self, settings: Mapping[str, Any]) -> BoxParts | None:
        if not (settings["with_boxes"] or settings["crop_to_box"]):
            return None
        return BoxParts(**settings)  # The loader's settings: crop_to_box, with_boxes, max_boxes.


@dataclasses.dataclass(frozen=True)
class BoxParts:
    """The loader's side (`dataset_hooks.ExampleParts`): the crop window, and the boxes as
    {"label", "bbox" float32 [max_boxes, 4], "num_boxes" int32}, padded with zero
    rows so that every batch has one shape (what jax.jit wants)."""

    crop_to_box: bool = False
    with_boxes: bool = False
    max_boxes: int = 16
    keys: tuple[str, ...] = (BBOX_KEY,)

    def window(self, values: Mapping[str, np.ndarray]) -> dataset_hooks.Window | None:
        if not self.crop_to_box:
            return None
        return functools.partial(crops.first_box_window, _boxes(values))

    def target(self, values: Mapping[str, np.ndarray], label: np.int64) -> Any:
        if not self.with_boxes:
            return label
        bbox, num_boxes = pad_boxes(_boxes(values), self.max_boxes)
        return {"label": label, "bbox": bbox, "num_boxes": num_boxes}


def _boxes(values: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.asarray(values[BBOX_KEY], np.float32).reshape(-1, 4)


def pad_boxes(boxes: np.ndarray, max_boxes: int) -> tuple[np.ndarray, np.int32]:
    """[max_boxes, 4] float32 with the boxes first and zeros after, and their count."""
    if len(boxes) > max_boxes:
        raise ValueError(
            f"an image has {len(boxes)} boxes, more than max_boxes={max_boxes}; "
            f"pass max_boxes={len(boxes)} or more"
        )
    padded = np.zeros((max_boxes, 4), np.float32)
    padded[: len(boxes)] = boxes
    return padded, np.int32(len(boxes))
