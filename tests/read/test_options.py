"""`ReadOptions`: the `cache` keyword read once into a typed choice, every field documented
on the class, and a file-system URL as the cache prefix (gs://, ram://; s3:// and az://, which
TensorFlow cannot write, are refused)."""

from __future__ import annotations

import hashlib
import shutil

import pytest
import tensorflow as tf

import cats_vs_dogs_fast
from fast_tfds.read.options import CacheKind, ReadOptions


def test_the_cache_keyword_is_read_once_into_one_typed_choice(tmp_path):
    memory = ReadOptions(cache_budget=123, cache_dir=str(tmp_path)).cache_choice
    assert (memory.kind, memory.path, memory.budget, memory.folder) == (
        CacheKind.MEMORY,
        None,
        123,
        str(tmp_path),
    )
    files = ReadOptions(cache=tmp_path / "cache").cache_choice
    assert (files.kind, files.path) == (CacheKind.FILES, str(tmp_path / "cache"))
    assert ReadOptions(cache=False).cache_choice.kind is CacheKind.OFF


def test_persist_is_part_of_the_cache_choice_and_checked_in_one_line(tmp_path):
    choice = ReadOptions(persist=True, cache_dir=str(tmp_path)).cache_choice
    assert (choice.kind, choice.persist, choice.folder) == (CacheKind.MEMORY, True, str(tmp_path))
    assert ReadOptions().cache_choice.persist is False
    for bad, says in [
        ({"persist": "yes"}, "persist='yes': must be True or False"),
        ({"persist": 1}, "persist=1: must be True or False"),
        ({"persist": True, "cache": False}, "persist=True: keeps the in-memory cache"),
        ({"persist": True, "cache": str(tmp_path / "c")}, "persist=True: keeps the in-memory"),
    ]:
        with pytest.raises(ValueError) as err:
            ReadOptions(**bad)
        assert str(err.value).startswith(says) and "\n" not in str(err.value)


def test_every_option_is_documented_on_the_class():
    import dataclasses

    doc = ReadOptions.__doc__
    missing = [f.name for f in dataclasses.fields(ReadOptions) if f"\n      {f.name}: " not in doc]
    assert not missing, f"ReadOptions' docstring lacks {missing}"


@pytest.mark.parametrize(
    "prefix", ["gs://bucket/prefix", "gs://bucket/folder/prefix", "ram://bucket/prefix"]
)
def test_a_url_cache_prefix_is_accepted(prefix):
    # The folder check used to run os.path.abspath on it ('/cwd/gs:/bucket') and
    # reject every URL. Object stores have no folders to check, and this machine
    # reaches no bucket: accepting it means nothing was looked up.
    assert ReadOptions(cache=prefix).cache == prefix


@pytest.mark.parametrize("prefix", ["gs://bucket", "gs://bucket/", "gs://"])
def test_a_url_without_a_file_prefix_is_rejected(prefix):
    with pytest.raises(ValueError, match=r"^cache=.*: give a file prefix inside a bucket"):
        ReadOptions(cache=prefix)


@pytest.mark.parametrize("prefix", ["s3://bucket/prefix", "az://container/folder/prefix"])
def test_a_cache_prefix_in_a_store_tensorflow_cannot_write_is_one_line(prefix):
    """The readers read s3:// and az:// (through s3fs, adlfs); TensorFlow's file cache
    cannot write there."""
    with pytest.raises(ValueError) as excinfo:
        ReadOptions(cache=prefix)
    message = str(excinfo.value)
    assert message.startswith(f"cache={prefix!r}: TensorFlow's file cache cannot write ")
    assert "\n" not in message


def test_a_local_prefix_in_a_missing_folder_is_still_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"^cache=.*folder .*missing.* does not exist$"):
        ReadOptions(cache=str(tmp_path / "missing" / "prefix"))


def images_by_filename(ds) -> dict[str, str]:
    """{filename: digest of the decoded pixels} of one epoch of unbatched dict examples."""
    epoch = {}
    for example in ds:
        name = example["image/filename"].numpy().decode()
        assert name not in epoch, f"{name} read twice in one epoch"
        epoch[name] = hashlib.sha256(example["image"].numpy().tobytes()).hexdigest()
    return epoch


def test_a_ram_cache_serves_the_second_epoch_with_the_same_content(
    cats_builder, cats_filenames, tmp_path
):
    # ram:// is TensorFlow's in-memory file system: a URL prefix that really
    # works here, so the whole path of a gs:// cache is exercised end to end.
    prefix = "ram://fast_tfds_test/cats"
    build = tmp_path / "1.0.0"
    shutil.copytree(cats_builder.data_dir, build)
    ds = cats_vs_dogs_fast.as_fast_dataset(
        builder_dir=build,
        cache=prefix,
        batch_size=None,
        as_supervised=False,
        dtype=tf.uint8,
    )
    first = images_by_filename(ds)
    written = tf.io.gfile.glob(prefix + "*.index")
    assert written, "the first epoch wrote no cache under " + prefix
    # Without its shards, the dataset can only come from the cache.
    for shard in build.glob("*.tfrecord-*"):
        shard.unlink()
    second = images_by_filename(ds)
    assert sorted(first) == cats_filenames
    assert second == first, "the cached epoch differs from the decoded one"
