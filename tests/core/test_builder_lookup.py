"""Finding and building a dataset (shared by both back ends): real builds, one-line
errors that start with the argument, and build commands that say everything needed."""

from __future__ import annotations

import shlex
import sys

import pytest
import tensorflow_datasets as tfds

import stanford_dogs_tfrecord  # noqa: F401  (registers the dataset)
from fast_tfds.core import builder_lookup


def test_a_built_dataset_and_its_version_folder_give_the_same_builder(cats_data_dir):
    builder = builder_lookup.load_builder(
        "cats_vs_dogs_fast", data_dir=cats_data_dir, config="original", download_and_prepare=False
    )
    assert builder.is_prepared() and builder.info.full_name == "cats_vs_dogs_fast/original/1.0.0"
    from_folder = builder_lookup.load_builder("cats_vs_dogs_fast", builder_dir=builder.data_dir)
    assert from_folder.info.full_name == builder.info.full_name
    assert (
        from_folder.info.splits["train"].num_examples == builder.info.splits["train"].num_examples
    )


def looked_up(name: str, config: str | None = None, **arguments):
    """The builder as both front doors find it: the name split (`name_and_config`), then
    `load_builder`."""
    name, config = builder_lookup.name_and_config(name, config)
    return builder_lookup.load_builder(name, config=config, **arguments)


def test_a_config_in_the_name_reads_that_config_as_tfds_load_does(cats_data_dir):
    builder = looked_up(
        "cats_vs_dogs_fast/original", data_dir=cats_data_dir, download_and_prepare=False
    )
    assert builder.info.full_name == "cats_vs_dogs_fast/original/1.0.0"
    same = looked_up(
        "cats_vs_dogs_fast/original",
        data_dir=cats_data_dir,
        config="original",
        download_and_prepare=False,
    )
    assert same.info.full_name == builder.info.full_name


@pytest.mark.parametrize("config", [None, "original"])
def test_the_version_folder_named_without_reading_is_the_builders(cats_data_dir, config):
    """`version_folder` (where the readers list a bucket's shards before the builder loads)
    names the folder `load_builder` reads, for the default config and a named one."""
    builder = builder_lookup.load_builder(
        "cats_vs_dogs_fast", data_dir=cats_data_dir, config=config, download_and_prepare=False
    )
    named = builder_lookup.version_folder(
        "cats_vs_dogs_fast", data_dir=f"{cats_data_dir}/", config=config
    )
    assert named == str(builder.data_dir)
    folder = "gs://b/x/cats_vs_dogs_fast/224/1.0.0"
    assert builder_lookup.version_folder("cats_vs_dogs_fast", builder_dir=folder + "/") == folder


@pytest.mark.parametrize(
    "arguments",
    [
        {"name": "no_such_dataset", "data_dir": "gs://b/x"},
        {"name": "cats_vs_dogs_fast", "data_dir": "gs://b/x", "config": "512"},
        {"name": "cats_vs_dogs_fast/224", "data_dir": "gs://b/x"},
        {"name": "cats_vs_dogs_fast"},  # TFDS searches its data dirs
    ],
)
def test_no_version_folder_where_the_builder_would_say_or_search(arguments):
    assert builder_lookup.version_folder(**arguments) is None


@pytest.mark.parametrize(
    ("arguments", "start"),
    [
        ({"name": "no_such_dataset"}, "name='no_such_dataset': no dataset of that name"),
        ({"name": "cats_vs_dogs_fast", "config": "512"}, "config='512': cats_vs_dogs_fast has"),
        ({"name": "cats_vs_dogs_fast/512"}, "config='512': cats_vs_dogs_fast has"),
        (
            {"name": "cats_vs_dogs_fast/224", "config": "original"},
            "name='cats_vs_dogs_fast/224', config='original': two configs",
        ),
        ({"name": "cats_vs_dogs_fast/224:1.0.0"}, "name='cats_vs_dogs_fast/224:1.0.0': a version"),
        ({"name": "cats_vs_dogs_fast", "builder_dir": "/no/such/folder"}, "builder_dir="),
        (
            {"name": "cats_vs_dogs_fast", "data_dir": "s3a://team/tensorflow_datasets"},
            "data_dir='s3a://team/tensorflow_datasets': s3a:// is Hadoop's name for S3",
        ),
        (
            {"name": "cats_vs_dogs_fast", "builder_dir": "S3N://team/cats_vs_dogs_fast/224/1.0.0"},
            "builder_dir='S3N://team/cats_vs_dogs_fast/224/1.0.0': s3n:// is Hadoop's name",
        ),
    ],
)
def test_bad_arguments_are_one_line_value_errors(arguments, start):
    with pytest.raises(ValueError) as excinfo:
        looked_up(**arguments)
    message = str(excinfo.value)
    assert message.startswith(start) and "\n" not in message, message


def suggested_command(message: str) -> list[str]:
    return shlex.split(message.split("`")[1])


def test_a_missing_build_names_the_command_that_builds_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # A relative data dir: the command gets it absolute.
    with pytest.raises(builder_lookup.DatasetNotBuilt) as excinfo:
        builder_lookup.load_builder(
            "stanford_dogs_tfrecord",
            data_dir="data",
            config="original",
            download_and_prepare=False,
            file_format="array_record",
            download_config=tfds.download.DownloadConfig(manual_dir="archives"),
        )
    message = str(excinfo.value)
    assert isinstance(excinfo.value, ValueError) and "\n" not in message
    assert message.startswith("download_and_prepare=False: stanford_dogs_tfrecord/original/1.0.0")
    assert suggested_command(message) == [
        *("tfds", "build", "stanford_dogs_tfrecord", "--imports", "stanford_dogs_tfrecord"),
        *("--data_dir", str(tmp_path / "data"), "--config", "original"),
        *("--file_format", "array_record", "--manual_dir", str(tmp_path / "archives")),
    ]


def test_the_default_data_dir_and_format_add_nothing_to_the_command(tmp_path, monkeypatch):
    from tensorflow_datasets.core import constants

    monkeypatch.setattr(constants, "DATA_DIR", str(tmp_path))
    with pytest.raises(builder_lookup.DatasetNotBuilt) as excinfo:
        builder_lookup.load_builder(
            "cats_vs_dogs_fast", data_dir=tmp_path, download_and_prepare=False
        )
    assert suggested_command(str(excinfo.value)) == [
        *("tfds", "build", "cats_vs_dogs_fast", "--imports", "cats_vs_dogs_fast"),
        *("--config", "224"),
    ]


@pytest.mark.parametrize(
    ("argument", "path", "copy"),
    [
        ("data_dir", "s3a://team/tfds", "aws s3 sync s3://team/tfds ~/tensorflow_datasets"),
        (
            "builder_dir",
            "s3n://team/tfds/cats_vs_dogs_fast/224/1.0.0/",
            "aws s3 sync s3://team/tfds/cats_vs_dogs_fast/224/1.0.0/ "
            "~/tensorflow_datasets/cats_vs_dogs_fast/224/1.0.0",
        ),
    ],
)
def test_hadoop_s3_names_are_refused_by_both_readers_with_a_copy_command(argument, path, copy):
    """Before anything touches the path: no client reads s3a:// or s3n://; the message
    names s3:// (which both readers read through s3fs) and a copy command."""
    import cats_vs_dogs_fast

    for read in (cats_vs_dogs_fast.as_fast_dataset, cats_vs_dogs_fast.as_fast_loader):
        with pytest.raises(ValueError) as excinfo:
            read("train", **{argument: path})
        message = str(excinfo.value)
        assert message.startswith(f"{argument}={path!r}: ") and "\n" not in message
        assert f"`{copy}`" in message
        assert f"{argument}='s3://" in message


@pytest.mark.parametrize(
    ("argument", "path", "url", "account"),
    [
        ("data_dir", "abfs://team/tfds", "az://team/tfds", "ACCOUNT"),
        (
            "builder_dir",
            "ABFSS://team@lab.dfs.core.windows.net/tfds/cats_vs_dogs_fast/224/1.0.0",
            "az://team/tfds/cats_vs_dogs_fast/224/1.0.0",
            "lab",
        ),
    ],
)
def test_abfs_names_are_refused_by_both_readers_naming_the_az_url(argument, path, url, account):
    """abfs:// and abfss:// (adlfs's and Hadoop's other names for Azure) are refused before
    anything touches the path, naming the az:// url to pass and, where the url names the
    account, the setting that carries it."""
    import cats_vs_dogs_fast

    for read in (cats_vs_dogs_fast.as_fast_dataset, cats_vs_dogs_fast.as_fast_loader):
        with pytest.raises(ValueError) as excinfo:
            read("train", **{argument: path})
        message = str(excinfo.value)
        assert message.startswith(f"{argument}={path!r}: ") and "\n" not in message
        assert message.endswith(f"; pass it as {argument}={url!r}"), message
        assert f"AZURE_STORAGE_ACCOUNT_NAME={account})" in message, message


@pytest.mark.parametrize(
    ("path", "extra"),
    [("s3://team/tfds", "fast-image-tfds[s3]"), ("az://team/tfds", "fast-image-tfds[azure]")],
)
def test_a_store_without_its_client_names_the_extra(monkeypatch, path, extra):
    """s3:// and az:// are read only through their fsspec clients (TensorFlow reads
    neither): without one, both readers say which extra installs it, in one line."""
    import cats_vs_dogs_fast
    from fast_tfds.cache.remote.object_stores import store_of

    monkeypatch.setitem(sys.modules, store_of(path).package, None)  # as if not installed
    for read in (cats_vs_dogs_fast.as_fast_dataset, cats_vs_dogs_fast.as_fast_loader):
        with pytest.raises(ImportError) as excinfo:
            read("train", data_dir=path, download_and_prepare=False)
        message = str(excinfo.value)
        assert message.startswith(f"{path}/cats_vs_dogs_fast/224/1.0.0: ") and "\n" not in message
        assert f"pip install '{extra}'" in message
