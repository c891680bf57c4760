"""stanford_dogs_tfrecord's builder on its committed dummy data.

The dummy data is what `fast_tfds.samples.stanford_dogs.write_stanford_dogs_archives`
writes with DUMMY_DATA_ARGS; to regenerate it:

    python -c "from fast_tfds.samples.stanford_dogs import write_stanford_dogs_archives as w; \
w('stanford_dogs_tfrecord/dummy_data', images_per_breed=3, image_size=(48, 40))"
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

import stanford_dogs_tfrecord
from fast_tfds.samples import stanford_dogs as dogs_sample
from stanford_dogs_tfrecord.stanford_dogs_tfrecord_dataset_builder import Builder

DUMMY_DATA_ARGS = {"images_per_breed": 3, "image_size": (48, 40)}
DUMMY_DATA = Path(Builder.code_path.parent / "dummy_data")
TFDS_STANFORD_DOGS_FIRST_LABELS = ["n02085620-chihuahua", "n02085782-japanese_spaniel"]


class StanfordDogsTfrecordTest(tfds.testing.DatasetBuilderTestCase):
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
