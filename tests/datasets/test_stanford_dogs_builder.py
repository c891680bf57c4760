"""stanford_dogs_tfrecord's builder on its committed dummy data.

The dummy data is what `fast_tfds.samples.stanford_dogs.write_stanford_dogs_archives`
writes with DUMMY_DATA_ARGS; to regenerate it:

    python -c "from fast_tfds.samples.stanford_dogs import write_stanford_dogs_archives as w; \
w('stanford_dogs_tfrecord/dummy_data', images_per_breed=3, image_size=(48, 40))"
"""

from __future__ import annotations

import itertools
import math
import os
import tarfile
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

import stanford_dogs_tfrecord
from fast_tfds.building import MIN_SHARDS_PER_SPLIT, archives, parallel
from fast_tfds.samples import stanford_dogs as dogs_sample
from stanford_dogs_tfrecord import breeds
from stanford_dogs_tfrecord.stanford_dogs_tfrecord_dataset_builder import Builder
from tests.helpers import TFDS_CLI, not_collected, run_ok

DUMMY_DATA_ARGS = {"images_per_breed": 3, "image_size": (48, 40)}
DUMMY_DATA = Path(Builder.code_path.parent / "dummy_data")
TFDS_STANFORD_DOGS_FIRST_LABELS = ["n02085620-chihuahua", "n02085782-japanese_spaniel"]


class StanfordDogsTfrecordTest(tfds.testing.DatasetBuilderTestCase):
    test_session = not_collected(tfds.testing.DatasetBuilderTestCase.test_session)
    DATASET_CLASS = Builder
    # 3 breeds x (2 train + 1 test), plus the PNG and the greyscale JPEG in
    # train and the CMYK JPEG in test; the truncated JPEG, the image without an
    # annotation and the listed image missing from images.tar are skipped.
    SPLITS = {"train": 8, "test": 4}
    BUILDER_CONFIG_NAMES_TO_TEST = ["224", "original"]


@pytest.fixture(scope="module")
def dummy_sample(tmp_path_factory):
    """What the writer says the committed dummy data holds (regenerated, then compared)."""
    folder = tmp_path_factory.mktemp("regenerated")
    sample = dogs_sample.write_stanford_dogs_archives(folder, **DUMMY_DATA_ARGS)
    for archive in dogs_sample.ARCHIVES:
        with tarfile.open(folder / archive) as new, tarfile.open(DUMMY_DATA / archive) as old:
            assert new.getnames() == old.getnames(), f"dummy_data/{archive} is out of date"
    return sample


def test_dummy_data_is_tiny_and_matches_the_splits(dummy_sample):
    assert sum(f.stat().st_size for f in DUMMY_DATA.iterdir()) < 100_000
    assert dummy_sample["expected_examples"] == StanfordDogsTfrecordTest.SPLITS


def test_labels_are_the_shipped_120_names():
    names = Builder(config="224").info.features["label"].names
    shipped = (Builder.code_path.parent / "label_names.txt").read_text().split()
    assert names == shipped
    assert len(names) == 120 and names == sorted(names)
    assert names[:2] == TFDS_STANFORD_DOGS_FIRST_LABELS
    assert names[79] == "n02105855-shetland_sheepdog"


def test_the_breed_folders_are_the_labels_in_their_archive_case():
    # The sample writer names images.tar's folders from breeds.folder_names().
    folders = breeds.folder_names()
    assert [f.lower() for f in folders] == Builder(config="224").info.features["label"].names
    assert folders[79] == "n02105855-Shetland_sheepdog"
    assert dogs_sample.REAL_PNG_KEY.split("/")[0] in folders
    assert stanford_dogs_tfrecord.NAME == "stanford_dogs_tfrecord"


def test_skipped_files_are_in_the_metadata(tmp_path, dummy_sample):
    builder = tfds.builder("stanford_dogs_tfrecord", config="224", data_dir=tmp_path)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=DUMMY_DATA)
    )
    # Reloaded from metadata.json, not the builder's memory.
    skipped = tfds.builder_from_directory(builder.data_dir).info.metadata["skipped"]

    def files(split):
        return {s["file"]: s["reason"] for s in skipped[split]["files"]}

    expected = dummy_sample["expected_skips"]
    by_quirk = {info["quirk"]: info["member"] for info in dummy_sample["images"].values()}
    assert files("train") == {by_quirk["truncated_jpeg"]: "truncated image"}
    assert files("test") == {
        by_quirk["missing_annotation"]: "no annotation in annotation.tar",
        by_quirk["not_in_images_tar"]: "listed in test_list.mat, not in images.tar",
    }
    assert files("unlisted") == {
        by_quirk["unlisted"]: "in neither train_list.mat nor test_list.mat"
    }
    for split in ("train", "test", "unlisted"):
        assert sorted(files(split)) == expected[split]
        assert skipped[split]["count"] == len(expected[split])
    assert skipped["test"]["by_reason"] == {
        "no annotation in annotation.tar": 1,
        "listed in test_list.mat, not in images.tar": 1,
    }
    # No spool file is left in the build.
    assert sorted(p.name for p in builder.data_path.iterdir() if p.is_dir()) == []


# -- --max_examples_per_split: a 5-example build reads 5 images, not images.tar ----

MAX_EXAMPLES = 5
# Members a split's generator may have read when TFDS stops after MAX_EXAMPLES:
# the thread pool reads up to its window ahead of what it has handed out.
READ_AT_MOST = MAX_EXAMPLES + parallel.default_window()


@pytest.fixture(scope="module")
def big_sample(tmp_path_factory):
    """(manual_dir, what it holds): several times READ_AT_MOST images in each split."""
    folder = tmp_path_factory.mktemp("stanford_big")
    breeds = 4
    test_fraction = 0.4
    per_breed = max(75, math.ceil(4 * READ_AT_MOST / test_fraction / breeds))
    sample = dogs_sample.write_stanford_dogs_archives(
        folder,
        images_per_breed=per_breed,
        breeds=range(breeds),
        quirks=False,
        image_size=(48, 40),
        train_fraction=1 - test_fraction,
    )
    return folder, sample


def members_in_tar_order(images_tar, sample) -> dict[str, list[tuple[str, tuple[int, int]]]]:
    """{split: [(member, (offset, size))]} of the images a split keeps, as images.tar holds them."""
    by_member = {info["member"]: info for info in sample["images"].values()}
    members = {"train": [], "test": []}
    for name, location in archives.tar_members(images_tar):
        info = by_member[name]
        if info["kept"]:
            members[info["split"]].append((name, location))
    return members


def test_split_generators_read_only_what_max_examples_per_split_takes(big_sample, tmp_path):
    manual_dir, sample = big_sample
    members = members_in_tar_order(manual_dir / "images.tar", sample)
    for split in ("train", "test"):
        assert len(members[split]) >= 4 * READ_AT_MOST, "the sample is too small to tell"
    builder = Builder(config="224", data_dir=tmp_path / "data")
    dl_manager = tfds.download.DownloadManager(
        download_dir=tmp_path / "downloads",
        manual_dir=manual_dir,
        manual_dir_instructions=Builder.MANUAL_DOWNLOAD_INSTRUCTIONS,
    )
    generators = builder._split_generators(dl_manager)
    # The split generators share one reader of images.tar; nothing is read yet.
    reader = generators["train"].gi_frame.f_locals["read_member"]
    assert reader._handle is None, "_split_generators read images.tar's images"
    try:
        for split in ("train", "test"):  # In TFDS's order: one split after the other.
            # What TFDS does with --max_examples_per_split (see test_tfds_internals).
            taken = list(itertools.islice(generators[split], MAX_EXAMPLES))
            first = members[split][:MAX_EXAMPLES]
            assert [ex["image/filename"] for _, ex in taken] == [name for name, _ in first]
            offset, size = members[split][READ_AT_MOST - 1][1]
            read_up_to = reader._handle.tell()
            assert read_up_to <= offset + size, (
                f"{split}: read images.tar up to byte {read_up_to:,}, past image "
                f"{READ_AT_MOST} of the split (which ends at {offset + size:,})"
            )
    finally:
        for generator in generators.values():
            generator.close()
    tar_size = (manual_dir / "images.tar").stat().st_size
    assert read_up_to < tar_size // 2, "the bound above says nothing on this sample"


def test_tfds_build_with_max_examples_per_split_gives_that_many_per_split(big_sample, tmp_path):
    manual_dir, _ = big_sample
    run_ok(
        [
            *(*TFDS_CLI, "build", "stanford_dogs_tfrecord", "--imports", "stanford_dogs_tfrecord"),
            *("--manual_dir", os.fspath(manual_dir), "--data_dir", os.fspath(tmp_path)),
            *("--config", "224", "--max_examples_per_split", str(MAX_EXAMPLES)),
        ],
        fork=True,  # a one-process build: a fork of a server that has imported TensorFlow
    )
    builder = tfds.builder("stanford_dogs_tfrecord", config="224", data_dir=tmp_path)
    for split in ("train", "test"):
        info = builder.info.splits[split]
        assert info.num_examples == MAX_EXAMPLES, split
        assert info.num_shards == min(MIN_SHARDS_PER_SPLIT, MAX_EXAMPLES), split
        assert len(list(builder.as_dataset(split=split))) == MAX_EXAMPLES, split
