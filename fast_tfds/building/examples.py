"""What a per-example function returns, and the report of what a build leaves out.

A leaf module: the builder, the Beam transform and both datasets import it, and
it imports nothing of theirs.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any

from absl import logging

from fast_tfds.building import images, once

KeyExample = tuple[str, dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Skipped:
    """What a per-example function returns for a file the build leaves out."""

    file: str
    reason: str


# features(member name, the normalized image, the member's extra) -> (key, the
# dataset's features besides the image and its filename).
ExampleFeatures = Callable[[str, images.NormalizedImage, Any], KeyExample]


def image_example(
    member: tuple[str, bytes, Any], *, size: tuple[int, int] | None, features: ExampleFeatures
) -> KeyExample | Skipped:
    """(name, bytes, extra) -> (key, example), or why the file is left out.

    The whole per-example work of a build, pure: the local build runs it in
    threads, a Beam build on its workers. The image becomes a clean JPEG of
    `size`, stored with its filename next to the dataset's own `features`.
    """
    name, data, extra = member
    try:
        image = images.normalize_image(data, size)
    except images.UndecodableImage as err:
        return Skipped(name, err.reason)
    key, more = features(name, image, extra)
    return key, {"image": image.jpeg, "image/filename": name, **more}


class SkipReport:
    """Counts the files a split leaves out, and why."""

    def __init__(self, dataset: str, split: str):
        self.dataset = dataset
        self.split = split
        self.kept = 0
        self.skipped: list[dict[str, str]] = []

    def skip(self, filename: str, reason: str) -> None:
        self.skipped.append({"file": filename, "reason": reason})

    def by_reason(self) -> dict[str, int]:
        return dict(collections.Counter(s["reason"] for s in self.skipped).most_common())

    def log_summary(self) -> None:
        if not self.skipped:
            once.log_once(
                logging.INFO,
                "%s/%s: kept %d images, skipped none.",
                self.dataset,
                self.split,
                self.kept,
            )
            return
        reasons = "; ".join(f"{n} x {reason}" for reason, n in self.by_reason().items())
        once.log_once(
            logging.WARNING,
            "%s/%s: kept %d images, skipped %d files (%s). The list is in the "
            "dataset's metadata.json under 'skipped'.",
            self.dataset,
            self.split,
            self.kept,
            len(self.skipped),
            reasons,
        )

    def as_metadata(self) -> dict[str, Any]:
        return {"count": len(self.skipped), "by_reason": self.by_reason(), "files": self.skipped}
