"""stanford_dogs_tfrecord: Stanford Dogs as clean, sharded TFRecords with boxes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import tensorflow_datasets as tfds

from fast_tfds.building import FastImageBuilder, image_configs
from fast_tfds.building.archives import TarMemberReader, tar_members
from fast_tfds.building.examples import KeyExample, SkipReport
from stanford_dogs_tfrecord import breeds, checks
from stanford_dogs_tfrecord.source_parsing import (
    SPLITS,
    Annotation,
    image_key,
    read_annotations,
    read_lists,
)

_BASE_URL = "http://vision.stanford.edu/aditya86/ImageNetDogs/"
_IMAGES_URL = _BASE_URL + "images.tar"
_ANNOTATION_URL = _BASE_URL + "annotation.tar"
_LISTS_URL = _BASE_URL + "lists.tar"
_HOMEPAGE = _BASE_URL + "main.html"

# Where the skips of images.tar members that are in neither list are recorded.
UNLISTED = "unlisted"


class Builder(FastImageBuilder):
    """Stanford Dogs: every image that decodes, with its boxes, in >= 16 shards."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {
        "1.0.0": (
            "First release: keeps every file that decodes completely (the PNG "
            "named .jpg, CMYK and greyscale JPEGs) as RGB baseline JPEG; boxes "
            "normalized by the annotation's own size and clipped to [0, 1]; "
            "the 120 TFDS label names whatever the lists hold; images.tar read "
            "once for both splits; configs 224 and original; >= 16 shards per "
            "split; skipped files listed in metadata."
        ),
    }
    BUILDER_CONFIGS = image_configs(
        resize_note=(
            " Boxes are stored normalized to [0, 1] by the annotation's width and "
            "height, so this resize, which stretches both axes to 224, leaves the "
            "box coordinates unchanged: they are the same in both configs."
        )
    )

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "image": self.image_feature(),
                    # e.g. 'Images/n02085620-Chihuahua/n02085620_10074.jpg'
                    "image/filename": tfds.features.Text(),
                    # The 120 class names, lowercased breed folders in sorted order: the
                    # same names, in the same order, as TFDS's own stanford_dogs. Shipped,
                    # never derived from the lists at build time (TFDS derives them from
                    # train_list.mat).
                    "label": tfds.features.ClassLabel(names_file=str(breeds.LABEL_NAMES_FILE)),
                    # One box per dog, in the annotation's order; most images have one.
                    "objects": tfds.features.Sequence({"bbox": tfds.features.BBoxFeature()}),
                }
            ),
            supervised_keys=("image", "label"),
            homepage=_HOMEPAGE,
            metadata=tfds.core.MetadataDict(),
        )

    # images.tar (790 MB) holds both splits, mixed in breed folders. TFDS's own
    # builder reads it whole once per split. Here `_split_generators` reads only
    # the small lists and annotations and the tar's headers (where each image
    # is); each split's generator then reads its own images by offset, so every
    # byte of images.tar is read once, memory stays bounded, and a build with
    # --max_examples_per_split 5 reads and normalizes 5 images per split.

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        images_tar = self.source_path(dl_manager, _IMAGES_URL)
        annotation_tar = self.source_path(dl_manager, _ANNOTATION_URL)
        lists_tar = self.source_path(dl_manager, _LISTS_URL)

        listed = read_lists(dl_manager.iter_archive(lists_tar))
        annotations = read_annotations(dl_manager.iter_archive(annotation_tar))
        reports = {split: SkipReport(self.name, split) for split in SPLITS}
        members = {split: [] for split in SPLITS}
        in_tar = list(tar_members(images_tar))
        checks.check_sources(self, listed, in_tar, annotations)  # Before anything is written.
        listing = self._listed_images(in_tar, listed, annotations, reports)
        for member, location, info in listing:
            members[info.split].append((member, location, info))
        reader = TarMemberReader(images_tar)
        return {
            split: self._generate_examples(members[split], reader, reports[split])
            for split in SPLITS
        }

    def _generate_examples(self, members, reader, report: SkipReport):
        return self.generate_examples(example_features, members, reader, report)

    def _listed_images(
        self,
        archive: Iterable[tuple[str, Any]],
        listed: dict[str, tuple[str, str]],
        annotations: dict[str, Annotation | str],
        reports: dict[str, SkipReport],
    ) -> Iterator[tuple[str, Any, ImageInfo]]:
        """(member, location, info) of each image of images.tar to normalize.

        Whatever is left out is recorded in `reports`: members in neither list
        (split 'unlisted', recorded here), listed images without a usable
        annotation, and, at the end, listed images not in the tar.
        """
        unlisted = SkipReport(self.name, UNLISTED)
        label_names = set(self.info.features["label"].names)
        seen: set[str] = set()
        for member, location in archive:
            member = member.replace("\\", "/")
            key = image_key(member)
            if key is None:
                unlisted.skip(member, "not an image member Images/<breed>/<name>.jpg")
                continue
            if key not in listed:
                unlisted.skip(member, "in neither train_list.mat nor test_list.mat")
                continue
            seen.add(key)
            split, annotation_name = listed[key]
            label = key.split("/")[0].lower()
            annotation = annotations.get(annotation_name)
            if label not in label_names:
                reports[split].skip(member, "breed folder is not one of the 120 classes")
            elif annotation is None:
                reports[split].skip(member, "no annotation in annotation.tar")
            elif isinstance(annotation, str):
                reports[split].skip(member, annotation)
            else:
                yield member, location, ImageInfo(key, split, label, annotation)
        for key, (split, _) in sorted(listed.items()):
            if key not in seen:
                reports[split].skip(
                    f"Images/{key}", f"listed in {split}_list.mat, not in images.tar"
                )
        if unlisted.skipped:
            self.record_skips(unlisted)


class ImageInfo(NamedTuple):
    """What the lists and annotations say about one image of images.tar."""

    key: str  # 'n02085620-Chihuahua/n02085620_10074.jpg', as in the lists
    split: str
    label: str
    annotation: Annotation


def example_features(name: str, image, info: ImageInfo) -> KeyExample:
    """(key, features) of a kept image besides the image and its filename: its label and
    its boxes, normalized by the annotation's size (or the image's own).

    Pure and module-level: a Beam build runs it on its workers
    (see `fast_tfds.building.examples.image_example`).
    """
    return info.key, {
        "label": info.label,
        "objects": [{"bbox": box} for box in info.annotation.bboxes(image)],
    }
