"""`fast-tfds verify PATH...`: check that built datasets are complete and intact.

For every version folder under each PATH (a data dir, a dataset folder or a
version folder itself, e.g. ~/tensorflow_datasets/cats_vs_dogs_fast/224/1.0.0):
every shard that dataset_info.json lists must be there, in every file format it
lists (TFRecord, and ArrayRecord after `--file_format array_record` or `tfds
convert_format`), every record must pass its TFRecord length and CRC checks
(ArrayRecord: its chunk hashes), and each shard must hold the number of
examples recorded for it. Prints one line per problem and exits 1 if there is
any (2 if there is nothing to verify); the reader stops on such a shard too,
but only when it gets there.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys

from fast_tfds.cli.parsers import documented_command

INFO_FILE = "dataset_info.json"
INCOMPLETE = re.compile(r"^incomplete\.[A-Za-z0-9]+_")


@dataclasses.dataclass
class Report:
    """What was checked under the given paths, and what is wrong."""

    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    checked: list[str] = dataclasses.field(default_factory=list)
    # {version folder: the command that rebuilds it}, for those with problems.
    rebuild: dict[str, str] = dataclasses.field(default_factory=dict)


def verify_paths(paths: list[str | os.PathLike]) -> Report:
    report = Report()
    for path in paths:
        path = os.fspath(path)
        if not os.path.isdir(path):
            report.problems.append(f"{path}: no such folder")
            continue
        for folder, dirs, files in os.walk(path):
            # A build in progress, or one that was killed, writes into
            # incomplete.XXXX_<version>: never read, so noted, not checked.
            leftovers = sorted(d for d in dirs if INCOMPLETE.match(d))
            dirs[:] = sorted(d for d in dirs if not INCOMPLETE.match(d))
            if INFO_FILE in files:
                verify_version_folder(folder, report)
            for name in leftovers:
                report.notes.append(
                    f"{os.path.join(folder, name)}: left by an interrupted build "
                    "(never read; safe to delete once no build is running)"
                )
    return report


def verify_version_folder(folder: str, report: Report) -> None:
    """Checks one built version folder (the one holding dataset_info.json)."""
    from fast_tfds.quiet import quiet_tensorflow

    quiet_tensorflow()
    import tensorflow_datasets as tfds

    report.checked.append(folder)
    problems_before = len(report.problems)
    try:
        info = tfds.builder_from_directory(folder).info
    except Exception as err:  # Any unreadable metadata is a problem to report.
        report.problems.append(f"{os.path.join(folder, INFO_FILE)}: unreadable ({_one_line(err)})")
        return
    formats = sorted(f.file_suffix for f in info.available_file_formats())
    for split_name, split in sorted(info.splits.items()):
        for suffix in formats:
            template = split.filename_template.replace(filetype_suffix=suffix)
            paths = sorted(template.sharded_filepaths(split.num_shards))
            for path, expected in zip(paths, split.shard_lengths, strict=True):
                check = check_array_record_shard if suffix == "array_record" else check_shard
                problem = check(os.fspath(path), expected)
                if problem:
                    report.problems.append(f"{os.fspath(path)}: {problem} [{split_name}]")
    if len(report.problems) > problems_before:
        report.rebuild[folder] = rebuild_command(folder, info)


def rebuild_command(folder: str, info) -> str:
    """The `tfds build` command that rebuilds the version folder `folder` in place."""
    from fast_tfds.core.commands import tfds_build_command

    options = ("--config", info.config_name) if info.config_name else ()
    stored = info.file_format.file_suffix if info.file_format else "tfrecord"
    if stored != "tfrecord":
        options += ("--file_format", stored)
    # <data_dir>/<dataset>[/<config>]/<version>
    data_dir = os.path.dirname(os.path.dirname(os.path.abspath(folder)))
    if info.config_name:
        data_dir = os.path.dirname(data_dir)
    return tfds_build_command(
        info.name, module=info.module_name, data_dir=data_dir, options=(*options, "--overwrite")
    )


def check_shard(path: str, expected: int) -> str | None:
    """None if the shard holds exactly `expected` intact records, else what is wrong."""
    from fast_tfds.quiet import quiet_tensorflow

    tf = quiet_tensorflow()
    if not tf.io.gfile.exists(path):
        return f"missing (dataset_info.json lists {expected} examples in it)"
    count = 0
    try:
        for _ in tf.data.TFRecordDataset(path, buffer_size=1 << 20):
            count += 1
    except tf.errors.DataLossError as err:
        return f"{_tf_reason(err)}, after {count} good records of {expected}"
    except tf.errors.OpError as err:
        return f"unreadable ({_tf_reason(err)})"
    if count != expected:
        return f"holds {count} records, dataset_info.json says {expected}"
    return None


def check_array_record_shard(path: str, expected: int) -> str | None:
    """None if the ArrayRecord shard holds exactly `expected` intact records, else what is wrong."""
    from array_record.python import array_record_module

    if not os.path.exists(path):
        return f"missing (dataset_info.json lists {expected} examples in it)"
    try:
        reader = array_record_module.ArrayRecordReader(path)
        count = reader.num_records()
        # Reading every record checks each chunk's hash; in slices, to bound memory.
        for start in range(0, count, 256):
            reader.read(list(range(start, min(start + 256, count))))
        reader.close()
    except (RuntimeError, ValueError, OSError) as err:  # The library's errors for bad files.
        return f"unreadable or corrupt ArrayRecord ({_one_line(err)})"
    if count != expected:
        return f"holds {count} records, dataset_info.json says {expected}"
    return None


def _tf_reason(err) -> str:
    # TF's message starts with an internal function name: "{{function_node ...}} corrupted
    # record at 99398 [Op:IteratorGetNext]". Keep the part a user can act on.
    message = re.sub(r"\{\{[^}]*\}\}\s*", "", err.message)
    message = re.sub(r"\s*\[Op:[^\]]*\].*$", "", message, flags=re.S)
    message = re.sub(
        r"corrupted record at (\d+)", r"corrupt record at byte \1 (CRC check failed)", message
    )
    message = re.sub(
        r"truncated record at (\d+).*", r"truncated: cut off in the record at byte \1", message
    )
    return _one_line(message)


def _one_line(err) -> str:
    return " ".join(str(err).split())


def print_report(report: Report, out=None) -> int:
    """Prints the report; returns the exit status."""
    out = out or sys.stdout
    for problem in report.problems:
        print(f"PROBLEM {problem}", file=out)
    for note in report.notes:
        print(f"note    {note}", file=out)
    bad = set(report.rebuild)
    for folder in report.checked:
        if folder not in bad:
            print(f"OK      {folder}", file=out)
    for folder, command in report.rebuild.items():
        print(
            f"REBUILD {folder}: `{command}` (add --manual_dir FOLDER if it was built from "
            "local copies of the source archives)",
            file=out,
        )
    if report.problems:
        print(f"{len(report.problems)} problem(s) in {len(report.checked)} dataset(s).", file=out)
        return 1
    if not report.checked:
        print("No built dataset (dataset_info.json) found.", file=out)
        return 2
    print(f"{len(report.checked)} dataset(s) verified: every shard complete.", file=out)
    return 0


def add_command(commands) -> None:
    """Adds `verify` to the fast-tfds command-line parser."""
    what = "check built datasets: every shard present, every record intact, counts right"
    p = documented_command(commands, "verify", __doc__, what)
    p.add_argument("paths", nargs="+", metavar="PATH", help="data dir, dataset or version folder")
    p.set_defaults(run=lambda args: sys.exit(print_report(verify_paths(args.paths))))
