"""Both builders write ArrayRecord (`tfds build --file_format array_record`), and a
TFRecord build gains ArrayRecord files next to its TFRecords (`tfds convert_format`),
so that one folder serves tf.data and random-access readers. The `tfds` commands run as
forks of a server that has imported TensorFlow (`tests.forks`): a one-process build or
conversion starts no process of its own, and what is checked is what it writes."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
from cats_vs_dogs_fast import cats_vs_dogs_fast_dataset_builder
from fast_tfds.building.shards import MIN_SHARDS_PER_SPLIT
from fast_tfds.cli import verify
from stanford_dogs_tfrecord.stanford_dogs_tfrecord_dataset_builder import Builder as DogsBuilder
from tests.datasets import test_stanford_dogs_builder
from tests.datasets.test_cats_vs_dogs_builder import EXPECTED_TRAIN as CATS_DUMMY_TRAIN
from tests.helpers import TFDS_CLI, not_collected, run_ok


class ArrayRecordChecks:
    """TFDS's builder test harness (`tfds.testing.DatasetBuilderTestCase`), building
    ArrayRecord files. TFDS's ArrayRecord adapter has no `as_dataset()` (it is
    random access only), so the examples are checked through `as_data_source()`."""

    def _make_builder(self, config=None):
        return self.dataset_class(
            data_dir=self.tmp_dir, config=config, version=self.VERSION, file_format="array_record"
        )

    def _assertAsDataset(self, builder):
        filenames = {}
        for split, expected in self.SPLITS.items():
            source = builder.as_data_source(split=split)
            examples = [source[i] for i in range(len(source))]
            self.assertLen(examples, expected)
            stored = builder.builder_config.image_size
            for example in examples:
                image = example["image"]
                self.assertEqual(image.dtype, np.uint8)
                self.assertEqual(image.shape[2], 3)
                if stored is not None:
                    self.assertEqual(image.shape, (stored, stored, 3))
                self.assertIn(example["label"], range(builder.info.features["label"].num_classes))
            filenames[split] = {example["image/filename"] for example in examples}
            self.assertLen(filenames[split], expected)
        splits = list(filenames.values())
        for i, first in enumerate(splits):
            for second in splits[i + 1 :]:
                self.assertFalse(first & second, "splits overlap")
        files = list(Path(builder.data_dir).glob(f"{builder.name}-*.array_record-*"))
        self.assertTrue(files, "no ArrayRecord files were written")
        self.assertFalse(list(Path(builder.data_dir).glob("*.tfrecord-*")))


class CatsVsDogsFastArrayRecordTest(ArrayRecordChecks, tfds.testing.DatasetBuilderTestCase):
    test_session = not_collected(tfds.testing.DatasetBuilderTestCase.test_session)
    DATASET_CLASS = cats_vs_dogs_fast_dataset_builder.Builder
    BUILDER_CONFIG_NAMES_TO_TEST = ["224", "original"]
    SPLITS = {"train": CATS_DUMMY_TRAIN}
    DL_DOWNLOAD_RESULT = "kagglecatsanddogs_5340.zip"


class StanfordDogsArrayRecordTest(ArrayRecordChecks, tfds.testing.DatasetBuilderTestCase):
    test_session = not_collected(tfds.testing.DatasetBuilderTestCase.test_session)
    DATASET_CLASS = DogsBuilder
    BUILDER_CONFIG_NAMES_TO_TEST = ["224", "original"]
    # The TFRecord test's counts (its class is not imported by name: pytest would
    # collect and run it here a second time).
    SPLITS = test_stanford_dogs_builder.StanfordDogsTfrecordTest.SPLITS


def test_tfds_build_cli_writes_at_least_16_array_record_shards_and_the_skips(
    cats_sample, cats_builder, tmp_path
):
    manual_dir, counts = cats_sample
    run_ok(
        [
            *(*TFDS_CLI, "build", "cats_vs_dogs_fast", "--imports", "cats_vs_dogs_fast"),
            *("--manual_dir", os.fspath(manual_dir), "--data_dir", os.fspath(tmp_path)),
            *("--config", "224", "--file_format", "array_record"),
        ],
        fork=True,
    )
    folder = tmp_path / "cats_vs_dogs_fast" / "224" / "1.0.0"
    shards = sorted(folder.glob("cats_vs_dogs_fast-train.array_record-*"))
    assert len(shards) >= MIN_SHARDS_PER_SPLIT
    info = json.loads((folder / "dataset_info.json").read_text())
    assert info["fileFormat"] == "array_record"
    assert int(info["splits"][0]["numBytes"]) > 0
    built = tfds.builder_from_directory(folder)
    assert built.info.splits["train"].num_examples == counts["expected_examples"]
    # The same skip list as the TFRecord build of the same archive.
    skipped = built.info.metadata["skipped"]["train"]
    assert skipped == cats_builder.info.metadata["skipped"]["train"]
    assert skipped["count"] > 0


def test_convert_format_adds_array_record_files_next_to_the_tfrecords(cats_builder, tmp_path):
    folder = tmp_path / "cats_vs_dogs_fast" / "224" / "1.0.0"
    shutil.copytree(cats_builder.data_dir, folder)
    run_ok(
        [
            *(*TFDS_CLI, "convert_format", "--dataset_version_dir", os.fspath(folder)),
            *("--out_file_format", "array_record", "--num_workers", "1"),
        ],
        fork=True,
    )
    tfrecords = sorted(folder.glob("*.tfrecord-*"))
    array_records = sorted(folder.glob("*.array_record-*"))
    assert len(array_records) == len(tfrecords) >= MIN_SHARDS_PER_SPLIT
    builder = tfds.builder_from_directory(os.fspath(folder))
    assert {f.value for f in builder.info.available_file_formats()} == {
        "tfrecord",
        "array_record",
    }
    # tf.data still reads the TFRecords; random access reads the ArrayRecords.
    expected = cats_builder.info.splits["train"].num_examples
    images = sum(
        int(batch[0].shape[0])
        for batch in cats_vs_dogs_fast.as_fast_dataset(builder_dir=folder, cache=False)
    )
    assert images == expected
    source = tfds.data_source("cats_vs_dogs_fast/224", split="train", data_dir=tmp_path)
    assert len(source) == expected
    # The skip list travels with the converted folder.
    assert builder.info.metadata["skipped"] == cats_builder.info.metadata["skipped"]
    # `fast-tfds verify` checks both formats, and names a damaged ArrayRecord shard.
    report = verify.verify_paths([folder])
    assert not report.problems and report.checked == [os.fspath(folder)]
    bad = array_records[2]
    data = bytearray(bad.read_bytes())
    data[200] ^= 0x40  # In the first chunk's records (a small file is mostly padding).
    bad.write_bytes(bytes(data))
    report = verify.verify_paths([folder])
    assert len(report.problems) == 1 and report.problems[0].startswith(f"{bad}: ")
    assert "corrupt ArrayRecord" in report.problems[0]
    out = io.StringIO()
    assert verify.print_report(report, out) == 1
    assert "REBUILD" in out.getvalue()


def test_as_fast_dataset_on_an_array_record_build_says_what_to_do(cats_array_record_dir):
    with pytest.raises(ValueError, match="stored as array_record.*as_fast_loader"):
        cats_vs_dogs_fast.as_fast_dataset(data_dir=cats_array_record_dir, cache=False)
