"""The loader rows of the benchmark (`python -m benchmarks.loaders`) on the tiny
sample: every row runs and counts every image; no timing assertions."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import PIL.Image
import pytest
import tensorflow_datasets as tfds

from benchmarks import loaders
from tests.helpers import shared_folder


@pytest.fixture(scope="module")
def loaders_run(cats_every_config_both_formats_dir, tmp_path_factory):
    """(result, version folder, workdir) of one round of the loader rows, run once for the
    whole test run, whichever xdist workers this module's tests go to. Over the 224 build
    the other benchmark tests share, with its ArrayRecord files already there: how the rows
    add them to a build without them (`add_array_record_files`) is the last test's."""

    def run(workdir):
        folder = workdir / "data" / "cats_vs_dogs_fast" / "224" / "1.0.0"
        shutil.copytree(
            cats_every_config_both_formats_dir / "cats_vs_dogs_fast" / "224", folder.parent
        )
        loaders.main(
            ["--data-dir", str(workdir / "data"), "--rounds", "1", "--workdir", str(workdir)]
            + ["--json", str(workdir / "loaders.json")]
        )

    workdir = shared_folder(tmp_path_factory, "loaders_run", run)
    folder = workdir / "data" / "cats_vs_dogs_fast" / "224" / "1.0.0"
    return json.loads((workdir / "loaders.json").read_text()), folder, workdir


def test_the_loader_rows_count_every_image(loaders_run, cats_builder):
    result, folder, workdir = loaders_run
    expected = cats_builder.info.splits["train"].num_examples
    names = {p.name for p in [*loaders.comparison_pipelines(), *loaders.loader_pipelines()]}
    assert set(result["pipelines"]) == names
    for name, row in result["pipelines"].items():
        for epoch in row["rounds"][0]["epochs"]:
            assert epoch["images"] == expected, name
    assert result["images"] == expected
    assert sorted(folder.glob("*.array_record-*"))  # what the loader rows read
    extracted = list(workdir.glob("imagefolder-*/*/*.jpg"))
    assert {"loader_vs_tf_data_epoch1", "loader_vs_tf_data_epoch2"} <= set(result["ratios"])
    if loaders.torch_available():
        assert len(extracted) == expected
        assert result["imagefolder"] and "loader_vs_imagefolder_epoch1" in result["ratios"]
    else:  # The ImageFolder row (and its extracted JPEGs) needs torch: the bench extra.
        assert not extracted and "loader_vs_imagefolder_epoch1" not in result["ratios"]


def image_folder_samples(root) -> tuple[list[str], list[tuple[str, int]]]:
    """(classes, samples) as `torchvision.datasets.ImageFolder(root)` lists them.

    torchvision's own where it can be imported; else its rules, written out here:
    the class folders sorted by name and numbered in that order, each walked
    (links followed) in sorted order, keeping the files with an image extension.
    """
    try:
        import torchvision
    except ImportError:
        pass
    else:
        found = torchvision.datasets.ImageFolder(os.fspath(root))
        return found.classes, found.samples
    extensions = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    samples = []
    for index, name in enumerate(classes):
        for folder, _, files in sorted(os.walk(os.path.join(root, name), followlinks=True)):
            for file in sorted(files):
                if file.lower().endswith(extensions):
                    samples.append((os.path.join(folder, file), index))
    return classes, samples


def test_the_image_folder_row_reads_the_split_as_image_folder_would(loaders_run):
    _, folder, workdir = loaders_run
    builder = loaders.add_array_record_files(tfds.builder_from_directory(str(folder)))
    root = loaders.extract_image_folder(builder, "train", workdir)  # already there
    dataset = loaders.ImageFolderLike(root)
    classes, samples = image_folder_samples(root)
    assert dataset.samples == samples
    # Every example of the split, each under its own label's name and with its pixels:
    # what TFDS's own reader gives for the record the file was extracted from.
    records = builder.as_data_source(split="train", file_format="array_record")
    names = builder.info.features["label"].names
    index = {path: int(Path(path).stem) for path, _ in samples}  # extracted as N.jpg
    assert sorted(index.values()) == list(range(len(records)))
    for path, label in samples:
        example = records[index[path]]
        assert classes[label] == names[example["label"]], path
        with PIL.Image.open(path) as image:
            pixels = np.asarray(image.convert("RGB"), np.int16)
        # PIL's libjpeg and TensorFlow's may round a few values differently.
        assert np.abs(pixels - example["image"]).max() <= 2, path
    if loaders.torch_available():
        image, label = dataset[0]
        assert tuple(image.shape) == (3, 224, 224) and str(image.dtype) == "torch.uint8"
        with PIL.Image.open(samples[0][0]) as first:
            expected = np.asarray(first.convert("RGB")).transpose(2, 0, 1)
        assert label == samples[0][1] and np.array_equal(image.numpy(), expected)


def test_array_record_files_the_info_does_not_list_are_converted_again(cats_builder, tmp_path):
    # An interrupted conversion leaves shards that dataset_info.json does not list;
    # TFDS's convert_format then skips every shard and never records the format.
    from tensorflow_datasets.core import file_adapters

    folder = tmp_path / "cats_vs_dogs_fast" / "224" / "1.0.0"
    shutil.copytree(cats_builder.data_dir, folder)
    (folder / "cats_vs_dogs_fast-train.array_record-00000-of-00016").write_bytes(b"partial")
    builder = loaders.add_array_record_files(tfds.builder_from_directory(str(folder)))
    assert file_adapters.FileFormat.ARRAY_RECORD in builder.info.available_file_formats()
    assert (folder / "cats_vs_dogs_fast-train.array_record-00000-of-00016").read_bytes() != (
        b"partial"
    )
