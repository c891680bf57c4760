"""Finding a dataset's builder, and building the dataset when it is missing and allowed.

Both back ends start here: the tf.data reader reads the TFRecord files of a
build, the Grain loader its ArrayRecord files (`file_format`). Every error is
one line that starts with the argument at fault, and a command it suggests
works as printed from any folder (see `fast_tfds.core.commands`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import tensorflow_datasets as tfds
from etils import epath

from fast_tfds.core.commands import absolute_path, tfds_build_command


class DatasetNotBuilt(ValueError):
    """The dataset is not in the data dir and building it was not asked for."""


def load_builder(
    name: str,
    *,
    data_dir: str | os.PathLike | None = None,
    config: str | None = None,
    builder_dir: str | os.PathLike | None = None,
    download_and_prepare: bool = True,
    download_config: tfds.download.DownloadConfig | None = None,
    file_format: str | None = None,
    copy_metadata: Callable[[str], str | None] | None = None,
) -> tfds.core.DatasetBuilder:
    """The builder for `name`/`config`, built first when asked to and needed.

    Args:
      name: a registered dataset name (its package imported), e.g. 'cats_vs_dogs_fast'.
      data_dir: TFDS data dir (default: TFDS's own).
      config: a config name; None for the dataset's default.
      builder_dir: a built version folder to read instead (local, gs://, s3://, az://).
      download_and_prepare: build the dataset if it is not built yet; if False,
        a missing dataset raises `DatasetNotBuilt` with the command that builds it.
      download_config: passed to the build, e.g. with a manual_dir.
      file_format: what a build writes ('array_record' for the Grain loader);
        None for TFDS's default (TFRecord).
      copy_metadata: how a version folder in an object store is read (the readers pass
        `fast_tfds.cache.remote.copies.copy_metadata`; `core` imports nothing of
        `cache`): its metadata copied to a local folder, which it gives, or None where
        TFDS reads the folder itself; FileNotFoundError where the folder holds no build.
    """
    check_readable_location("data_dir", data_dir)
    check_readable_location("builder_dir", builder_dir)
    folder = version_folder(name, data_dir=data_dir, config=config, builder_dir=builder_dir)

    def not_in_store(why: Exception) -> DatasetNotBuilt:
        """The one line for a version folder in an object store that holds no build (or
        half of one: its metadata is uploaded last). A build is read from a store, never
        made there: the command builds it locally, to be copied there."""
        if builder_dir is not None:
            return DatasetNotBuilt(
                f"builder_dir={os.fspath(builder_dir)!r}: no build there, or not published "
                f"yet ({why})"
            )
        local = tfds.builder(name, config=None if config is None else str(config))
        what = local.info.full_name
        root = folder[: -len(what)].rstrip("/")
        command = build_command(local, download_config, file_format)
        copy = (
            f"run `{command}`, then `fast-tfds publish {local.data_dir} {root}` (a build in an "
            f"object store is read, never made there: {why})"
        )
        if not download_and_prepare:
            return DatasetNotBuilt(
                f"download_and_prepare=False: {what} is not built in {root}; {copy}"
            )
        return DatasetNotBuilt(
            f"download_and_prepare=True: {what} is not built in {root}, or not published "
            f"yet; {copy}"
        )

    if copy_metadata is not None and folder is not None and "://" in folder:
        try:
            local = copy_metadata(folder)
        except FileNotFoundError as error:
            raise not_in_store(error) from None
        if local is not None:
            builder = tfds.builder_from_directory(local)
            builder.info.update_data_dir(folder)  # the shards are read from the store
            return builder
    if builder_dir is not None:
        path = os.fspath(builder_dir)
        if not epath.Path(path).exists():
            raise ValueError(f"builder_dir={path!r}: folder does not exist")
        return tfds.builder_from_directory(path)
    known_configs = config_names(name)
    if config is not None and known_configs and str(config) not in known_configs:
        raise ValueError(
            f"config={config!r}: {name} has no such config; choose one of {sorted(known_configs)}"
        )
    builder = tfds.builder(name, config=None if config is None else str(config), data_dir=data_dir)
    if builder.is_prepared():
        return builder
    if folder is not None and "://" in folder:  # gs://, which TFDS reads itself
        raise not_in_store(FileNotFoundError(f"no {folder}/dataset_info.json"))
    if not download_and_prepare:
        raise DatasetNotBuilt(
            f"download_and_prepare=False: {builder.info.full_name} is not built in "
            f"{builder.data_dir_root}; run `{build_command(builder, download_config, file_format)}`"
            " or pass download_and_prepare=True"
        )
    builder.download_and_prepare(download_config=download_config, file_format=file_format)
    return builder


def version_folder(
    name: str,
    *,
    data_dir: str | os.PathLike | None = None,
    config: str | None = None,
    builder_dir: str | os.PathLike | None = None,
) -> str | None:
    """The version folder (data_dir/name/config/version) that `load_builder` reads with
    these arguments, from the registered class alone (nothing read); None where TFDS
    would search for it (no data_dir) or the arguments are not simple ones (the caller
    then does without it: `load_builder` says what is wrong with them)."""
    if builder_dir is not None:
        return os.fspath(builder_dir).rstrip("/")
    if data_dir is None or not isinstance(name, str) or "/" in name or ":" in name:
        return None
    try:
        cls = tfds.builder_cls(name)
    except tfds.core.registered.DatasetNotFoundError:
        return None
    configs = {c.name: c for c in (cls.BUILDER_CONFIGS or [])}
    if config is None and configs:
        default = cls.DEFAULT_BUILDER_CONFIG_NAME
        chosen = configs.get(default) if default else cls.BUILDER_CONFIGS[0]
    else:
        chosen = configs.get(str(config)) if config is not None else None
    if (config is not None or configs) and chosen is None:
        return None
    version = (chosen.version if chosen is not None else None) or cls.VERSION
    parts = [os.fspath(data_dir).rstrip("/"), name]
    if chosen is not None:
        parts.append(chosen.name)
    return "/".join([*parts, str(version)])


# Other names of the stores read here, refused in one line naming the url to pass:
# Hadoop's for S3 (s3a://, s3n://), which no client here reads (the readers read s3://
# through s3fs, `fast_tfds.cache.remote`; TensorFlow's own S3 file system left the core in
# 2.6 for tensorflow-io, which does not load on TensorFlow 2.18+); and ABFS's for Azure
# Blob Storage (abfs://, abfss://: Hadoop's, Databricks' and adlfs's other name). adlfs
# would read those, but one name per object keeps one persistent-cache key per object (a
# key holds the url) and one url in every message and publish, and ABFS's usual form
# names the account in the host (CONTAINER@ACCOUNT.dfs.core.windows.net), which an az://
# url leaves to the credentials, as Azure's own tools do.
UNREADABLE_SCHEMES = ("s3a", "s3n", "abfs", "abfss")


def store_name(url: str) -> tuple[str, str] | None:
    """(the url to pass instead, what `url`'s scheme is) for a url under another name of
    a store read here (`UNREADABLE_SCHEMES`); else None."""
    scheme, found, rest = url.partition("://")
    scheme = scheme.lower()
    if not found or scheme not in UNREADABLE_SCHEMES:
        return None
    if scheme.startswith("s3"):
        return f"s3://{rest}", f"{scheme}:// is Hadoop's name for S3"
    where, _, path = rest.partition("/")
    container, _, host = where.partition("@")
    account = host.split(".", 1)[0] or "ACCOUNT"
    return f"az://{container}/{path}", (
        f"{scheme}:// is ABFS's name for Azure Blob Storage, which is read here as az:// "
        f"(through adlfs: pip install 'fast-image-tfds[azure]'; the account comes with the "
        f"credentials, e.g. AZURE_STORAGE_ACCOUNT_NAME={account})"
    )


def check_readable_location(argument: str, path: str | os.PathLike | None) -> None:
    """A one-line ValueError for a data_dir or builder_dir that no back end can read."""
    if path is None:
        return
    text = os.fspath(path)
    other = store_name(text)
    if other is None:
        return
    url, said = other
    if url.startswith("az://"):
        raise ValueError(f"{argument}={text!r}: {said}; pass it as {argument}={url!r}")
    local = "~/tensorflow_datasets"
    if argument == "builder_dir":  # a version folder: keep its name/config/version
        local += "/" + "/".join(text.rstrip("/").split("/")[-3:])
    raise ValueError(
        f"{argument}={text!r}: {said}, which nothing here reads; pass it as {argument}="
        f"{url!r} (read through s3fs: pip install 'fast-image-tfds[s3]') or copy it to a "
        f"local folder (`aws s3 sync {url} {local}`)"
    )


def name_and_config(name: str, config: str | None) -> tuple[str, str | None]:
    """(dataset, config) of `name` written as TFDS writes it ('cats_vs_dogs_fast/224',
    as `tfds.load` takes it) and `config`; a one-line ValueError where the two name
    different configs, or the name asks for a version (a data dir holds one per config).
    The front doors split a name here first: the dataset's hook, its version folder and
    `load_builder` all take the dataset's name alone."""
    if not isinstance(name, str) or ("/" not in name and ":" not in name):
        return name, config
    try:
        dataset, parts = tfds.core.naming.parse_builder_name_kwargs(name)
    except ValueError:
        raise ValueError(
            f"name={name!r}: not a dataset name; write 'name' or 'name/config'"
        ) from None
    if "version" in parts:
        raise ValueError(
            f"name={name!r}: a version cannot be asked for; drop ':{parts['version']}' (or "
            "pass that version's folder as builder_dir=)"
        )
    named = parts.get("config")
    if named is not None and config is not None and str(config) != named:
        raise ValueError(f"name={name!r}, config={config!r}: two configs; give one")
    return str(dataset), named if config is None else config


def config_names(name: str) -> set[str]:
    """The names of the configs of registered dataset `name` (empty: it has none)."""
    try:
        cls = tfds.builder_cls(name)
    except tfds.core.registered.DatasetNotFoundError:
        raise ValueError(
            f"name={name!r}: no dataset of that name is registered in this process; import "
            "the package that defines it first (e.g. `import cats_vs_dogs_fast`)"
        ) from None
    return {c.name for c in (cls.BUILDER_CONFIGS or [])}


def build_command(
    builder: tfds.core.DatasetBuilder,
    download_config: tfds.download.DownloadConfig | None = None,
    file_format: str | None = None,
) -> str:
    """The `tfds build` command that builds what `builder` is missing, as a user types it."""
    options = []
    if builder.builder_config is not None:
        # Without --config, `tfds build` builds every config.
        options += ["--config", builder.builder_config.name]
    if file_format is not None:
        options += ["--file_format", str(getattr(file_format, "value", file_format))]
    manual_dir = getattr(download_config, "manual_dir", None)
    if manual_dir:
        options += ["--manual_dir", absolute_path(manual_dir)]
    return tfds_build_command(
        builder.name,
        module=type(builder).__module__,
        data_dir=builder.data_dir_root,
        options=tuple(options),
    )
