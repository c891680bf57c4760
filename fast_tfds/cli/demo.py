"""`fast-tfds demo` and `fast-tfds sample`: the whole path, offline, on sample archives.

sample archives -> the real `tfds build` -> as_fast_dataset(), next to the TFDS course
notebook's naive pipeline.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from fast_tfds.quiet import NOISE, QUIET_ENV, quiet_tensorflow

DEFAULT_WORKDIR = Path("fast_tfds_demo")
# What a user wants to see of a build: the manual-dir note, the skip summary,
# where the data went.
# Python logging prints "WARNING:absl:", the tfds CLI "WARNING[builder.py]:".
_LOG_PREFIX = re.compile(r"^.*?(WARNING|INFO)(:absl:|\[[\w.]+\]:)\s*")
_BUILD_SUMMARY = re.compile(
    r"(WARNING|INFO)(:absl:|\[[\w.]+\]:).*(manual dir|kept \d+ images)|^Dataset .* prepared to"
)


def write_samples(manual_dir: Path, args: argparse.Namespace, *, fresh: bool = False) -> set[str]:
    """Writes both datasets' sample archives (sized by `args`) into `manual_dir` unless
    complete ones are there; returns the datasets it wrote."""
    from fast_tfds import samples

    written = set()
    for dataset, size in (
        ("cats_vs_dogs_fast", args.images_per_class),
        ("stanford_dogs_tfrecord", args.dogs_per_breed),
    ):
        if samples.is_complete(dataset, manual_dir) and not fresh:
            print(f"Reusing the {dataset} sample in {manual_dir} (pass --fresh to regenerate).")
            continue
        sample = samples.write(dataset, manual_dir, size, breed_count=args.breeds)
        print(f"  {dataset}: {describe_sample(dataset, sample, args)}")
        written.add(dataset)
    return written


def describe_sample(dataset: str, sample: dict, args: argparse.Namespace) -> str:
    """What a written sample holds, in the terms of the size options: the photos asked
    for, plus the quirk files that every sample has (those that decode are examples)."""
    if dataset == "cats_vs_dogs_fast":
        photos = f"2 classes x {args.images_per_class} photos"
        examples = sample["expected_examples"]
        split_counts = ""
        quirks_kept, quirks_skipped = sample["kept_quirks"], sample["skipped_quirks"]
    else:
        photos = f"{args.breeds} breeds x {args.dogs_per_breed} photos"
        by_split = sample["expected_examples"]
        examples = sum(by_split.values())
        split_counts = " (" + ", ".join(f"{s} {n}" for s, n in by_split.items()) + ")"
        quirks_kept = examples - args.breeds * args.dogs_per_breed
        quirks_skipped = sum(len(members) for members in sample["expected_skips"].values())
    return (
        f"{examples} images that decode{split_counts}: {photos} + {quirks_kept} quirk "
        f"files that decode; {quirks_skipped} quirks that the build skips"
    )


def tfds_build(dataset: str, data_dir: Path, manual_dir: Path, *, overwrite: bool) -> None:
    """Runs the real `tfds build` CLI, as a user would."""
    command = [
        sys.executable,
        "-m",
        "tensorflow_datasets.scripts.cli.main",
        "build",
        dataset,
        "--imports",
        dataset,
        "--data_dir",
        os.fspath(data_dir),
        "--manual_dir",
        os.fspath(manual_dir),
    ]
    if overwrite:
        command.append("--overwrite")
    print("$ tfds " + " ".join(command[3:]))
    env = {**os.environ, **QUIET_ENV}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    output = (done.stdout + done.stderr).splitlines()
    if done.returncode != 0:
        print("\n".join(line for line in output if not NOISE.search(line)), file=sys.stderr)
        raise SystemExit(f"tfds build {dataset} failed with exit code {done.returncode}")
    for line in output:
        if _BUILD_SUMMARY.search(line):
            print("  " + _LOG_PREFIX.sub("", line).strip())


def demo(args: argparse.Namespace) -> None:
    workdir = Path(args.work_dir)
    manual_dir, data_dir = workdir / "manual", workdir / "tensorflow_datasets"
    written = write_samples(manual_dir, args, fresh=args.fresh)
    for dataset in ("cats_vs_dogs_fast", "stanford_dogs_tfrecord"):
        tfds_build(dataset, data_dir, manual_dir, overwrite=dataset in written)

    tf = quiet_tensorflow()
    import tensorflow_datasets as tfds

    import cats_vs_dogs_fast
    from fast_tfds.cli import baseline

    original = tfds.builder("cats_vs_dogs_fast", config="original", data_dir=data_dir)
    skipped = original.info.metadata.get("skipped", {}).get("train", {})
    print(
        f"\nBuilt {original.info.splits['train'].num_examples} examples in "
        f"{original.info.splits['train'].num_shards} shards per config; skipped "
        f"{skipped.get('count', 0)} files: {skipped.get('by_reason', {})}"
    )

    print(
        "\nStreaming (images/s, best of 2 interleaved rounds; this CPU's clock swings, "
        "so compare within a run):"
    )
    naive_files = baseline.shard_files(original)

    def fast(**options):
        return cats_vs_dogs_fast.as_fast_dataset(
            "train", data_dir=data_dir, download_and_prepare=False, **options
        )

    next(iter(fast(cache=False)))  # compile the XLA float conversion before timing
    rates: dict[str, list[float]] = {}
    for _round in range(2):
        rows = [
            (
                "TFDS course notebook's naive pipeline (float32)",
                baseline.naive_pipeline(naive_files),
            )
        ]
        cached = fast(cache=True)
        rows += [
            ("as_fast_dataset() epoch 1: decode + fill the uint8 store", cached),
            ("as_fast_dataset() epoch 2: store, global shuffle", cached),
            ("as_fast_dataset(dtype=tf.uint8, cache=False)", fast(cache=False, dtype=tf.uint8)),
        ]
        for label, ds in rows:
            n, seconds, _ = baseline.time_epoch(ds)
            rates.setdefault(label, []).append(n / seconds)
    naive = max(next(iter(rates.values())))
    for label, values in rates.items():
        print(f"  {label:<58} {max(values):7.0f}  {max(values) / naive:4.1f}x")
    stream_stanford_dogs(data_dir)
    print(
        "\nOn a CPU with few cores the float32 conversion costs a large share of the time; "
        "with an accelerator, stream dtype=tf.uint8 and rescale on the device. "
        "Full figures: python -m benchmarks, in a clone of the repository."
    )


def stream_stanford_dogs(data_dir: Path) -> None:
    import stanford_dogs_tfrecord
    from fast_tfds.cli import baseline

    ds = stanford_dogs_tfrecord.as_fast_dataset(
        "train", data_dir=data_dir, crop_to_box=True, download_and_prepare=False
    )
    first_epoch = baseline.time_epoch(ds)
    second_epoch = baseline.time_epoch(ds)
    print(
        f"  stanford_dogs_tfrecord as_fast_dataset(crop_to_box=True), "
        f"{first_epoch[0]} images: epoch 1 {first_epoch[0] / first_epoch[1]:.0f}, "
        f"epoch 2 (cached crops) {second_epoch[0] / second_epoch[1]:.0f}"
    )


def sample_command(args: argparse.Namespace) -> None:
    write_samples(Path(args.folder), args, fresh=True)


def add_commands(commands) -> dict[str, argparse.ArgumentParser]:
    """Adds `sample DIR` and `demo`; returns their parsers by name: both write samples, of
    the sizes that `check_sample_size` checks."""
    sample = commands.add_parser(
        "sample",
        help="write look-alike source archives into a folder",
        description="Writes look-alike source archives of both datasets into DIR, for "
        "`tfds build ... --manual_dir DIR`.",
    )
    sample.add_argument(
        "folder", metavar="DIR", help="where to write the archives (created if needed)"
    )
    sample.set_defaults(run=sample_command)
    demo_parser = commands.add_parser(
        "demo",
        help="offline end to end: write samples, tfds build them, stream them",
        description="Offline, end to end: writes sample archives, builds them with the "
        "real `tfds build`, and streams them with as_fast_dataset() next to the TFDS course "
        "notebook's naive pipeline.",
    )
    # --work-dir (the spelling of `fast-tfds service`); --workdir, its first spelling,
    # still works but is not shown.
    demo_parser.add_argument(
        "--work-dir",
        default=os.fspath(DEFAULT_WORKDIR),
        help="where the sample archives (manual/) and the built datasets "
        "(tensorflow_datasets/) go, reused by the next run; some 360 MB at the default "
        "sizes (default: %(default)s, in the current folder)",
    )
    demo_parser.add_argument("--workdir", dest="work_dir", help=argparse.SUPPRESS)
    for parser in (sample, demo_parser):
        add_sample_size_options(parser)
    demo_parser.add_argument(
        "--fresh", action="store_true", help="regenerate the sample and rebuild"
    )
    demo_parser.set_defaults(run=demo)
    return {"sample": sample, "demo": demo_parser}


def add_sample_size_options(parser: argparse.ArgumentParser) -> None:
    """--images-per-class, --dogs-per-breed and --breeds: how big the samples are."""
    from fast_tfds.samples import STANFORD_BREEDS

    parser.add_argument(
        "--images-per-class",
        type=int,
        default=2000,
        help="Cats vs Dogs: photos per class, cats and dogs each (default: %(default)s); "
        "each class also gets one file of every quirk of the real archive, 8 that decode "
        "and 3 that the build skips",
    )
    parser.add_argument(
        "--dogs-per-breed",
        type=int,
        default=10,
        help="Stanford Dogs: photos per breed (default: %(default)s); the sample also gets "
        "3 quirk files that decode and 4 quirks that the build skips",
    )
    parser.add_argument(
        "--breeds",
        type=int,
        default=STANFORD_BREEDS,
        help=f"Stanford Dogs: photos of the first N of the {STANFORD_BREEDS} breeds "
        "(default: %(default)s)",
    )


def check_sample_size(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A one-line usage error for sizes the sample writers cannot make."""
    from fast_tfds.samples import STANFORD_BREEDS

    if not 1 <= args.breeds <= STANFORD_BREEDS:
        parser.error(f"--breeds={args.breeds}: must be between 1 and {STANFORD_BREEDS}")
    # Each split needs a photo, and the sample's quirks need 3 ordinary ones.
    if args.dogs_per_breed * args.breeds < 3:
        parser.error(
            f"--dogs-per-breed={args.dogs_per_breed} x --breeds={args.breeds}: "
            "the Stanford Dogs sample needs at least 3 photos"
        )
