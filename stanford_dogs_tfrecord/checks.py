"""Do images.tar, annotation.tar and lists.tar look like Stanford Dogs' own, and belong together?

Checked on the parsed lists and annotations and the names of images.tar's
members, before any image is read or anything written (the rule is
`fast_tfds.building.checks.require_mostly_usable`: more than 10% and more than 5
unusable, or none usable, fails the build):

- the listed images (train_list.mat + test_list.mat): each must be in one of
  the 120 breed folders, be in images.tar, and have an annotation;
- the images of images.tar (Images/<breed>/<name>.jpg): each must be listed.

The real archives list all 20,580 images, with an annotation each. A damaged
image or annotation file is not checked here: it is a skip.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from fast_tfds.building import checks
from stanford_dogs_tfrecord.source_parsing import image_key

_SOURCES = "images.tar, annotation.tar and lists.tar"
_HINT = (
    "Use the three archives of http://vision.stanford.edu/aditya86/ImageNetDogs/ together "
    "(a subset needs lists that match its images, as `fast-tfds sample DIR` writes)."
)


def check_sources(
    builder,
    listed: Mapping[str, tuple[str, str]],
    tar_members: Iterable[tuple[str, Any]],
    annotations: Mapping[str, object],
) -> None:
    """Raises SourceStructureError if the archives are not Stanford Dogs' own.

    Args:
      builder: the dataset builder (its name and its 120 label names).
      listed: {'<breed folder>/<file>.jpg': (split, annotation name)}, from lists.tar.
      tar_members: (name, anything) of images.tar's members, as `archives.tar_members`.
      annotations: {annotation name: anything}, from annotation.tar.
    """
    labels = set(builder.info.features["label"].names)
    in_tar = {image_key(member) for member, _ in tar_members} - {None}

    unusable: dict[str, list[str]] = {
        "breed folder is not one of the 120 classes": [],
        "not in images.tar": [],
        "no annotation in annotation.tar": [],
    }
    for key, (_, annotation_name) in sorted(listed.items()):
        if key.split("/")[0].lower() not in labels:
            unusable["breed folder is not one of the 120 classes"].append(key)
        elif key not in in_tar:
            unusable["not in images.tar"].append(key)
        elif annotation_name not in annotations:
            unusable["no annotation in annotation.tar"].append(key)
    require = functools.partial(
        checks.require_mostly_usable, builder.name, source=_SOURCES, hint=_HINT
    )
    require(items="images listed in lists.tar", total=len(listed), unusable=unusable)
    require(
        items="images of images.tar",
        total=len(in_tar),
        unusable={"in neither train_list.mat nor test_list.mat": sorted(in_tar - set(listed))},
    )
