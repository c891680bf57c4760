"""cats_vs_dogs_fast: Microsoft's Kaggle Cats and Dogs as clean, sharded TFRecords."""

from __future__ import annotations

import collections
import re

import tensorflow_datasets as tfds

from fast_tfds.building import FastImageBuilder, checks, image_configs
from fast_tfds.building.archives import ZipMemberReader, zip_members
from fast_tfds.building.examples import KeyExample, SkipReport

_URL = (
    "https://download.microsoft.com/download/3/E/1/"
    "3E1C3F21-ECDB-4869-8368-6DEBA77B919F/kagglecatsanddogs_5340.zip"
)
_HOMEPAGE = "https://www.microsoft.com/en-us/download/details.aspx?id=54765"
_IMAGE_NAME = re.compile(r"^PetImages[\\/](Cat|Dog)[\\/]\d+\.jpg$")
_NOT_AN_IMAGE = "not an image member of PetImages/Cat or PetImages/Dog"


class Builder(FastImageBuilder):
    """Cats vs Dogs: every image that decodes, as RGB JPEG, in >= 16 shards."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {
        "1.0.0": (
            "First release: keeps every file that decodes completely (JPEG, PNG, "
            "GIF, BMP, CMYK, greyscale) as RGB baseline JPEG; configs 224 and "
            "original; >= 16 shards per split; skipped files listed in metadata."
        ),
    }
    BUILDER_CONFIGS = image_configs()

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "image": self.image_feature(),
                    "image/filename": tfds.features.Text(),  # e.g. 'PetImages/Dog/0.jpg'
                    "label": tfds.features.ClassLabel(names=["cat", "dog"]),
                }
            ),
            supervised_keys=("image", "label"),
            homepage=_HOMEPAGE,
            metadata=tfds.core.MetadataDict(),
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        archive = self.source_path(dl_manager, _URL)
        # No official split: everything is 'train'; slice it with 'train[:80%]'.
        return {"train": self._generate_examples(archive)}

    def _generate_examples(self, archive):
        report = SkipReport(self.name, "train")
        members = []
        for member in zip_members(archive):
            name = member.replace("\\", "/")  # Zips made on Windows may use either.
            match = _IMAGE_NAME.match(name)
            if match:
                members.append((name, member, match.group(1).lower()))
            else:  # Thumbs.db, the readme, the licence.
                report.skip(name, _NOT_AN_IMAGE)
        check_structure(self.name, members, report)
        return self.generate_examples(example_features, members, ZipMemberReader(archive), report)


def check_structure(dataset: str, members: list, report: SkipReport) -> None:
    """Fails (before anything is written) unless the zip is mostly PetImages/{Cat,Dog} images.

    The real zip holds 25,000 of them and 4 other files; see `checks` for the rule.
    """
    source = _URL.rsplit("/", 1)[-1]
    hint = (
        f"The build needs Microsoft's {source} ({_HOMEPAGE}), with PetImages/Cat/<n>.jpg "
        "and PetImages/Dog/<n>.jpg; `fast-tfds sample DIR` writes a look-alike."
    )
    not_images = [s["file"] for s in report.skipped if s["reason"] == _NOT_AN_IMAGE]
    checks.require_mostly_usable(
        dataset,
        source=source,
        items="files",
        total=len(members) + len(not_images),
        unusable={_NOT_AN_IMAGE: not_images},
        hint=hint,
    )
    per_class = collections.Counter(label for _, _, label in members)
    for label in ("Cat", "Dog"):
        if not per_class[label.lower()]:
            raise checks.SourceStructureError(
                f"{dataset}: {source} has no PetImages/{label}/<n>.jpg image, so the build "
                f"would have one class only. Nothing was built. {hint}"
            )


def example_features(name: str, image, label: str) -> KeyExample:
    """(key, features) of a kept image besides the image and its filename: its label.

    Pure and module-level: a Beam build runs it on its workers
    (see `fast_tfds.building.examples.image_example`).
    """
    return name, {"label": label}
