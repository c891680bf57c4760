"""The TFDS internals this project relies on, each named, each failing loudly when TFDS changes it.

TFDS is pinned (setup.py), but a new pin must not break a build quietly: a
renamed hook is simply never called (the shard policy would be lost without an
error), a renamed field fails deep inside a build. Each test here names one
private or semi-private TFDS API, the project code that uses it, and what
changed, so that upgrading TFDS starts from a list of what to adapt.

`test_every_private_tfds_use_is_named` keeps the list complete: it scans the
project's modules for imports from `tensorflow_datasets.core`, `tfds.core.utils`
attributes and overridden `_private` builder methods, and fails on one that no
test here names.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_datasets.core import example_parser, split_builder, writer
from tensorflow_datasets.core.download import download_manager, downloader, extractor
from tensorflow_datasets.core.download import resource as resource_lib
from tensorflow_datasets.core.download import util as download_util
from tensorflow_datasets.core.utils import shard_utils

import cats_vs_dogs_fast
import stanford_dogs_tfrecord
from fast_tfds.building import FastImageBuilder, archives, shards
from tests.helpers import REPO, project_modules

# Every TFDS internal a test below checks: what the scan of the project may find.
NAMED = {
    # Builder hooks TFDS calls on our classes (overridden methods).
    "_generate_splits",
    "_process_pipeline_result",
    "_checksums_path",
    # TFDS's documented hooks: public in the docs, underscored in the code.
    "_info",
    "_split_generators",
    "_generate_examples",
    # Modules and names imported from tensorflow_datasets.core.
    "tensorflow_datasets.core.example_parser",
    "tensorflow_datasets.core.utils.shard_utils",
    "tensorflow_datasets.core.utils.shard_utils.ShardConfig",
    "tensorflow_datasets.core.utils.shard_utils.FileInstruction",
    "tensorflow_datasets.core.download.download_manager.NonMatchingChecksumError",
    "tensorflow_datasets.core.utils.classproperty",
    "tensorflow_datasets.core.download.resource",
    "tensorflow_datasets.core.download.util",
    "tensorflow_datasets.core.file_adapters",
    "tensorflow_datasets.core.constants",
}
TFDS_HOOKS = ("_info", "_split_generators", "_generate_examples")


def changed(api: str, used_by: str, detail: str) -> str:
    return (
        f"TFDS {tfds.__version__} changed {api}: {detail}. The project relies on it in "
        f"{used_by}; adapt that code (and this test) to the new TFDS."
    )


def parameters(function) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]


def source(function) -> str:
    return inspect.getsource(function)


# -- builder hooks ---------------------------------------------------------------


def test_generate_splits_is_where_tfds_takes_the_shard_config():
    used_by = "fast_tfds/building/builder.py FastImageBuilder._generate_splits (shard policy)"
    api = "GeneratorBasedBuilder._generate_splits(dl_manager, download_config)"
    base = tfds.core.GeneratorBasedBuilder
    assert hasattr(base, "_generate_splits"), changed(api, used_by, "the method is gone")
    assert parameters(base._generate_splits) == ["dl_manager", "download_config"], changed(
        api, used_by, f"its parameters are now {parameters(base._generate_splits)}"
    )
    assert parameters(FastImageBuilder._generate_splits) == parameters(base._generate_splits)
    calls = re.search(
        r"self\._generate_splits\(\s*dl_manager,\s*download_config\s*\)",
        source(base._download_and_prepare),
    )
    assert calls, changed(api, used_by, "_download_and_prepare no longer calls it")
    assert "download_config.get_shard_config()" in source(base._generate_splits), changed(
        api, used_by, "it no longer asks the download config for the ShardConfig"
    )


def test_process_pipeline_result_is_called_after_a_beam_pipeline():
    used_by = (
        "fast_tfds/building/builder.py FastImageBuilder._process_pipeline_result (Beam counters)"
    )
    api = "DatasetBuilder._process_pipeline_result(pipeline_result)"
    base = tfds.core.GeneratorBasedBuilder
    assert hasattr(base, "_process_pipeline_result"), changed(api, used_by, "the hook is gone")
    assert parameters(base._process_pipeline_result) == ["pipeline_result"], changed(
        api, used_by, f"its parameters are now {parameters(base._process_pipeline_result)}"
    )
    assert parameters(FastImageBuilder._process_pipeline_result) == ["pipeline_result"]
    assert "self._process_pipeline_result(pipeline_result=" in source(base._generate_splits), (
        changed(api, used_by, "_generate_splits no longer calls it")
    )


@pytest.mark.parametrize("hook", TFDS_HOOKS)
def test_the_documented_builder_hooks_keep_their_names(hook):
    # `_split_generators(dl_manager)` and friends are TFDS's documented way to
    # write a builder, but they are underscored, so check them with the others.
    base = getattr(tfds.core.GeneratorBasedBuilder, hook, None)
    assert base is not None, changed(f"GeneratorBasedBuilder.{hook}", "both builders", "gone")
    if hook == "_generate_examples":
        return  # Ours are called by our own _split_generators, with our own parameters.
    for builder in (cats_vs_dogs_fast.Builder, stanford_dogs_tfrecord.Builder):
        assert parameters(getattr(builder, hook)) == parameters(base), changed(
            f"GeneratorBasedBuilder.{hook}{inspect.signature(base)}",
            f"{builder.__module__}.Builder.{hook}",
            "its parameters differ from ours",
        )


def test_max_examples_per_split_takes_only_what_it_needs_from_the_generator():
    # stanford_dogs_tfrecord reads each image when its generator is asked for
    # it, so --max_examples_per_split 5 reads 5 (plus the thread pool's window).
    api = "SplitBuilder: --max_examples_per_split as itertools.islice of the split generator"
    used_by = "stanford_dogs_tfrecord's split generators (read images lazily)"
    assert re.search(r"itertools\.islice\(\s*generator", source(split_builder.SplitBuilder)), (
        changed(api, used_by, "the generator is no longer cut lazily")
    )


# -- shards ----------------------------------------------------------------------


def test_shard_config_is_the_frozen_dataclass_we_extend():
    used_by = "fast_tfds/building/shards.py AtLeastShards"
    api = "tensorflow_datasets.core.utils.shard_utils.ShardConfig"
    config = shard_utils.ShardConfig
    assert dataclasses.is_dataclass(config), changed(api, used_by, "no longer a dataclass")
    assert config.__dataclass_params__.frozen, changed(api, used_by, "no longer frozen")
    fields = {f.name for f in dataclasses.fields(config)}
    assert {"num_shards", "min_shard_size", "max_shard_size"} <= fields, changed(
        api, used_by, f"its fields are now {sorted(fields)}"
    )
    size_rule = ["total_size", "num_examples", "uses_precise_sharding"]
    for method in ("calculate_number_shards", "get_number_shards"):
        assert parameters(getattr(config, method)) == size_rule, changed(
            f"{api}.{method}", used_by, f"parameters {parameters(getattr(config, method))}"
        )
        assert parameters(getattr(shards.AtLeastShards, method)) == size_rule
    by_size = config.calculate_number_shards(64 << 20, 10_000, True)
    assert isinstance(by_size, int) and by_size >= 1, changed(
        f"{api}.calculate_number_shards", used_by, f"it returned {by_size!r}"
    )
    assert re.search(r"\.get_number_shards\(", inspect.getsource(writer)), changed(
        f"{api}.get_number_shards", used_by, "the writer no longer asks the ShardConfig"
    )


def test_download_config_can_be_copied_field_by_field():
    used_by = "fast_tfds/building/shards.py AtLeastShardsDownloadConfig.from_config"
    api = "tfds.download.DownloadConfig"
    config_cls = tfds.download.DownloadConfig
    assert dataclasses.is_dataclass(config_cls), changed(api, used_by, "no longer a dataclass")
    not_in_init = [f.name for f in dataclasses.fields(config_cls) if not f.init]
    assert not not_in_init, changed(api, used_by, f"fields outside __init__: {not_in_init}")
    fields = {f.name for f in dataclasses.fields(config_cls)}
    read = {"num_shards", "min_shard_size", "max_shard_size", "beam_runner", "beam_options"}
    assert read <= fields, changed(api, used_by, f"missing fields {sorted(read - fields)}")
    assert parameters(config_cls.get_shard_config) == [], changed(
        f"{api}.get_shard_config", used_by, "it takes parameters now"
    )
    given = config_cls(
        manual_dir="/archives", max_examples_per_split=5, num_shards=3, min_shard_size=7
    )
    copy = shards.AtLeastShardsDownloadConfig.from_config(given, min_num_shards=9)
    for field in dataclasses.fields(config_cls):
        assert getattr(copy, field.name) == getattr(given, field.name), field.name
    assert copy.get_shard_config().num_shards == 3


# -- checksums and sources --------------------------------------------------------


def test_checksums_path_is_a_classproperty_tfds_reads_url_infos_from():
    used_by = "fast_tfds/building/builder.py FastImageBuilder._checksums_path (checksums/*.tsv)"
    api = "DatasetBuilder._checksums_path (a classproperty read by url_infos)"
    assert hasattr(tfds.core.utils, "classproperty"), changed(
        "tfds.core.utils.classproperty", used_by, "gone"
    )
    declared = inspect.getattr_static(tfds.core.DatasetBuilder, "_checksums_path", None)
    assert isinstance(declared, tfds.core.utils.classproperty), changed(
        api, used_by, f"it is now {type(declared).__name__}"
    )
    for builder in (cats_vs_dogs_fast.Builder, stanford_dogs_tfrecord.Builder):
        registered = {
            line.split("\t")[0]
            for line in (REPO / "checksums" / f"{builder.name}.tsv").read_text().splitlines()
            if line.strip()
        }
        assert set(builder.url_infos or {}) == registered, changed(
            api, used_by, f"{builder.name}.url_infos no longer come from our checksums file"
        )


def test_non_matching_checksum_error_is_what_the_download_manager_raises():
    used_by = "fast_tfds/building/archive_sources.py source_path (a clear error on a bad download)"
    api = "tensorflow_datasets.core.download.download_manager.NonMatchingChecksumError"
    error = getattr(download_manager, "NonMatchingChecksumError", None)
    assert isinstance(error, type) and issubclass(error, Exception), changed(api, used_by, "gone")
    assert "raise NonMatchingChecksumError(" in inspect.getsource(download_manager), changed(
        api, used_by, "the download manager raises something else on a wrong checksum"
    )


def test_download_folder_names_are_where_the_download_manager_looks():
    used_by = (
        "fast_tfds/building/archive_sources.py _in_download_cache (an archive already downloaded "
        "is used offline, without the URL check)"
    )
    api = "tensorflow_datasets.core.download.resource get_dl_fname / is_locally_cached"
    for name, wanted in (("get_dl_fname", ["url", "checksum"]), ("is_locally_cached", ["path"])):
        function = getattr(resource_lib, name, None)
        assert callable(function), changed(api, used_by, f"{name} is gone")
        assert parameters(function) == wanted, changed(api, used_by, f"{name}'s parameters")
    manager_source = inspect.getsource(download_manager)
    for call in ("resource_lib.get_dl_fname(", "resource_lib.is_locally_cached("):
        assert call in manager_source, changed(
            api, used_by, f"the download manager no longer finds its downloads with {call}...)"
        )


def test_download_error_is_what_the_downloader_raises():
    used_by = "fast_tfds/building/archive_sources.py source_path (one line for a failed download)"
    api = "tensorflow_datasets.core.download.util.DownloadError"
    error = getattr(download_util, "DownloadError", None)
    assert isinstance(error, type) and issubclass(error, Exception), changed(api, used_by, "gone")
    assert "DownloadError(" in inspect.getsource(downloader), changed(
        api, used_by, "the downloader raises something else for a failed download"
    )


def test_file_formats_are_the_enum_the_loader_and_reader_check():
    used_by = (
        "fast_tfds/loader/array_records.py (ArrayRecord files), fast_tfds/read/records.py "
        "(a one-line error for an ArrayRecord-only build), fast_tfds/building/builder.py"
    )
    api = "tensorflow_datasets.core.file_adapters.FileFormat"
    from tensorflow_datasets.core import file_adapters

    formats = getattr(file_adapters, "FileFormat", None)
    assert formats is not None, changed(api, used_by, "gone")
    for name, value in (("TFRECORD", "tfrecord"), ("ARRAY_RECORD", "array_record")):
        member = getattr(formats, name, None)
        assert member is not None, changed(api, used_by, f"{name} is gone")
        assert formats.from_value(value) is member, changed(api, used_by, f"from_value({value!r})")


def test_manual_dir_without_one_raises_what_source_path_catches(tmp_path):
    used_by = "fast_tfds/building/archive_sources.py source_path (no manual dir: download)"
    api = "DownloadManager.manual_dir without a manual dir"
    manager = tfds.download.DownloadManager(
        download_dir=tmp_path, manual_dir=None, manual_dir_instructions="x"
    )
    try:
        manager.manual_dir  # noqa: B018
    except (AssertionError, ValueError):
        pass
    else:
        raise AssertionError(changed(api, used_by, "it no longer raises AssertionError"))


def test_archive_member_names_are_filtered_as_tfds_does():
    used_by = "fast_tfds/building/archives.py normpath (a copy of TFDS's private _normpath)"
    api = "tensorflow_datasets.core.download.extractor._normpath"
    theirs = getattr(extractor, "_normpath", None)
    assert theirs is not None, changed(api, used_by, "gone: keep our copy, drop this test")
    names = [
        "PetImages/Cat/1.jpg",
        "a/./b/../c.jpg",
        ".hidden",
        "dir/.DS_Store",
        "/abs/path.jpg",
        "../escape.jpg",
        "backup.jpg~",
        "Images/n02085620-Chihuahua/n02085620_10074.jpg",
    ]
    differ = [n for n in names if archives.normpath(n) != theirs(n)]
    assert not differ, changed(api, used_by, f"it now treats {differ} differently from ours")


# -- reading ---------------------------------------------------------------------


def test_example_parser_parses_what_tfds_serializes():
    used_by = "fast_tfds/read/decoding.py make_decoder (via parsing.make_parser)"
    api = "tensorflow_datasets.core.example_parser.ExampleParser(example_specs).parse_example"
    parser_cls = getattr(example_parser, "ExampleParser", None)
    assert parser_cls is not None, changed(api, used_by, "gone")
    assert parameters(parser_cls.__init__) == ["example_specs"], changed(
        api, used_by, f"its constructor takes {parameters(parser_cls.__init__)}"
    )
    features = tfds.features.FeaturesDict(
        {"label": tfds.features.ClassLabel(num_classes=3), "image/filename": tfds.features.Text()}
    )
    serialized = features.serialize_example({"label": 2, "image/filename": "a.jpg"})
    parsed = parser_cls(features.get_serialized_info()).parse_example(tf.constant(serialized))
    assert int(features["label"].decode_example(parsed["label"])) == 2, changed(
        api, used_by, f"it parsed {parsed!r}"
    )


def test_serialized_info_says_which_features_a_block_parse_can_take():
    used_by = "fast_tfds/read/parsing.py make_batch_parser"
    api = "FeatureConnector.get_serialized_info() TensorInfo fields and decode_batch_example"
    features = tfds.features.FeaturesDict(
        {
            "image": tfds.features.Image(shape=(4, 4, 3), encoding_format="jpeg"),
            "label": tfds.features.ClassLabel(num_classes=3),
            "boxes": tfds.features.Sequence({"bbox": tfds.features.BBoxFeature()}),
        }
    )
    info = features.get_serialized_info()
    for key, dtype in (("image", tf.string), ("label", tf.int64)):
        fixed = info[key]
        assert isinstance(fixed, tfds.features.TensorInfo), changed(api, used_by, f"{fixed!r}")
        assert (fixed.shape, fixed.tf_dtype, fixed.sequence_rank) == ((), dtype, 0), changed(
            api, used_by, f"{key} is serialized as {fixed!r}"
        )
    assert isinstance(info["boxes"], dict), changed(api, used_by, f"boxes: {info['boxes']!r}")
    labels = features["label"].decode_batch_example(tf.constant([2, 0], tf.int64))
    assert labels.numpy().tolist() == [2, 0], changed(api, used_by, f"it gave {labels!r}")


def test_split_slices_give_file_instructions_with_filename_skip_and_take():
    used_by = "fast_tfds/read/records.py file_instructions, cache/tf_file_cache.py cache_prefix"
    api = "SplitInfo/SubSplitInfo.file_instructions (shard_utils.FileInstruction)"
    fields = {f.name for f in dataclasses.fields(shard_utils.FileInstruction)}
    assert {"filename", "skip", "take"} <= fields, changed(api, used_by, f"fields {fields}")
    template = tfds.core.ShardedFileTemplate(
        data_dir="/data", dataset_name="d", split="train", filetype_suffix="tfrecord"
    )
    splits = tfds.core.SplitDict(
        [
            tfds.core.SplitInfo(
                name="train", shard_lengths=[2, 3], num_bytes=0, filename_template=template
            )
        ]
    )
    got = [
        (os.path.basename(fi.filename), fi.skip, fi.take)
        for fi in splits["train[1:4]"].file_instructions
    ]
    # Examples 1..3 of shards of 2 and 3: the second of shard 0, the first two of shard 1.
    shard_names = ["d-train.tfrecord-00000-of-00002", "d-train.tfrecord-00001-of-00002"]
    assert got == [(shard_names[0], 1, 1), (shard_names[1], 0, 2)], changed(
        api, used_by, f"got {got}"
    )


def test_the_tfds_command_line_runs_as_a_module():
    used_by = "fast_tfds/cli/demo.py tfds_build and the tests (`python -m ...cli.main build`)"
    api = "tensorflow_datasets.scripts.cli.main"
    assert importlib.util.find_spec(api) is not None, changed(api, used_by, "gone")


def test_the_default_data_dir_is_the_constant_tfds_builds_into(tmp_path):
    # core/commands.py leaves `--data_dir` out of a suggested `tfds build`
    # command when the folder is TFDS's default, read from this constant.
    used_by = "fast_tfds/core/commands.py _default_data_dir"
    api = "tensorflow_datasets.core.constants.DATA_DIR"
    code = (
        "from tensorflow_datasets.core import constants; "
        "from tensorflow_datasets.core.utils import file_utils; "
        "print(constants.DATA_DIR); print([str(d) for d in file_utils.list_data_dirs()])"
    )
    env = {**os.environ, "TFDS_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    constant, data_dirs = done.stdout.strip().splitlines()[-2:]
    assert constant == str(tmp_path), changed(api, used_by, f"TFDS_DATA_DIR gave {constant}")
    assert str(tmp_path) in data_dirs, changed(api, used_by, f"not looked up: {data_dirs}")


# -- the list is complete ----------------------------------------------------------


def private_tfds_uses() -> dict[str, set[str]]:
    """{TFDS internal: project modules using it}, found by reading the project's code."""
    found: dict[str, set[str]] = {}
    tfds_hooks = {
        name for name in dir(tfds.core.GeneratorBasedBuilder) if re.fullmatch(r"_[a-z]\w*", name)
    }
    for module, path in project_modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "tensorflow_datasets.core"
            ):
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Attribute):
                chain = ast.unparse(node)
                if chain.startswith("tfds.core.utils."):
                    parts = chain.split(".")
                    names = ["tensorflow_datasets.core.utils." + ".".join(parts[3:])]
            elif isinstance(node, ast.ClassDef):
                names = [
                    item.name
                    for item in node.body
                    if isinstance(item, ast.FunctionDef) and item.name in tfds_hooks
                ]
            for name in names:
                found.setdefault(name, set()).add(module)
    return found


def test_every_private_tfds_use_is_named():
    found = private_tfds_uses()
    assert "_generate_splits" in found, "the scan should find the override in build/builder.py"
    unnamed = {name: sorted(modules) for name, modules in found.items() if name not in NAMED}
    assert not unnamed, (
        "TFDS internals used but not checked here; add a test that names each "
        f"(and add it to NAMED): {unnamed}"
    )
