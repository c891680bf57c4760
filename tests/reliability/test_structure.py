"""Sources that are not the dataset's own fail the build before anything is written; damaged
files inside a right source stay skips. Real archives, real builds."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds
from scipy import io as scipy_io

import cats_vs_dogs_fast  # noqa: F401  (registers the dataset)
import stanford_dogs_tfrecord
from fast_tfds.building import checks
from fast_tfds.building.checks import SourceStructureError
from fast_tfds.samples import cats_vs_dogs as cats_archive
from fast_tfds.samples import photos
from fast_tfds.samples import stanford_dogs as dogs_sample
from stanford_dogs_tfrecord.source_parsing import parse_list_mat
from tests import forks
from tests.helpers import TFDS_CLI

ENV = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
CATS_ZIP = cats_archive.CATS_ZIP_NAME


def build(name: str, manual_dir: Path, data_dir: Path, **kwargs):
    builder = tfds.builder(name, config="224", data_dir=data_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir), **kwargs)
    )
    return builder


def assert_nothing_built(data_dir: Path, name: str) -> None:
    config_dir = data_dir / name / "224"
    left = sorted(p.name for p in config_dir.iterdir()) if config_dir.exists() else []
    assert left == [], left  # neither 1.0.0 nor an incomplete.* folder


def photo_bytes(seed: int) -> bytes:
    return photos.jpeg_bytes(photos.random_photo(np.random.default_rng(seed), (40, 32)))


# -- Cats vs Dogs -----------------------------------------------------------------------


def test_a_cats_zip_of_another_layout_is_refused(tmp_path):
    # Kaggle's competition zip: train/cat.0.jpg, ... (no PetImages/Cat, PetImages/Dog).
    with zipfile.ZipFile(tmp_path / CATS_ZIP, "w") as archive:
        for i in range(30):
            archive.writestr(f"train/{('cat', 'dog')[i % 2]}.{i}.jpg", photo_bytes(i))
    with pytest.raises(SourceStructureError) as excinfo:
        build("cats_vs_dogs_fast", tmp_path, tmp_path / "data")
    message = str(excinfo.value)
    assert "\n" not in message
    assert message.startswith(
        f"cats_vs_dogs_fast: the source ({CATS_ZIP}) does not look like cats_vs_dogs_fast's: 30 of "
        "the 30 files cannot be used: 30 x not an image member of PetImages/Cat or "
        "PetImages/Dog (e.g. train/cat.0.jpg). Nothing was built"
    ), message
    assert "PetImages/Cat/<n>.jpg" in message and "fast-tfds sample DIR" in message
    assert_nothing_built(tmp_path / "data", "cats_vs_dogs_fast")


def test_a_cats_zip_with_one_class_only_is_refused(tmp_path):
    with zipfile.ZipFile(tmp_path / CATS_ZIP, "w") as archive:
        for i in range(20):
            archive.writestr(f"PetImages/Cat/{i}.jpg", photo_bytes(i))
    with pytest.raises(SourceStructureError, match=r"has no PetImages/Dog/<n>\.jpg image"):
        build("cats_vs_dogs_fast", tmp_path, tmp_path / "data")
    assert_nothing_built(tmp_path / "data", "cats_vs_dogs_fast")


def test_an_archive_of_another_kind_under_the_right_name_is_refused(tmp_path):
    dogs_sample.write_stanford_dogs_archives(tmp_path / "dogs", 2, quirks=False)
    shutil.copy(tmp_path / "dogs" / "images.tar", tmp_path / CATS_ZIP)
    with pytest.raises(SourceStructureError) as excinfo:
        build("cats_vs_dogs_fast", tmp_path, tmp_path / "data")
    assert str(excinfo.value) == (
        f"cats_vs_dogs_fast: {tmp_path / CATS_ZIP} is not a zip archive (it is a tar "
        f"archive): is it the right file? Put the dataset's own {CATS_ZIP} in its place."
    )
    assert_nothing_built(tmp_path / "data", "cats_vs_dogs_fast")


def test_damaged_images_in_a_right_zip_stay_skips_however_many(tmp_path):
    # 2 good images, 38 empty or cut: per-file damage, never a structure error.
    with zipfile.ZipFile(tmp_path / CATS_ZIP, "w") as archive:
        for i in range(20):
            for label in ("Cat", "Dog"):
                data = photo_bytes(i) if i == 0 else photo_bytes(i)[: 40 * (i % 2)]
                archive.writestr(f"PetImages/{label}/{i}.jpg", data)
    builder = build("cats_vs_dogs_fast", tmp_path, tmp_path / "data")
    assert builder.info.splits["train"].num_examples == 2
    assert builder.info.metadata["skipped"]["train"]["count"] == 38


# -- Stanford Dogs ----------------------------------------------------------------------


def rewrite_stanford_archives(folder: Path, rename) -> None:
    """Renames images (keys '<breed folder>/<file>.jpg') in all three archives alike."""

    def rewrite_tar(path: Path, new_name) -> None:
        with tarfile.open(path) as tar:
            members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar]
        with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
            for member, data in members:
                member.name = new_name(member.name)
                tar.addfile(member, io.BytesIO(data) if data is not None else None)

    def in_images(name: str) -> str:
        key = name.removeprefix("Images/")
        return f"Images/{rename(key)}" if key.endswith(".jpg") else name

    def in_annotations(name: str) -> str:
        key = name.removeprefix("Annotation/")
        return f"Annotation/{rename(key + '.jpg').removesuffix('.jpg')}" if "/" in key else name

    rewrite_tar(folder / "images.tar", in_images)
    rewrite_tar(folder / "annotation.tar", in_annotations)
    with tarfile.open(folder / "lists.tar") as tar:
        mats = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    with tarfile.open(folder / "lists.tar", "w") as tar:
        for name, data in mats.items():
            files, _ = parse_list_mat(data)
            keys = [rename(f) for f in files]
            cells = np.empty((len(keys), 1), dtype=object)
            notes = np.empty((len(keys), 1), dtype=object)
            for i, key in enumerate(keys):
                cells[i, 0], notes[i, 0] = key, key.removesuffix(".jpg")
            out = io.BytesIO()
            scipy_io.savemat(out, {"file_list": cells, "annotation_list": notes})
            member = tarfile.TarInfo(name)
            member.size = len(out.getvalue())
            tar.addfile(member, io.BytesIO(out.getvalue()))


def unknown_breed(key: str) -> str:
    breed, file = key.split("/")
    return f"n99999999-{breed.split('-', 1)[1]}_mix/{file}"


def test_stanford_images_mostly_in_unknown_breed_folders_fail_the_tfds_build(tmp_path):
    # The issue's case: every breed folder but a few images' is not one of the 120.
    written = dogs_sample.write_stanford_dogs_archives(
        tmp_path, 40, image_size=(40, 32), quirks=False
    )
    keep = sorted(written["images"])[:2]
    rewrite_stanford_archives(tmp_path, lambda key: key if key in keep else unknown_breed(key))

    command = [*TFDS_CLI, "build", "stanford_dogs_tfrecord", "--imports", "stanford_dogs_tfrecord"]
    command += ["--manual_dir", os.fspath(tmp_path), "--data_dir", os.fspath(tmp_path / "data")]
    command += ["--config", "224"]
    # A fork of a server that has imported TensorFlow (`tests.forks`): what is checked is
    # the build's refusal, not how an interpreter starts.
    done = forks.run(command, capture_output=True, text=True, env=ENV, timeout=300)

    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    # Refused before the first example is made.
    assert "Generating train examples" not in output, output[-3000:]
    errors = [line for line in output.splitlines() if "ERROR: " in line]
    assert len(errors) == 1, output[-3000:]
    assert (
        "ERROR: stanford_dogs_tfrecord: the source (images.tar, annotation.tar and lists.tar) "
        "does not look like stanford_dogs_tfrecord's: 118 of the 120 images listed in lists.tar "
        "cannot be used: 118 x breed folder is not one of the 120 classes (e.g. "
        "n99999999-"
    ) in errors[0], errors[0]
    assert_nothing_built(tmp_path / "data", "stanford_dogs_tfrecord")


def test_stanford_lists_of_other_images_fail_the_build(tmp_path):
    dogs_sample.write_stanford_dogs_archives(tmp_path, 10, image_size=(40, 32), quirks=False)
    other = tmp_path / "other"
    dogs_sample.write_stanford_dogs_archives(other, 10, seed=1, image_size=(40, 32), quirks=False)
    shutil.copy(other / "lists.tar", tmp_path / "lists.tar")  # Same breeds, other image ids.

    with pytest.raises(SourceStructureError) as excinfo:
        build(stanford_dogs_tfrecord.NAME, tmp_path, tmp_path / "data")
    assert "30 of the 30 images listed in lists.tar cannot be used: 30 x not in images.tar" in (
        str(excinfo.value)
    )
    assert_nothing_built(tmp_path / "data", stanford_dogs_tfrecord.NAME)


def test_stanford_archives_of_another_kind_or_without_lists_are_refused(tmp_path):
    dogs_sample.write_stanford_dogs_archives(tmp_path, 2, image_size=(40, 32), quirks=False)
    lists = tmp_path / "lists.tar"
    with tarfile.open(lists, "w") as tar:  # A lists.tar holding something else.
        member = tarfile.TarInfo("readme.txt")
        tar.addfile(member, io.BytesIO(b""))
    with pytest.raises(SourceStructureError, match=r"lists\.tar has no test and train list"):
        build(stanford_dogs_tfrecord.NAME, tmp_path, tmp_path / "data")

    cats_archive.write_cats_zip(tmp_path / "images.tar", 2, quirks=False, image_size=(40, 32))
    with pytest.raises(SourceStructureError, match=r"is not a tar archive \(it is a zip archive\)"):
        build(stanford_dogs_tfrecord.NAME, tmp_path, tmp_path / "data")
    assert_nothing_built(tmp_path / "data", stanford_dogs_tfrecord.NAME)


def test_a_few_structural_oddities_in_a_small_sample_still_build(tmp_path):
    # The rule's count: up to MAX_COUNT unusable listed images are skips, even 5 of 9.
    written = dogs_sample.write_stanford_dogs_archives(
        tmp_path, 3, image_size=(40, 32), quirks=False
    )
    odd = sorted(written["images"])[: checks.MAX_COUNT]
    rewrite_stanford_archives(tmp_path, lambda key: unknown_breed(key) if key in odd else key)

    builder = build(stanford_dogs_tfrecord.NAME, tmp_path, tmp_path / "data")
    kept = sum(s.num_examples for s in builder.info.splits.values())
    assert kept == len(written["images"]) - len(odd) == 4
    skipped = builder.info.metadata["skipped"]
    reasons = {**skipped["train"]["by_reason"]}
    for reason, n in skipped["test"]["by_reason"].items():
        reasons[reason] = reasons.get(reason, 0) + n
    assert reasons["breed folder is not one of the 120 classes"] == len(odd)
