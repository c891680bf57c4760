"""Stanford Dogs look-alike archives (images.tar, annotation.tar, lists.tar).

Same member paths and formats as the originals: breed folders in their original
case, Pascal VOC style XML annotations without an extension, MATLAB lists with
cell arrays and 1-based uint8 labels, and photo content from
`fast_tfds.samples.photos.random_photo`. With `quirks`, one file of each kind of
trouble the builder must handle; `QUIRKS` says what each is and what becomes of it.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np

from fast_tfds.samples.photos import encoded, jpeg_bytes, random_photo
from stanford_dogs_tfrecord.breeds import folder_names

ARCHIVES = ("images.tar", "annotation.tar", "lists.tar")
# The first class, the one whose real archive holds a PNG named .jpg, and the last.
DEFAULT_BREEDS = (
    "n02085620-Chihuahua",
    "n02105855-Shetland_sheepdog",
    "n02116738-African_hunting_dog",
)
# The real images.tar's PNG named .jpg.
REAL_PNG_KEY = "n02105855-Shetland_sheepdog/n02105855_2933.jpg"
_MTIME = 1318204800  # Fixed (2011-10-10): the same arguments write the same bytes.

# quirk -> what the builder does with it. The three box quirks change three of
# the ordinary images; the others are extra files.
QUIRKS = {
    "png_named_jpg": "kept",
    "cmyk_jpeg": "kept",
    "grey_jpeg": "kept",
    "two_boxes": "kept",
    "box_exceeds_image": "kept, box clipped to [0, 1]",
    "zero_size_annotation": "kept, box normalized by the image's own size",
    "truncated_jpeg": "skipped: truncated image",
    "missing_annotation": "skipped: no annotation",
    "not_in_images_tar": "skipped: listed but absent from images.tar",
    "unlisted": "skipped: in neither list",
}


def write_stanford_dogs_archives(
    folder: str | Path,
    images_per_breed: int = 3,
    breeds: Sequence[str | int] = DEFAULT_BREEDS,
    *,
    seed: int = 0,
    image_size: tuple[int, int] | None = None,
    quirks: bool = True,
    train_fraction: float = 0.6,
) -> dict[str, Any]:
    """Writes images.tar, annotation.tar and lists.tar into `folder`; returns what they hold.

    Args:
      folder: where to write the three archives (created if needed).
      images_per_breed: ordinary images per breed, split train/test by
        `train_fraction` (at least one of each when there are two or more).
      breeds: folder names ('n02085620-Chihuahua', any case) or indices into
        the 120 classes.
      seed: seed of all random choices; the same arguments write the same bytes.
      image_size: (width, height) of every image, or None for random sizes of
        a few hundred pixels, like the real photos.
      quirks: also write one file of each `QUIRKS` kind (needs >= 3 ordinary
        images in all).
      train_fraction: share of each breed's ordinary images listed in train.

    Returns:
      {'breeds': [folder names], 'images': {key: info}, 'expected_examples':
      {'train': n, 'test': n}, 'expected_skips': {'train' | 'test' |
      'unlisted': [member paths]}}. A key is the path under Images/ (the
      builder's example key); info holds 'member', 'split' (None if unlisted),
      'label', 'quirk' (None or a QUIRKS key), 'kept', 'image_size' (width,
      height) and 'annotation' ({'width', 'height', 'boxes': [(xmin, ymin,
      xmax, ymax)]} as written in the XML, or None).
    """
    rng = np.random.default_rng(seed)
    all_folders = folder_names()
    folders = [_resolve_breed(b, all_folders) for b in breeds]
    if len(set(folders)) != len(folders):
        raise ValueError(f"breeds={list(breeds)!r}: a breed is given twice")
    used_ids = {int(REAL_PNG_KEY.split("_")[-1].removesuffix(".jpg"))}  # Kept for the PNG.
    images: dict[str, dict[str, Any]] = {}
    contents: dict[str, bytes] = {}  # key -> bytes in images.tar

    def new_image(breed: str, split: str | None, quirk: str | None = None, key=None):
        if key is None:
            key = f"{breed}/{breed.split('-')[0]}_{_new_id(rng, used_ids)}.jpg"
        breed = key.split("/")[0]
        photo = random_photo(rng, image_size)
        width, height = photo.size
        info = {
            "member": f"Images/{key}",
            "split": split,
            "label": breed.lower(),
            "quirk": quirk,
            "kept": split is not None,
            "image_size": (width, height),
            "annotation": {"width": width, "height": height, "boxes": [_random_box(rng, photo)]},
        }
        images[key] = info
        return key, photo, info

    for breed in folders:
        n_train = _train_count(images_per_breed, train_fraction)
        for i in range(images_per_breed):
            key, photo, _ = new_image(breed, "train" if i < n_train else "test")
            contents[key] = jpeg_bytes(photo, quality=int(rng.integers(75, 96)))

    if quirks:
        _add_quirks(folders, images, contents, new_image, rng)

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _write_tar(folder / "images.tar", "Images", folders, dict(sorted(contents.items())))
    _write_tar(
        folder / "annotation.tar",
        "Annotation",
        folders,
        {
            key.removesuffix(".jpg"): _annotation_xml(key, info["annotation"])
            for key, info in sorted(images.items())
            if info["annotation"] is not None
        },
    )
    labels = {breed.lower(): all_folders.index(breed) + 1 for breed in folders}
    listed = {
        split: sorted(k for k, info in images.items() if info["split"] == split)
        for split in ("train", "test")
    }
    _write_tar(
        folder / "lists.tar",
        None,
        [],
        {
            "file_list.mat": _list_mat(sorted(listed["train"] + listed["test"]), images, labels),
            "train_list.mat": _list_mat(listed["train"], images, labels),
            "test_list.mat": _list_mat(listed["test"], images, labels),
        },
    )

    expected_skips: dict[str, list[str]] = {"train": [], "test": [], "unlisted": []}
    for _, info in sorted(images.items()):
        if not info["kept"]:
            expected_skips[info["split"] or "unlisted"].append(info["member"])
    return {
        "breeds": folders,
        "images": images,
        "expected_examples": {
            split: sum(info["kept"] and info["split"] == split for info in images.values())
            for split in ("train", "test")
        },
        "expected_skips": expected_skips,
    }


def _add_quirks(folders, images, contents, new_image, rng) -> None:
    ordinary = sorted(images)
    if len(ordinary) < 3:
        raise ValueError("quirks=True needs at least 3 ordinary images in all")
    # Box quirks, on three different ordinary images.
    info = images[ordinary[0]]
    info["quirk"] = "two_boxes"
    width, height = info["image_size"]
    info["annotation"]["boxes"].append(
        (width // 2, height // 3, width, height)  # A second dog, lower right.
    )
    info = images[ordinary[-1]]
    info["quirk"] = "box_exceeds_image"
    xmin, ymin, _, _ = info["annotation"]["boxes"][0]
    width, height = info["image_size"]
    info["annotation"]["boxes"][0] = (xmin, ymin, width + 7, height + 3)
    info = images[ordinary[len(ordinary) // 2]]
    info["quirk"] = "zero_size_annotation"
    info["annotation"]["width"] = info["annotation"]["height"] = 0

    def breed(i: int) -> str:
        return folders[i % len(folders)]

    # Named as the real one when its breed is in the sample.
    png_key = REAL_PNG_KEY if REAL_PNG_KEY.split("/")[0] in folders else None
    key, photo, _ = new_image(breed(0), "train", "png_named_jpg", key=png_key)
    contents[key] = encoded(photo, "PNG")
    key, photo, _ = new_image(breed(1), "test", "cmyk_jpeg")
    contents[key] = jpeg_bytes(photo.convert("CMYK"))
    key, photo, _ = new_image(breed(2), "train", "grey_jpeg")
    contents[key] = jpeg_bytes(photo.convert("L"))

    key, photo, info = new_image(breed(0), "train", "truncated_jpeg")
    good = jpeg_bytes(photo)
    contents[key] = good[: len(good) // 2]
    info["kept"] = False
    key, photo, info = new_image(breed(1), "test", "missing_annotation")
    contents[key] = jpeg_bytes(photo)
    info["kept"] = False
    info["annotation"] = None
    _, _, info = new_image(breed(2), "test", "not_in_images_tar")
    info["kept"] = False
    key, photo, info = new_image(breed(0), None, "unlisted")
    contents[key] = jpeg_bytes(photo)


def _resolve_breed(breed: str | int, all_folders: list[str]) -> str:
    if isinstance(breed, (int, np.integer)) and not isinstance(breed, bool):
        if not 0 <= breed < len(all_folders):
            raise ValueError(f"breed index {breed} is not in [0, {len(all_folders)})")
        return all_folders[breed]
    by_lower = {f.lower(): f for f in all_folders}
    if str(breed).lower() not in by_lower:
        raise ValueError(f"breed {breed!r} is not one of the 120 breed folders")
    return by_lower[str(breed).lower()]


def _train_count(n: int, train_fraction: float) -> int:
    n_train = int(round(n * train_fraction))
    return min(max(n_train, 1), n - 1) if n >= 2 else n


def _new_id(rng: np.random.Generator, used: set[int]) -> int:
    while True:
        image_id = int(rng.integers(100, 20000))
        if image_id not in used:
            used.add(image_id)
            return image_id


def _random_box(rng: np.random.Generator, photo) -> tuple[int, int, int, int]:
    """(xmin, ymin, xmax, ymax) in pixels: a dog covering a good part of the photo."""
    width, height = photo.size
    xmin = int(rng.integers(0, max(width // 3, 1)))
    ymin = int(rng.integers(0, max(height // 3, 1)))
    xmax = int(rng.integers(max(2 * width // 3, xmin + 1), width + 1))
    ymax = int(rng.integers(max(2 * height // 3, ymin + 1), height + 1))
    return xmin, ymin, xmax, ymax


def _annotation_xml(key: str, annotation: dict[str, Any]) -> bytes:
    breed, filename = key.split("/")
    synset, name = breed.split("-", 1)
    lines = [
        "<annotation>",
        f"\t<folder>{synset.removeprefix('n')}</folder>",
        f"\t<filename>{filename.removesuffix('.jpg')}</filename>",
        "\t<source>",
        "\t\t<database>ImageNet database</database>",
        "\t</source>",
        "\t<size>",
        f"\t\t<width>{annotation['width']}</width>",
        f"\t\t<height>{annotation['height']}</height>",
        "\t\t<depth>3</depth>",
        "\t</size>",
        "\t<segment>0</segment>",
    ]
    for xmin, ymin, xmax, ymax in annotation["boxes"]:
        lines += [
            "\t<object>",
            f"\t\t<name>{escape(name)}</name>",
            "\t\t<pose>Unspecified</pose>",
            "\t\t<truncated>0</truncated>",
            "\t\t<difficult>0</difficult>",
            "\t\t<bndbox>",
            f"\t\t\t<xmin>{xmin}</xmin>",
            f"\t\t\t<ymin>{ymin}</ymin>",
            f"\t\t\t<xmax>{xmax}</xmax>",
            f"\t\t\t<ymax>{ymax}</ymax>",
            "\t\t</bndbox>",
            "\t</object>",
        ]
    lines.append("</annotation>")
    return ("\n".join(lines) + "\n").encode("utf-8")


def _list_mat(keys: list[str], images, labels: dict[str, int]) -> bytes:
    """A *_list.mat: N x 1 cell arrays file_list and annotation_list, uint8 labels."""
    from scipy import io as scipy_io

    columns = {
        "file_list": np.array(keys, dtype=object),
        "annotation_list": np.array([k.removesuffix(".jpg") for k in keys], dtype=object),
        "labels": np.array([labels[images[k]["label"]] for k in keys], dtype=np.uint8),
    }
    out = io.BytesIO()
    scipy_io.savemat(out, {name: column.reshape(len(keys), 1) for name, column in columns.items()})
    # The 116-byte text header holds the time of writing; fix it.
    header = b"MATLAB 5.0 MAT-file, Platform: posix, Created by: fast_tfds.samples.stanford_dogs"
    return header.ljust(116) + out.getvalue()[116:]


def _write_tar(path: Path, root: str | None, folders: list[str], files: dict[str, bytes]) -> None:
    def info(name: str, size: int = 0, directory: bool = False) -> tarfile.TarInfo:
        member = tarfile.TarInfo(name)
        member.mtime = _MTIME
        if directory:
            member.type, member.mode = tarfile.DIRTYPE, 0o755
        else:
            member.size, member.mode = size, 0o644
        return member

    prefix = f"{root}/" if root else ""
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        if root:
            tar.addfile(info(root, directory=True))
        for folder in folders:
            tar.addfile(info(prefix + folder, directory=True))
            for name, data in files.items():
                if name.startswith(folder + "/"):
                    tar.addfile(info(prefix + name, len(data)), io.BytesIO(data))
        for name, data in files.items():
            if "/" not in name:
                tar.addfile(info(prefix + name, len(data)), io.BytesIO(data))
        end = tar.offset
    # tarfile pads the archive to 10 KiB records; the two zero blocks that end
    # it are all that readers need, and the committed dummy data stays small.
    with path.open("r+b") as f:
        f.truncate(end + 2 * tarfile.BLOCKSIZE)
