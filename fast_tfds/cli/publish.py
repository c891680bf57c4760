"""`fast-tfds publish DATASET_VERSION_DIR URL`: upload a built version folder to an object store.

Uploads the version folder (e.g. ~/tensorflow_datasets/cats_vs_dogs_fast/224/1.0.0, any
file format) into the data dir URL (gs://, s3:// or az://BUCKET/PREFIX) under the same
NAME/CONFIG/VERSION folders, so that readers pass data_dir=URL. The data files go
first, several at a time, each checked against the store's checksum once uploaded;
dataset_info.json goes last, so a reader never opens a half-published build.
Publishing the same build again uploads nothing, and a publish cut short uploads only
what is missing when run again; another build at the URL is refused unless --overwrite.
"""

from __future__ import annotations

import argparse
import sys

from fast_tfds.cli.parsers import documented_command


def add_command(commands) -> None:
    """Adds `publish` to the fast-tfds command-line parser."""
    what = "upload a built version folder to gs://, s3:// or az://, metadata last"
    p = documented_command(commands, "publish", __doc__, what)
    p.add_argument("folder", metavar="DATASET_VERSION_DIR", help="the built version folder")
    p.add_argument(
        "url",
        metavar="URL",
        help="the data dir to publish into: gs://, s3:// or az://BUCKET/PREFIX",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace another build at the URL (its readers see no build until this one is up)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    from fast_tfds.building.publishing import publish

    bar = None

    def progress(size: int, total: int) -> None:
        # A bar of the bytes uploaded, on a terminal only.
        nonlocal bar
        if bar is None:
            from tqdm import tqdm

            bar = tqdm(
                total=total,
                desc="Publishing",
                unit="B",
                unit_scale=True,
                disable=not sys.stderr.isatty(),
            )
        bar.update(size)

    try:
        done = publish(args.folder, args.url, overwrite=args.overwrite, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    removed = f", {len(done.removed)} of another build removed" if done.removed else ""
    print(
        f"{done.url}: {len(done.uploaded)} files uploaded, {len(done.kept)} already there{removed}"
    )
