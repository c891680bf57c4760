"""`tfds.data_source` on an ArrayRecord build, in a process where our packages cannot be
imported (a collaborator with TFDS only): the same examples as the TFRecord build."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
import tensorflow_datasets as tfds

from tests.helpers import BLOCK_PACKAGES

OUR_PACKAGES = ("fast_tfds", "cats_vs_dogs_fast", "stanford_dogs_tfrecord")
SPLITS = ("train", "train[:80%]")

_WITHOUT_OUR_PACKAGES = (
    BLOCK_PACKAGES
    + """
import hashlib, importlib.abc, json, sys


import tensorflow_datasets as tfds

name, data_dir, splits = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
result = {}
for split in splits:
    raw = tfds.data_source(
        f"{name}/224", split=split, data_dir=data_dir,
        decoders={"image": tfds.decode.SkipDecoding()},
    )
    decoded = tfds.data_source(f"{name}/224", split=split, data_dir=data_dir)
    examples = [raw[i] for i in range(len(raw))]
    result[split] = {
        "examples": [
            {
                "filename": ex["image/filename"].decode(),
                "label": int(ex["label"]),
                "image_sha256": hashlib.sha256(ex["image"]).hexdigest(),
                "boxes": (
                    [[round(float(v), 6) for v in box] for box in ex["objects"]["bbox"]]
                    if "objects" in ex else None
                ),
            }
            for ex in examples
        ],
        "decoded_image": [list(decoded[0]["image"].shape), str(decoded[0]["image"].dtype)],
    }
result["tensorflow_loaded"] = "tensorflow" in sys.modules
result["our_modules_loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print("RESULT " + json.dumps(result))
"""
)


def data_source_without_our_packages(name: str, data_dir) -> dict:
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [
            *(sys.executable, "-c", _WITHOUT_OUR_PACKAGES, ",".join(OUR_PACKAGES)),
            *(name, os.fspath(data_dir), json.dumps(SPLITS)),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=data_dir,  # not the repository
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def tfrecord_examples(builder, split: str) -> list[dict]:
    """The same fields, read from the TFRecord build with TFDS's tf.data reader."""
    ds = builder.as_dataset(split=split, decoders={"image": tfds.decode.SkipDecoding()})
    return [
        {
            "filename": ex["image/filename"].decode(),
            "label": int(ex["label"]),
            "image_sha256": hashlib.sha256(ex["image"]).hexdigest(),
            "boxes": (
                [[round(float(v), 6) for v in box] for box in ex["objects"]["bbox"]]
                if "objects" in ex
                else None
            ),
        }
        for ex in tfds.as_numpy(ds)
    ]


@pytest.mark.parametrize("dataset", ["cats_vs_dogs_fast", "stanford_dogs_tfrecord"])
def test_data_source_without_our_packages_matches_the_tfrecord_build(
    dataset, request, cats_data_dir, stanford_tfrecord_dir
):
    if dataset == "cats_vs_dogs_fast":
        array_record_dir = request.getfixturevalue("cats_array_record_dir")
        tfrecord_dir = cats_data_dir
    else:
        array_record_dir = request.getfixturevalue("stanford_array_record_dir")
        tfrecord_dir = stanford_tfrecord_dir
    result = data_source_without_our_packages(dataset, array_record_dir)
    assert result["our_modules_loaded"] == []
    assert result["tensorflow_loaded"] is False  # random access needs no TensorFlow
    tfrecord_builder = tfds.builder(dataset, config="224", data_dir=tfrecord_dir)
    for split in SPLITS:
        expected = tfrecord_examples(tfrecord_builder, split)
        got = result[split]["examples"]
        assert len(got) == len(expected) > 0
        # Same examples, in the same order: filenames, labels, JPEG bytes, boxes.
        assert got == expected
        assert result[split]["decoded_image"] == [[224, 224, 3], "uint8"]
    if dataset == "stanford_dogs_tfrecord":
        assert all(ex["boxes"] for ex in result["train"]["examples"])
    full = len(result["train"]["examples"])
    assert len(result["train[:80%]"]["examples"]) < full
