"""A built dataset, shared as a folder, read by collaborators who do not have this package."""

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
import stanford_dogs_tfrecord
from tests.helpers import BLOCK_PACKAGES, TFDS_CLI, run_ok

STANFORD_DUMMY_DATA = Path(stanford_dogs_tfrecord.Builder.code_path.parent / "dummy_data")
OUR_PACKAGES = ("fast_tfds", "cats_vs_dogs_fast", "stanford_dogs_tfrecord")


@pytest.fixture(scope="module")
def shared_cats(tmp_path_factory, cats_sample):
    """A data dir made by `tfds build --publish_dir`; the build folder is then deleted."""
    manual_dir, counts = cats_sample
    build_dir = tmp_path_factory.mktemp("cats_build")
    shared = tmp_path_factory.mktemp("cats_shared")
    run_ok(
        [
            *(*TFDS_CLI, "build", "cats_vs_dogs_fast", "--imports", "cats_vs_dogs_fast"),
            *("--manual_dir", os.fspath(manual_dir), "--config", "224"),
            *("--data_dir", os.fspath(build_dir), "--publish_dir", os.fspath(shared)),
        ],
        fork=True,  # a one-process build: a fork of a server that has imported TensorFlow
    )
    shutil.rmtree(build_dir)
    return shared, counts["expected_examples"]


@pytest.fixture(scope="module")
def shared_stanford(tmp_path_factory):
    """A data dir holding a copy of a built version folder (the documented manual way)."""
    build_dir = tmp_path_factory.mktemp("stanford_build")
    builder = tfds.builder("stanford_dogs_tfrecord", config="224", data_dir=build_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=STANFORD_DUMMY_DATA)
    )
    shared = tmp_path_factory.mktemp("stanford_shared")
    shutil.copytree(builder.data_dir, shared / "stanford_dogs_tfrecord" / "224" / "1.0.0")
    shutil.rmtree(build_dir)
    return shared, builder.info.splits["train"].num_examples


# Runs in a fresh interpreter where our packages cannot be imported, as on a
# collaborator's machine that has TensorFlow Datasets and nothing else.
_WITHOUT_OUR_PACKAGES = (
    BLOCK_PACKAGES
    + """
import importlib.abc, json, os, sys


import tensorflow_datasets as tfds

result = {}
for name, data_dir in json.loads(sys.argv[2]).items():
    folder = os.path.join(data_dir, name, "224", "1.0.0")
    builder = tfds.builder_from_directory(folder)
    features = builder.info.features
    examples = list(tfds.as_numpy(builder.as_dataset(split="train")))
    # Without our code TFDS cannot know the default config: name it.
    loaded = tfds.load(f"{name}/224", split="train", data_dir=data_dir)
    result[name] = {
        "builder_class": type(builder).__name__,
        "image_shape": list(features["image"].shape),
        "label_names": features["label"].names,
        "examples": len(examples),
        "decoded_shape": list(examples[0]["image"].shape),
        "load_examples": len(list(loaded)),
        "skipped_train": builder.info.metadata["skipped"]["train"]["count"],
        "boxes": (
            [ex["objects"]["bbox"].tolist() for ex in examples]
            if "objects" in features else None
        ),
        "our_modules_loaded": sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED),
    }
print("RESULT " + json.dumps(result))
"""
)


def test_tfds_reads_shared_folders_without_our_package(shared_cats, shared_stanford, tmp_path):
    (cats_dir, cats_examples), (dogs_dir, dogs_examples) = shared_cats, shared_stanford
    data_dirs = {
        "cats_vs_dogs_fast": os.fspath(cats_dir),
        "stanford_dogs_tfrecord": os.fspath(dogs_dir),
    }
    # Neither the repository (cwd, sys.path) nor the editable install can serve
    # our packages: the blocker stands first on sys.meta_path.
    output = run_ok(
        [
            sys.executable,
            "-c",
            _WITHOUT_OUR_PACKAGES,
            ",".join(OUR_PACKAGES),
            json.dumps(data_dirs),
        ],
        cwd=tmp_path,
    )
    result = json.loads(
        next(line for line in output.splitlines() if line.startswith("RESULT "))[7:]
    )

    cats = result["cats_vs_dogs_fast"]
    assert cats["builder_class"] == "ReadOnlyBuilder"
    assert cats["examples"] == cats["load_examples"] == cats_examples
    assert cats["image_shape"] == cats["decoded_shape"] == [224, 224, 3]
    assert cats["label_names"] == ["cat", "dog"]
    assert cats["skipped_train"] > 0 and cats["boxes"] is None

    dogs = result["stanford_dogs_tfrecord"]
    assert dogs["examples"] == dogs["load_examples"] == dogs_examples
    # The 120 names come from label.labels.txt in the folder, not from our
    # package's names_file.
    assert (
        dogs["label_names"]
        == stanford_dogs_tfrecord.Builder(config="224").info.features["label"].names
    )
    assert len(dogs["boxes"]) == dogs_examples and all(dogs["boxes"])
    assert all(0.0 <= v <= 1.0 for boxes in dogs["boxes"] for box in boxes for v in box)
    assert cats["our_modules_loaded"] == dogs["our_modules_loaded"] == []


def test_as_fast_dataset_reads_shared_folders_without_the_sources(shared_cats, shared_stanford):
    (cats_dir, cats_examples), (dogs_dir, dogs_examples) = shared_cats, shared_stanford
    # data_dir: built already, so nothing is downloaded and no manual_dir is needed.
    ds = cats_vs_dogs_fast.as_fast_dataset("train", data_dir=cats_dir, batch_size=None)
    labels = [int(label) for _, label in ds]
    assert len(labels) == cats_examples and set(labels) == {0, 1}
    # builder_dir: the version folder alone.
    folder = dogs_dir / "stanford_dogs_tfrecord" / "224" / "1.0.0"
    ds = stanford_dogs_tfrecord.as_fast_dataset(
        "train", builder_dir=folder, with_boxes=True, batch_size=4
    )
    seen = 0
    for images, targets in ds:
        assert images.shape[1:] == (224, 224, 3) and images.dtype == tf.float32
        assert isinstance(targets["bbox"], tf.RaggedTensor)
        seen += int(images.shape[0])
    assert seen == dogs_examples
    boxes = np.concatenate([t["bbox"].flat_values.numpy() for _, t in ds])
    assert boxes.shape[1] == 4
