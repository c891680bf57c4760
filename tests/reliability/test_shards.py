"""A damaged build: the reader names the bad shard (never a hang, never a silent short
epoch), and `fast-tfds verify` lists every problem, one line each."""

from __future__ import annotations

import faulthandler
import io
import shutil
from pathlib import Path

import pytest
import tensorflow as tf

import cats_vs_dogs_fast
from fast_tfds import cli
from fast_tfds.cli import verify


@pytest.fixture
def build_copy(cats_builder, tmp_path) -> Path:
    """A copy of the built 224 version folder, free to damage."""
    folder = tmp_path / "cats_vs_dogs_fast" / "224" / "1.0.0"
    shutil.copytree(cats_builder.data_dir, folder)
    return folder


def shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("cats_vs_dogs_fast-train.tfrecord-*"))


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40  # inside a record's image bytes
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def read_all(folder: Path, **options) -> int:
    ds = cats_vs_dogs_fast.as_fast_dataset(builder_dir=folder, cache=False, **options)
    return sum(int(images.shape[0]) for images, _ in ds)


@pytest.mark.parametrize("damage", [flip_a_byte, truncate, Path.unlink])
def test_the_reader_names_the_damaged_shard(build_copy, cats_filenames, damage):
    bad = shards(build_copy)[3]
    damage(bad)
    # A hang would block the suite: end the process with a traceback instead.
    faulthandler.dump_traceback_later(120, exit=True)
    try:
        with pytest.raises(tf.errors.OpError) as excinfo:
            read_all(build_copy)
    finally:
        faulthandler.cancel_dump_traceback_later()
    message = excinfo.value.message
    assert f"shard {bad} gave " in message, message
    assert f"fast-tfds verify {build_copy}" in message and "--overwrite" in message


def test_an_intact_copy_and_slices_that_avoid_the_damage_read_completely(
    build_copy, cats_filenames
):
    assert read_all(build_copy) == len(cats_filenames)
    flip_a_byte(shards(build_copy)[-1])
    assert read_all(build_copy, split="train[:50%]") == len(cats_filenames) // 2


def run_verify(*paths) -> tuple[int, list[str]]:
    out = io.StringIO()
    status = verify.print_report(verify.verify_paths(list(paths)), out)
    return status, out.getvalue().splitlines()


def test_verify_passes_a_good_build_through_the_cli(cats_data_dir, capsys):
    with pytest.raises(SystemExit) as excinfo:
        cli.main(["verify", str(cats_data_dir)])
    lines = capsys.readouterr().out.splitlines()
    assert excinfo.value.code == 0, lines
    assert [line for line in lines if line.startswith("OK")] == [
        f"OK      {cats_data_dir}/cats_vs_dogs_fast/224/1.0.0",
        f"OK      {cats_data_dir}/cats_vs_dogs_fast/original/1.0.0",
    ]


def test_verify_reports_each_damaged_shard_on_one_line(build_copy, tmp_path):
    flipped, truncated, missing = (shards(build_copy)[i] for i in (2, 5, 9))
    flip_a_byte(flipped)
    truncate(truncated)
    missing.unlink()
    (build_copy.parent / "incomplete.AB12CD_1.0.0").mkdir()  # what a killed build leaves

    status, lines = run_verify(tmp_path)
    assert status == 1
    problems = [line for line in lines if line.startswith("PROBLEM")]
    assert len(problems) == 3, lines
    assert problems[0].startswith(f"PROBLEM {flipped}: corrupt record at byte ")
    assert "CRC check failed" in problems[0]
    assert problems[1].startswith(f"PROBLEM {truncated}: truncated")
    assert problems[2].startswith(f"PROBLEM {missing}: missing")
    assert any(line.startswith("note") and "incomplete.AB12CD_1.0.0" in line for line in lines)
    # The command works from any folder: it names the package and the data dir.
    rebuild = (
        f"REBUILD {build_copy}: `tfds build cats_vs_dogs_fast --imports cats_vs_dogs_fast "
        f"--data_dir {tmp_path} --config 224 --overwrite`"
    )
    assert rebuild in "\n".join(lines)


def test_verify_counts_records_against_the_metadata(build_copy, tmp_path):
    # A shard swapped for another one is intact but holds the wrong examples.
    first, other = shards(build_copy)[0], shards(build_copy)[1]
    with tf.io.TFRecordWriter(str(first)) as writer:
        for record in tf.data.TFRecordDataset(str(other)).take(3):
            writer.write(record.numpy())
    status, lines = run_verify(build_copy)
    assert status == 1
    assert any(line.startswith(f"PROBLEM {first}: holds 3 records") for line in lines), lines


def test_verify_without_a_dataset_says_so(tmp_path):
    status, lines = run_verify(tmp_path)
    assert status == 2 and lines[-1].startswith("No built dataset")
