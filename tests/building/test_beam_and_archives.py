"""Both builders on Apache Beam (DirectRunner) give the examples and skips of a local build."""

import logging
import os
import pickle
from pathlib import Path

import apache_beam as beam
import numpy as np
import pytest
import tensorflow_datasets as tfds

import stanford_dogs_tfrecord  # noqa: F401  (registers the dataset)
from fast_tfds.building import archives

STANFORD_DUMMY_DATA = Path(stanford_dogs_tfrecord.Builder.code_path.parent / "dummy_data")


def build(name, manual_dir, data_dir, *, beam_options=None):
    builder = tfds.builder(name, config="224", data_dir=data_dir)
    config = tfds.download.DownloadConfig(
        manual_dir=os.fspath(manual_dir), beam_options=beam_options
    )
    builder.download_and_prepare(download_config=config)
    # Reloaded from the folder: what was written, not the builder's memory.
    return tfds.builder_from_directory(builder.data_dir)


def examples_by_filename(builder, split):
    ds = builder.as_dataset(split=split, decoders={"image": tfds.decode.SkipDecoding()})
    examples = {}
    for ex in tfds.as_numpy(ds):
        name = ex["image/filename"].decode()
        assert name not in examples, f"{name} written twice"
        examples[name] = ex
    return examples


def skip_reports(builder):
    """{split: (count, by_reason, sorted (file, reason)s)}: the file order may differ."""
    return {
        split: (
            report["count"],
            report["by_reason"],
            sorted((s["file"], s["reason"]) for s in report["files"]),
        )
        for split, report in builder.info.metadata["skipped"].items()
    }


def assert_same_dataset(local, on_beam, splits, compare):
    assert skip_reports(on_beam) == skip_reports(local)
    for split in splits:
        assert on_beam.info.splits[split].num_examples == local.info.splits[split].num_examples
        ours, theirs = examples_by_filename(on_beam, split), examples_by_filename(local, split)
        assert sorted(ours) == sorted(theirs)
        for name, example in ours.items():
            # The same pure function made both, so the JPEG bytes are the same.
            assert example["image"] == theirs[name]["image"], name
            assert example["label"] == theirs[name]["label"], name
            compare(example, theirs[name])


def nothing_more(ours, theirs):
    pass


@pytest.fixture
def direct_runner(caplog):
    caplog.set_level(logging.INFO)
    return beam.options.pipeline_options.PipelineOptions(["--runner=DirectRunner"])


def beam_counts_logged(caplog, name):
    lines = [r.getMessage() for r in caplog.records if "Beam workers kept" in r.getMessage()]
    assert len(lines) == 1, f"the build did not run on Beam: {lines}"
    assert lines[0].startswith(f"{name}: ")
    return lines[0]


def test_cats_on_beam_equals_the_local_build(
    cats_sample, cats_data_dir, tmp_path, direct_runner, caplog
):
    manual_dir, counts = cats_sample
    local = tfds.builder_from_directory(cats_data_dir / "cats_vs_dogs_fast" / "224" / "1.0.0")
    on_beam = build("cats_vs_dogs_fast", manual_dir, tmp_path, beam_options=direct_runner)
    # The workers ran the per-example function: they kept every image and
    # skipped the broken ones; the other members were skipped by the driver.
    assert beam_counts_logged(caplog, "cats_vs_dogs_fast").endswith(
        f"kept {counts['expected_examples']} images and skipped "
        f"{counts['skipped_quirks']} files (all splits)."
    )
    assert_same_dataset(local, on_beam, ["train"], nothing_more)
    assert skip_reports(on_beam)["train"][0] == counts["skipped_quirks"] + counts["other_members"]
    assert not (Path(on_beam.data_dir) / "_beam_skips").exists()


def test_stanford_dogs_on_beam_equals_the_local_build(tmp_path, direct_runner, caplog):
    local = build("stanford_dogs_tfrecord", STANFORD_DUMMY_DATA, tmp_path / "local")
    assert not [r for r in caplog.records if "Beam workers kept" in r.getMessage()]
    on_beam = build(
        "stanford_dogs_tfrecord", STANFORD_DUMMY_DATA, tmp_path / "beam", beam_options=direct_runner
    )
    beam_counts_logged(caplog, "stanford_dogs_tfrecord")

    def same_boxes(ours, theirs):
        np.testing.assert_array_equal(ours["objects"]["bbox"], theirs["objects"]["bbox"])

    assert_same_dataset(local, on_beam, ["train", "test"], same_boxes)
    reports = skip_reports(on_beam)
    assert set(reports) == {"train", "test", "unlisted"}
    # One skip the workers found (the truncated JPEG) and ones the driver found.
    assert "truncated image" in reports["train"][1]
    assert "listed in test_list.mat, not in images.tar" in reports["test"][1]


@pytest.mark.parametrize("archive", ["stanford_images_tar", "cats_zip"])
def test_member_readers_read_the_bytes_tfds_iterates(archive, cats_sample, tmp_path):
    """Random access (by zip name, or by the tar offset the header scan found), as
    local builds and Beam workers read, gives every member iter_archive gives,
    byte for byte, also after pickling to a worker."""
    manager = tfds.download.DownloadManager(download_dir=tmp_path)
    if archive == "cats_zip":
        path = cats_sample[0] / "kagglecatsanddogs_5340.zip"
        located = {name: name for name in archives.zip_members(path)}
        reader = archives.ZipMemberReader(path)
    else:
        path = STANFORD_DUMMY_DATA / "images.tar"
        located = dict(archives.tar_members(path))
        reader = archives.TarMemberReader(path)
    streamed = {name: fobj.read() for name, fobj in manager.iter_archive(path)}
    assert sorted(located) == sorted(streamed)
    reader(next(iter(located.values())))  # Opened here; a pickled copy must reopen.
    reader = pickle.loads(pickle.dumps(reader))
    for name, location in located.items():
        assert reader(location) == streamed[name], name
