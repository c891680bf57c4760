"""Stanford Dogs' lists (MATLAB .mat in lists.tar) and annotations (XML in annotation.tar)."""

from __future__ import annotations

import dataclasses
import io
import posixpath
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import BinaryIO

import numpy as np
import tensorflow_datasets as tfds

from fast_tfds.building.checks import SourceStructureError

SPLITS = ("train", "test")
_LIST_FILES = {"train_list.mat": "train", "test_list.mat": "test"}
_ANNOTATION_PREFIX = "Annotation/"
# 'Images/n02085620-Chihuahua/n02085620_10074.jpg' -> 'n02085620-Chihuahua/n02085620_10074.jpg'.
_IMAGE_NAME = re.compile(r"^Images/([^/]+/[^/]+\.jpg)$")


# -- images.tar ----------------------------------------------------------------


def image_key(member: str) -> str | None:
    """An images.tar member's key as the lists name it ('<breed folder>/<file>.jpg'), or
    None if it is not an image member Images/<breed>/<name>.jpg."""
    match = _IMAGE_NAME.match(member.replace("\\", "/"))
    return match.group(1) if match else None


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
        raise SourceStructureError(
            f"stanford_dogs_tfrecord: lists.tar has no {' and '.join(sorted(missing))} list "
            "(train_list.mat, test_list.mat): is it Stanford Dogs' lists.tar? Nothing was built."
        )
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
