"""End-to-end check of an installed copy of the package, run from outside the repository.

    cd "$(mktemp -d)" && python /path/to/repo/scripts/smoke.py

Run this way, the source tree cannot shadow the install: it checks the wheel that
users get (its package data, label lists and checksums included) against whatever
TensorFlow and TFDS versions the environment has. For each dataset it:
1. builds the tiny archives that ship with the package (dummy_data) with the real
   `tfds build`, as TFRecord and as ArrayRecord;
2. reads every example once per epoch with `as_fast_dataset()` (two epochs: the
   cache's fill and a served epoch) and with `as_fast_loader()`;
3. asks for a dataset that is not built, runs the `tfds build` command the error
   message suggests exactly as printed, and reads the result.
Exits non-zero with a message on the first failure.
"""

from __future__ import annotations

import collections
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

DATASETS = ("cats_vs_dogs_fast", "stanford_dogs_tfrecord")
# The `tfds` command of the environment this script runs in.
TFDS = str(Path(sysconfig.get_path("scripts")) / "tfds")


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="fast-tfds-smoke-"))
    os.chdir(work)  # Nothing of the repository is importable from here.
    try:
        for name in DATASETS:
            check_installed(name)
            manual = copy_dummy_archives(name, work / "manual" / name)
            records = work / "records"
            arrays = work / "arrays"
            tfds_build(name, "--manual_dir", manual, "--data_dir", records, "--config", "224")
            tfds_build(
                name, "--manual_dir", manual, "--data_dir", arrays, "--config", "224",
                "--file_format", "array_record",
            )  # fmt: skip
            expected = split_sizes(name, records)
            check_fast_dataset(name, records, expected)
            check_fast_loader(name, arrays, expected)
            check_not_built_advice(name, manual, work / "advice" / name)
            print(f"ok  {name}: {expected}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("smoke: every check passed")


def check_installed(name: str) -> None:
    module = importlib.import_module(name)
    where = Path(module.__file__).resolve()
    if "site-packages" not in where.parts:
        fail(f"{name} was imported from {where}, not from an installed copy")


def copy_dummy_archives(name: str, folder: Path) -> Path:
    """The tiny archives that ship with the package, with the real archives' names."""
    source = Path(importlib.import_module(name).__file__).parent / "dummy_data"
    folder.mkdir(parents=True)
    for archive in source.iterdir():
        shutil.copy(archive, folder / archive.name)
    return folder


def tfds_build(name: str, *args) -> None:
    run([TFDS, "build", name, "--imports", name, *map(str, args)])


def run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        fail(f"`{shlex.join(command)}` exited {done.returncode}:\n{done.stderr[-3000:]}")


def split_sizes(name: str, data_dir: Path) -> dict[str, int]:
    import tensorflow_datasets as tfds

    info = tfds.builder(name, data_dir=os.fspath(data_dir)).info
    return {split: info.splits[split].num_examples for split in info.splits}


def check_fast_dataset(name: str, data_dir: Path, expected: dict[str, int]) -> None:
    module = importlib.import_module(name)
    for split, size in expected.items():
        ds = module.as_fast_dataset(
            split, data_dir=data_dir, download_and_prepare=False, batch_size=4, num_epochs=2,
            as_supervised=False,
        )  # fmt: skip
        names = collections.Counter()
        for batch in ds:
            names.update(batch["image/filename"].numpy().tolist())
            if batch["image"].shape[1:] != (224, 224, 3):
                fail(f"{name} {split}: as_fast_dataset gave images of {batch['image'].shape}")
        if len(names) != size or set(names.values()) != {2}:
            fail(f"{name} {split}: as_fast_dataset read {dict(names)} in 2 epochs of {size}")


def check_fast_loader(name: str, data_dir: Path, expected: dict[str, int]) -> None:
    module = importlib.import_module(name)
    for split, size in expected.items():
        loader = module.as_fast_loader(
            split, data_dir=data_dir, download_and_prepare=False, batch_size=4, seed=0
        )
        images = labels = 0
        for batch_images, batch_labels in loader:
            images += len(batch_images)
            labels += len(batch_labels)
        if images != size or labels != size:
            fail(f"{name} {split}: as_fast_loader read {images} images for {size} examples")


def check_not_built_advice(name: str, manual: Path, data_dir: Path) -> None:
    """The command that the not-built error suggests works as printed, from another folder.

    TFDS looks for manual archives in DATA_DIR/downloads/manual by default, so with
    the archives there the suggested command needs no edits.
    """
    shutil.copytree(manual, data_dir / "downloads" / "manual")
    module = importlib.import_module(name)
    try:
        module.as_fast_dataset("train", data_dir=data_dir, download_and_prepare=False)
    except ValueError as err:
        message = str(err)
    else:
        fail(f"{name}: reading an unbuilt dataset raised nothing")
    commands = re.findall(r"`(tfds build [^`]+)`", message)
    if not commands:
        fail(f"{name}: the not-built error suggests no `tfds build` command: {message}")
    command = shlex.split(commands[0])
    command[0] = TFDS
    run(command)
    check_fast_dataset(name, data_dir, {"train": split_sizes(name, data_dir)["train"]})


def fail(message: str) -> None:
    sys.exit(f"smoke: FAILED: {message}")


if __name__ == "__main__":
    main()
