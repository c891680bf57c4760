"""stanford_dogs_tfrecord: Stanford Dogs as clean, sharded TFRecords with boxes."""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import io
import pickle
import posixpath
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import tensorflow_datasets as tfds
from etils import epath

from fast_tfds import builder as fast_builder
from fast_tfds import parallel

_BASE_URL = "http://vision.stanford.edu/aditya86/ImageNetDogs/"
_IMAGES_URL = _BASE_URL + "images.tar"
_ANNOTATION_URL = _BASE_URL + "annotation.tar"
_LISTS_URL = _BASE_URL + "lists.tar"
_HOMEPAGE = _BASE_URL + "main.html"

# The 120 class names, lowercased breed folders in sorted order: the same names,
# in the same order, as TFDS's own stanford_dogs. Shipped, never derived from
# the lists at build time (TFDS derives them from train_list.mat).
_LABELS_FILE = importlib.resources.files(__package__) / "label_names.txt"

SPLITS = ("train", "test")
_LIST_FILES = {"train_list.mat": "train", "test_list.mat": "test"}
# 'Images/n02085620-Chihuahua/n02085620_10074.jpg' -> breed folder, file name.
_IMAGE_NAME = re.compile(r"^Images/([^/]+)/([^/]+\.jpg)$")
_ANNOTATION_PREFIX = "Annotation/"
# Where the skips of images.tar members that are in neither list are recorded.
UNLISTED = "unlisted"


class Builder(fast_builder.FastImageBuilder):
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
    BUILDER_CONFIGS = fast_builder.image_configs(
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
                    "label": tfds.features.ClassLabel(names_file=str(_LABELS_FILE)),
                    # One box per dog, in the annotation's order; most images have one.
                    "objects": tfds.features.Sequence({"bbox": tfds.features.BBoxFeature()}),
                }
            ),
            supervised_keys=("image", "label"),
            homepage=_HOMEPAGE,
            metadata=tfds.core.MetadataDict(),
        )

    # -- splits ----------------------------------------------------------------

    # images.tar (790 MB) holds both splits, mixed in breed folders. TFDS's own
    # builder reads it once per split. Here `_split_generators` reads it once:
    # it normalizes every listed image (in parallel, with `make_example`) and
    # appends each finished example to its split's spool file, then each split
    # generator reads its spool back. This does not depend on the order in
    # which TFDS consumes the split generators, and memory stays bounded (the
    # spools are on disk). They go in a folder inside the dataset's (incomplete)
    # build folder rather than in /tmp, which is often a small tmpfs: the
    # output needs that much disk anyway, and `_generate_splits` removes the
    # folder before TFDS renames the build folder, whether the build succeeds
    # or fails.
    #
    # On Beam, the driver reads only the lists, the annotations and the headers
    # of images.tar; workers read each image by its offset in the tar and run
    # the same `make_example` (see fast_tfds.beam_support).

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        images_tar = self.source_path(dl_manager, _IMAGES_URL)
        annotation_tar = self.source_path(dl_manager, _ANNOTATION_URL)
        lists_tar = self.source_path(dl_manager, _LISTS_URL)

        listed = read_lists(dl_manager.iter_archive(lists_tar))
        annotations = read_annotations(dl_manager.iter_archive(annotation_tar))
        if self.on_beam:
            return self._beam_splits(images_tar, listed, annotations)
        self._spool_dir = self.data_path / "_spool"
        self._spool_dir.mkdir(parents=True, exist_ok=True)
        reports = self._spool_images(dl_manager.iter_archive(images_tar), listed, annotations)
        return {split: self._generate_examples(split, reports[split]) for split in SPLITS}

    def _generate_splits(self, dl_manager, download_config):
        self._spool_dir = None
        try:
            return super()._generate_splits(dl_manager, download_config)
        finally:
            if self._spool_dir is not None and self._spool_dir.exists():
                self._spool_dir.rmtree()

    def _spool_path(self, split: str) -> epath.Path:
        return self._spool_dir / f"{split}.pickle"

    def _listed_images(
        self,
        archive: Iterable[tuple[str, Any]],
        listed: dict[str, tuple[str, str]],
        annotations: dict[str, Annotation | str],
        reports: dict[str, fast_builder.SkipReport],
    ) -> Iterator[tuple[str, Any, ImageInfo]]:
        """(member, payload, info) of each image of images.tar to normalize.

        `archive` yields (member name, payload): a file object locally, an
        offset on Beam. Whatever is left out is recorded in `reports`: members
        in neither list (split 'unlisted', recorded here), listed images without
        a usable annotation, and, at the end, listed images not in the tar.
        """
        unlisted = fast_builder.SkipReport(self.name, UNLISTED)
        label_names = set(self.info.features["label"].names)
        seen: set[str] = set()
        for member, payload in archive:
            member = member.replace("\\", "/")
            match = _IMAGE_NAME.match(member)
            if not match:
                unlisted.skip(member, "not an image member Images/<breed>/<name>.jpg")
                continue
            key = f"{match.group(1)}/{match.group(2)}"  # As in the lists.
            if key not in listed:
                unlisted.skip(member, "in neither train_list.mat nor test_list.mat")
                continue
            seen.add(key)
            split, annotation_name = listed[key]
            label = match.group(1).lower()
            annotation = annotations.get(annotation_name)
            if label not in label_names:
                reports[split].skip(member, "breed folder is not one of the 120 classes")
            elif annotation is None:
                reports[split].skip(member, "no annotation in annotation.tar")
            elif isinstance(annotation, str):
                reports[split].skip(member, annotation)
            else:
                yield member, payload, ImageInfo(key, split, label, annotation)
        for key, (split, _) in sorted(listed.items()):
            if key not in seen:
                reports[split].skip(
                    f"Images/{key}", f"listed in {split}_list.mat, not in images.tar"
                )
        if unlisted.skipped:
            self.record_skips(unlisted)

    def _spool_images(
        self,
        archive: Iterable[tuple[str, BinaryIO]],
        listed: dict[str, tuple[str, str]],
        annotations: dict[str, Annotation | str],
    ) -> dict[str, fast_builder.SkipReport]:
        """The single pass over images.tar; returns each split's SkipReport."""
        reports = {split: fast_builder.SkipReport(self.name, split) for split in SPLITS}
        make = functools.partial(make_example, size=self.stored_size)

        def work(member):  # The pure per-example function, and the example's split.
            return member[2].split, make(member)

        members = (
            (member, fobj.read(), info)
            for member, fobj, info in self._listed_images(archive, listed, annotations, reports)
        )
        with (
            self._spool_path("train").open("wb") as train_spool,
            self._spool_path("test").open("wb") as test_spool,
        ):
            spools = {"train": train_spool, "test": test_spool}
            results = tfds.core.utils.tqdm(
                parallel.ordered_thread_map(work, members),
                desc="Normalizing images.tar (both splits)...",
                total=len(listed),
                unit=" images",
                leave=False,
            )
            for split, result in results:
                if isinstance(result, fast_builder.Skipped):
                    reports[split].skip(result.file, result.reason)
                    continue
                pickle.dump(result, spools[split], protocol=pickle.HIGHEST_PROTOCOL)
                reports[split].kept += 1
        return reports

    def _beam_splits(self, images_tar, listed, annotations):
        from fast_tfds.beam_support import TarMemberReader, tar_members

        reports = {split: fast_builder.SkipReport(self.name, split) for split in SPLITS}
        members = {split: [] for split in SPLITS}
        listing = self._listed_images(tar_members(images_tar), listed, annotations, reports)
        for member, location, info in listing:
            members[info.split].append((member, location, info))
        make = functools.partial(make_example, size=self.stored_size)
        reader = TarMemberReader(images_tar)
        return {
            split: self.examples_on_beam(make, members[split], reader, reports[split])
            for split in SPLITS
        }

    def _generate_examples(self, split: str, report: fast_builder.SkipReport):
        path = self._spool_path(split)
        try:
            with path.open("rb") as spool:
                while True:
                    try:
                        key, example = pickle.load(spool)
                    except EOFError:
                        break
                    yield key, example
            self.record_skips(report)
        finally:
            path.unlink(missing_ok=True)  # Free the disk as soon as the split is written.


# -- the per-example work ------------------------------------------------------


class ImageInfo(NamedTuple):
    """What the lists and annotations say about one image of images.tar."""

    key: str  # 'n02085620-Chihuahua/n02085620_10074.jpg', as in the lists
    split: str
    label: str
    annotation: Annotation


def make_example(
    member: tuple[str, bytes, ImageInfo], size: tuple[int, int] | None
) -> fast_builder.KeyExample | fast_builder.Skipped:
    """(member name, bytes, info) -> (key, example), or why the image is left out.

    The whole per-example work of a build, pure: the local build runs it in
    threads, a Beam build on its workers.
    """
    name, data, info = member
    image = fast_builder.normalize_or_skip(name, data, size)
    if isinstance(image, fast_builder.Skipped):
        return image
    return info.key, {
        "image": image.jpeg,
        "image/filename": name,
        "label": info.label,
        "objects": [{"bbox": box} for box in info.annotation.bboxes(image)],
    }


# -- lists ---------------------------------------------------------------------


def read_lists(archive: Iterable[tuple[str, BinaryIO]]) -> dict[str, tuple[str, str]]:
    """{'n02085620-Chihuahua/n02085620_5927.jpg': (split, annotation name)} from lists.tar."""
    listed: dict[str, tuple[str, str]] = {}
    found = set()
    for member, fobj in archive:
        split = _LIST_FILES.get(posixpath.basename(member.replace("\\", "/")))
        if split is None:  # file_list.mat is the union of the two.
            continue
        found.add(split)
        files, annotation_names = parse_list_mat(fobj.read())
        for file, annotation_name in zip(files, annotation_names, strict=True):
            listed[file] = (split, annotation_name)
    missing = set(SPLITS) - found
    if missing:
        raise ValueError(f"lists.tar has no {', '.join(sorted(missing))} list (*_list.mat)")
    return listed


def parse_list_mat(data: bytes) -> tuple[list[str], list[str]]:
    """(file_list, annotation_list) of a *_list.mat file, as lists of str."""
    from scipy import io as scipy_io

    mat = scipy_io.loadmat(io.BytesIO(data), squeeze_me=True)

    def strings(name: str) -> list[str]:
        # squeeze_me turns a one-entry cell array into a 0-d array (or a str).
        return [str(v).replace("\\", "/") for v in np.atleast_1d(np.asarray(mat[name], object))]

    files = strings("file_list")
    if "annotation_list" in mat:
        annotation_names = strings("annotation_list")
    else:
        annotation_names = [f.removesuffix(".jpg") for f in files]
    return files, annotation_names


# -- annotations ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Annotation:
    """One image's annotation: its declared size and its boxes in pixels."""

    width: float
    height: float
    boxes: tuple[tuple[float, float, float, float], ...]  # (xmin, ymin, xmax, ymax)

    def bboxes(self, image) -> list[tfds.features.BBox]:
        """The boxes normalized by the annotation's size and clipped to [0, 1]."""
        width, height = self.width, self.height
        # A few annotations could declare no size (0 or missing); then the boxes
        # are taken to be in the pixels of the image itself, as decoded.
        if width <= 0 or height <= 0:
            width, height = image.source_width, image.source_height
        bboxes = []
        for xmin, ymin, xmax, ymax in self.boxes:
            xmin, xmax = sorted((_clip(xmin / width), _clip(xmax / width)))
            ymin, ymax = sorted((_clip(ymin / height), _clip(ymax / height)))
            bboxes.append(tfds.features.BBox(ymin=ymin, xmin=xmin, ymax=ymax, xmax=xmax))
        return bboxes


def _clip(value: float) -> float:
    return min(max(value, 0.0), 1.0)


def read_annotations(archive: Iterable[tuple[str, BinaryIO]]) -> dict[str, Annotation | str]:
    """{'n02085620-Chihuahua/n02085620_10074': Annotation or why it is unusable}."""
    annotations: dict[str, Annotation | str] = {}
    for member, fobj in archive:
        member = member.replace("\\", "/")
        if not member.startswith(_ANNOTATION_PREFIX):
            continue
        name = member.removeprefix(_ANNOTATION_PREFIX)
        try:
            annotations[name] = parse_annotation(fobj.read())
        except (ET.ParseError, ValueError) as err:
            annotations[name] = f"unusable annotation: {err}"
    return annotations


def parse_annotation(data: bytes) -> Annotation:
    """Parses one annotation XML (Pascal VOC style) of annotation.tar."""
    root = ET.fromstring(data)
    size = root.find("size")
    width = _number(size, "width", default=0.0)
    height = _number(size, "height", default=0.0)
    boxes = []
    for obj in root.iter("object"):
        box = obj.find("bndbox")
        if box is None:
            raise ValueError("an <object> has no <bndbox>")
        boxes.append(tuple(_number(box, tag) for tag in ("xmin", "ymin", "xmax", "ymax")))
    return Annotation(width=width, height=height, boxes=tuple(boxes))


def _number(parent: ET.Element | None, tag: str, default: float | None = None) -> float:
    text = None if parent is None else parent.findtext(tag)
    if text is None or not text.strip():
        if default is None:
            raise ValueError(f"<{tag}> is missing")
        return default
    return float(text.strip())
