"""The output-size rows of the benchmark (`python -m benchmarks.sizes`) on the tiny
sample: every row runs and counts every image of every epoch; no timing assertions."""

import json
import shutil

import tensorflow_datasets as tfds

from benchmarks import sizes


def test_every_size_row_counts_every_image(cats_data_dir, tmp_path):
    data_dir = tmp_path / "data"
    shutil.copytree(cats_data_dir, data_dir)  # The loader rows add ArrayRecord files.
    out = tmp_path / "sizes.json"
    sizes.main(["--data-dir", str(data_dir), "--rounds", "1", "--json", str(out)])
    result = json.loads(out.read_text())
    expected = tfds.builder("cats_vs_dogs_fast", config="224", data_dir=data_dir)
    count = expected.info.splits["train"].num_examples
    rows = result["epochs"]
    assert len(rows) == 5 * len(sizes.SIZES) + 4 + 2
    for name, epochs in rows.items():
        assert [e["images"] for e in epochs] == [count], name
        assert all(e["seconds"] > 0 for e in epochs), name
    assert {"160: no cache / TF", "224: loader / TF", "disk / memory cache: served"} <= set(
        result["ratios"]
    )
