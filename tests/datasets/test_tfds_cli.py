"""The real `tfds build` CLI and `tfds.load`, as users run them, and the offline demo."""

import os
import subprocess
import sys
from pathlib import Path

import tensorflow_datasets as tfds

import cats_vs_dogs_fast
from tests.helpers import TFDS_CLI

PACKAGE_DIR = Path(cats_vs_dogs_fast.__file__).parent


def run(command, timeout=300):
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    return output


def shard_files(data_dir, config):
    folder = Path(data_dir) / "cats_vs_dogs_fast" / config / "1.0.0"
    return sorted(folder.glob("cats_vs_dogs_fast-train.tfrecord-*"))


def test_tfds_build_with_imports_clamps_shards_for_tiny_builds(cats_sample, tmp_path):
    manual_dir, _ = cats_sample
    output = run(
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
            "5",
        ]
    )
    assert "from the manual dir" in output and "not checked" in output
    assert len(shard_files(tmp_path, "224")) == 5  # 16 wanted, clamped to the 5 examples
    ds = tfds.load("cats_vs_dogs_fast", split="train", data_dir=tmp_path)
    assert len(list(ds)) == 5


def test_tfds_build_from_the_dataset_folder(cats_sample, tmp_path):
    manual_dir, counts = cats_sample
    run(
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
        ]
    )
    assert len(shard_files(tmp_path, "original")) == 16
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


def test_the_offline_demo_runs(tmp_path):
    output = run(
        [
            sys.executable,
            "-m",
            "fast_tfds.cli",
            "demo",
            "--workdir",
            os.fspath(tmp_path),
            "--images-per-class",
            "30",
        ]
    )
    assert "from the manual dir" in output
    assert "Built 76 examples in 16 shards per config" in output
    assert "as_fast_dataset() epoch 2: from the uint8 cache" in output
