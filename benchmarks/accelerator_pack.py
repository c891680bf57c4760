"""What the accelerator benchmark carries to the GPU machine: `bash scripts/device/pack.sh`.

The GPU machine reaches no package registry and has no TensorFlow, so everything the run
reads travels with the working tree, in one folder git ignores (fast_tfds_device/):

- tensorflow_datasets/: the generated look-alike sample (`benchmarks.data`, the benchmark's
  own sample and `tfds build`), both configs, as ArrayRecord files (`tfds convert_format`,
  as the loader rows add them) without the TFRecords the run does not read;
- wheels/: the cp312 manylinux wheels of what the loader needs that the machine lacks
  (grain, array_record, simplejpeg, tensorflow-datasets and their needs), at the versions
  of constraints/lock.txt; a package published as source only (promise) is built into a
  pure-Python wheel here.

The device tool carries at most 64 MiB a call, the repository's own files included: the
pack says what the working tree, the data and the wheels take, and fails over the limit.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks import data, options

DATASET = "cats_vs_dogs_fast"
BUNDLE = Path("fast_tfds_device")
LIMIT = 64 * 2**20  # what one call of the device tool carries: the tree and carried paths
# About 1,000 images in each config: with the wheels and the tree, under the limit with
# room for the tree to grow (the original photos take two thirds of it).
DEFAULT_IMAGES_PER_CLASS = 500
# What the loader imports that the GPU machine's image lacks (its package list, read ahead
# of any run), by their names in constraints/lock.txt.
WHEELS = (
    "grain",
    "array_record",
    "simplejpeg",
    "tensorflow-datasets",
    "tensorflow-metadata",
    "dm-tree",
    "promise",
    "simple-parsing",
    "docstring_parser",
    "immutabledict",
    "toml",
    "termcolor",
    "portpicker",
    "googleapis-common-protos",
    "importlib_resources",
)
SOURCE_ONLY = {"promise"}  # no wheel on PyPI: built here (pure Python)
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
LOCK = data.REPO_ROOT / "constraints" / "lock.txt"


def locked(names=WHEELS, lock: Path = LOCK) -> list[str]:
    """NAME==VERSION of each of `names`, as constraints/lock.txt pins it."""
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        match = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line)
        if match:
            pins[_canonical(match.group(1))] = line.strip()
    missing = [name for name in names if _canonical(name) not in pins]
    if missing:
        raise SystemExit(f"{lock}: no version of {', '.join(missing)}; pin them there first")
    return [pins[_canonical(name)] for name in names]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def fetch_wheels(folder: Path) -> list[Path]:
    """The wheels of WHEELS into `folder` (emptied first): one version of each.

    Two pip commands, not one a package: the published wheels in one download, and the
    source-only packages built in one `pip wheel` (each pip start takes seconds)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    pins = locked()
    built = [pin for pin in pins if _canonical(pin.split("==")[0]) in SOURCE_ONLY]
    published = [pin for pin in pins if pin not in built]
    download = [*pip, "download", "--no-deps", "--only-binary=:all:"]
    download += ["--python-version", "3.12", "--implementation", "cp"]
    download += [f"--platform={p}" for p in PLATFORMS]
    for command, group in (
        ([*download, "-d", os.fspath(folder)], published),
        ([*pip, "wheel", "--no-deps", "-w", os.fspath(folder)], built),
    ):
        if not group:
            continue
        done = subprocess.run([*command, *group], capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["?"])[-1]
            raise SystemExit(f"pip could not fetch {', '.join(group)} for the GPU machine: {last}")
    return sorted(folder.glob("*.whl"))


def copy_data(data_dir: Path, out: Path) -> dict[str, Path]:
    """Each config's build, with ArrayRecord files added (once, in `data_dir`), copied into
    `out` without its TFRecords: {config: its version folder in `out`}."""
    import tensorflow_datasets as tfds

    import cats_vs_dogs_fast  # noqa: F401  (registers the dataset)
    from benchmarks.loaders import add_array_record_files

    shutil.rmtree(out, ignore_errors=True)
    folders = {}
    for config in data.CONFIGS:
        builder = tfds.builder(DATASET, config=config, data_dir=data_dir)
        source = Path(add_array_record_files(builder).data_dir)
        target = out / source.relative_to(Path(data_dir).resolve())
        target.mkdir(parents=True)
        for file in source.iterdir():
            if file.is_file() and ".tfrecord-" not in file.name:
                shutil.copy2(file, target / file.name)
        folders[config] = target
    return folders


def tree_bytes(root: Path = data.REPO_ROOT) -> int:
    """Bytes of what the device tool sends of the checkout: tracked files and untracked
    ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout
    paths = (root / os.fsdecode(p) for p in listed.split(b"\0") if p)
    return sum(p.stat().st_size for p in paths if p.is_file())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def parse_args(argv: list[str] | None, prog: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    options.add_images_per_class(p, DEFAULT_IMAGES_PER_CLASS)
    p.add_argument(
        "--workdir",
        default=os.fspath(data.DEFAULT_WORKDIR),
        help="where the sample is generated and built, and reused (default %(default)s)",
    )
    p.add_argument(
        "--data-dir", help=f"a TFDS data dir with {DATASET} built in both configs instead"
    )
    p.add_argument("--out", default=os.fspath(BUNDLE), help="(default %(default)s)")
    args = p.parse_args(argv)
    options.check_counts(p, args)
    return args


def main(argv: list[str] | None = None, prog: str = "bash scripts/device/pack.sh") -> None:
    args = parse_args(argv, prog)
    from fast_tfds.quiet import quiet_tensorflow

    quiet_tensorflow()
    out = Path(args.out)
    if args.data_dir:
        data_dir = Path(args.data_dir)
    else:
        data_dir = data.sample_data_dir(DATASET, Path(args.workdir), args.images_per_class)
    folders = copy_data(data_dir, out / "tensorflow_datasets")
    wheels = fetch_wheels(out / "wheels")
    sizes = {
        "the working tree": tree_bytes(),
        **{f"data {config}": folder_bytes(folder) for config, folder in folders.items()},
        f"{len(wheels)} wheels": folder_bytes(out / "wheels"),
    }
    total = sum(sizes.values())
    for name, size in sizes.items():
        print(f"  {name:<24}{size / 2**20:8.1f} MiB")
    print(f"  {'together':<24}{total / 2**20:8.1f} MiB of the {LIMIT // 2**20} MiB a call carries")
    if total > LIMIT:
        raise SystemExit(
            f"{out}: {total / 2**20:.1f} MiB with the working tree, over the device tool's "
            f"{LIMIT // 2**20} MiB; pack fewer images (--images-per-class)"
        )
    print(f"Packed {out}: carry it as `{out}` (scripts/device/README.md)")


if __name__ == "__main__":
    main(prog="python -m benchmarks.accelerator_pack")
