"""The real `tfds build` CLI and `tfds.load`, as users run them (the offline demo runs in
tests/reliability/test_startup.py, where its start-up is checked to be quiet).

Each `tfds build` runs as a fork of a server that has imported TensorFlow and TFDS
(`tests.forks`): what is checked is what the build writes and logs, which TensorFlow's
import does not change, and a build of one process starts none of its own."""

import os
from pathlib import Path

import tensorflow_datasets as tfds

import cats_vs_dogs_fast
from fast_tfds.building import MIN_SHARDS_PER_SPLIT
from tests.helpers import TFDS_CLI, run_ok

PACKAGE_DIR = Path(cats_vs_dogs_fast.__file__).parent
MAX_EXAMPLES = 5


def shard_files(data_dir, config):
    folder = Path(data_dir) / "cats_vs_dogs_fast" / config / "1.0.0"
    return sorted(folder.glob("cats_vs_dogs_fast-train.tfrecord-*"))


def test_tfds_build_with_imports_clamps_shards_for_tiny_builds(cats_sample, tmp_path):
    manual_dir, _ = cats_sample
    output = run_ok(
        [
            *TFDS_CLI,
            "build",
            "cats_vs_dogs_fast",
            "--imports",
            "cats_vs_dogs_fast",
            "--manual_dir",
            os.fspath(manual_dir),
            "--data_dir",
            os.fspath(tmp_path),
            "--config",
            "224",
            "--max_examples_per_split",
            str(MAX_EXAMPLES),
        ],
        fork=True,
    )
    assert "from the manual dir" in output and "not checked" in output
    # MIN_SHARDS_PER_SPLIT wanted, clamped to the examples.
    assert MAX_EXAMPLES < MIN_SHARDS_PER_SPLIT
    assert len(shard_files(tmp_path, "224")) == MAX_EXAMPLES
    ds = tfds.load("cats_vs_dogs_fast", split="train", data_dir=tmp_path)
    assert len(list(ds)) == MAX_EXAMPLES


def test_tfds_build_from_the_dataset_folder(cats_sample, tmp_path):
    manual_dir, counts = cats_sample
    run_ok(
        [
            *TFDS_CLI,
            "build",
            os.fspath(PACKAGE_DIR),
            "--manual_dir",
            os.fspath(manual_dir),
            "--data_dir",
            os.fspath(tmp_path),
            "--config",
            "original",
        ],
        fork=True,
    )
    # TFDS's size rule gives 1 shard for this tiny sample; ours at least 16.
    assert counts["expected_examples"] >= MIN_SHARDS_PER_SPLIT
    assert len(shard_files(tmp_path, "original")) == MIN_SHARDS_PER_SPLIT
    builder = tfds.builder("cats_vs_dogs_fast", config="original", data_dir=tmp_path)
    assert builder.info.splits["train"].num_examples == counts["expected_examples"]
    skipped = builder.info.metadata["skipped"]["train"]
    # Broken files, plus Thumbs.db x2, the readme and the licence.
    assert skipped["count"] == counts["skipped_quirks"] + counts["other_members"]
    reasons = {s["reason"] for s in skipped["files"]}
    assert {"empty file", "truncated image", "not an image"} <= reasons


def test_tfds_load_after_import(cats_data_dir, cats_filenames):
    ds, info = tfds.load("cats_vs_dogs_fast", split="train", data_dir=cats_data_dir, with_info=True)
    assert info.features["label"].names == ["cat", "dog"]
    assert info.supervised_keys == ("image", "label")
    assert len(list(ds)) == len(cats_filenames)


def test_a_build_of_both_configs_says_each_notice_once(cats_sample, tmp_path):
    # Without --config, `tfds build` builds both configs in one process; each finds the
    # same archive and skips the same files.
    manual_dir, _ = cats_sample
    output = run_ok(
        [*TFDS_CLI, "build", "cats_vs_dogs_fast", "--imports", "cats_vs_dogs_fast"]
        + ["--manual_dir", os.fspath(manual_dir), "--data_dir", os.fspath(tmp_path)],
        fork=True,
    )
    assert shard_files(tmp_path, "224") and shard_files(tmp_path, "original")
    lines = output.splitlines()
    manual = [line for line in lines if "from the manual dir instead of downloading" in line]
    assert len(manual) == 1, manual
    assert "archive_sources.py" in manual[0]  # the line names the module that said it
    skips = [line for line in lines if "cats_vs_dogs_fast/train: kept" in line]
    assert len(skips) == 1 and "skipped" in skips[0], skips
