"""Builds that go wrong: killed part-way, hostile archive member names. Real `tfds build`
processes, real archives. (Downloads that go wrong: test_downloads.py.)

A build that is held, killed or interrupted runs in an interpreter of its own (its hold is a
`sitecustomize`, and signals are what is tested); the others (a rerun, a build that fails on
its archive) are forks of a server that has imported TensorFlow (`tests.forks`): what is
checked is what they write, remove and print, not how an interpreter starts."""

from __future__ import annotations

import io
import os
import signal
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
from fast_tfds.building import errors
from fast_tfds.cli import verify
from fast_tfds.samples import cats_vs_dogs as cats_archive
from fast_tfds.samples import photos
from fast_tfds.samples import stanford_dogs as dogs_sample
from tests import forks
from tests.helpers import TFDS_CLI, run_ok
from tests.reliability.held_builds import ENV, HELD, build_command, held_build

# -- an interrupted build ---------------------------------------------------------


def test_a_killed_build_leaves_nothing_that_reads_as_built_and_a_rerun_completes(tmp_path):
    manual_dir, data_dir = tmp_path / "manual", tmp_path / "data"
    counts = cats_archive.write_cats_zip(
        manual_dir / cats_archive.CATS_ZIP_NAME, 20, seed=4, quirks=False, image_size=(320, 240)
    )
    config_dir = data_dir / "cats_vs_dogs_fast" / "original"

    build = held_build(manual_dir, data_dir, tmp_path / "hold")
    # Kill it while it generates examples (TFDS's progress bar says so), held there.
    try:
        seen = build.until(HELD)
    finally:
        build.send_signal(signal.SIGKILL)
        rest = build.communicate(timeout=60)[0]
    seen += rest
    assert "Generating train examples" in seen, seen[-3000:]
    assert build.returncode == -signal.SIGKILL, "the build finished before it was killed"
    # Killed before the shards were written (TFDS logs "Done writing ..." then).
    assert "Done writing" not in seen and "prepared to" not in seen

    # TFDS writes into incomplete.XXXX_1.0.0 and renames it only at the end.
    leftovers = [p.name for p in config_dir.iterdir()]
    assert [n for n in leftovers if n.startswith("incomplete.")], leftovers
    assert not (config_dir / "1.0.0").exists(), leftovers
    builder = tfds.builder("cats_vs_dogs_fast", config="original", data_dir=data_dir)
    assert not builder.is_prepared()
    with pytest.raises(ValueError, match=r"^download_and_prepare=False: .* is not built"):
        cats_vs_dogs_fast.as_fast_dataset(
            data_dir=data_dir, config="original", download_and_prepare=False
        )
    with pytest.raises(AssertionError, match="could not find data"):
        tfds.load("cats_vs_dogs_fast/original", data_dir=data_dir, download=False)

    # The same command again, with the leftover folder still there.
    run_ok(build_command(manual_dir, data_dir), env=ENV, fork=True)
    builder = tfds.builder("cats_vs_dogs_fast", config="original", data_dir=data_dir)
    assert builder.is_prepared()
    assert builder.info.splits["train"].num_examples == counts["expected_examples"]
    ds = tfds.load("cats_vs_dogs_fast/original", split="train", data_dir=data_dir)
    assert sum(1 for _ in ds) == counts["expected_examples"]
    # TFDS leaves the killed build's folder; `fast-tfds verify` points it out.
    report = verify.verify_paths([data_dir])
    assert not report.problems and report.checked == [os.fspath(config_dir / "1.0.0")]
    assert [note for note in report.notes if "incomplete." in note], report.notes


def test_ctrl_c_during_tfds_build_is_one_line_and_leaves_nothing_it_made(tmp_path):
    manual_dir, data_dir = tmp_path / "manual", tmp_path / "data"
    counts = cats_archive.write_cats_zip(
        manual_dir / cats_archive.CATS_ZIP_NAME, 20, seed=4, quirks=False, image_size=(320, 240)
    )
    build = held_build(manual_dir, data_dir, tmp_path / "hold")
    try:
        seen = build.until(HELD)  # generating examples, and held there until the signal
        build.send_signal(signal.SIGINT)  # what Ctrl-C in a terminal sends
        rest = build.communicate(timeout=120)[0]
    finally:
        if build.poll() is None:
            build.kill()
            build.wait(timeout=60)
    output = seen + rest
    assert "Generating train examples" in output, output[-3000:]
    assert "prepared to" not in output, "the build finished before it was interrupted"
    assert build.returncode == -signal.SIGINT, output[-3000:]  # as Python dies of Ctrl-C
    assert "Traceback" not in output, output[-3000:]
    assert output.rstrip().endswith(errors.INTERRUPTED), output[-3000:]
    # TFDS removed its incomplete folder, the builder the rest of what it made.
    assert not (data_dir / "cats_vs_dogs_fast").exists(), sorted(data_dir.rglob("*"))

    # What the line says: the same command again builds it.
    run_ok(build_command(manual_dir, data_dir), env=ENV, fork=True)
    builder = tfds.builder("cats_vs_dogs_fast", config="original", data_dir=data_dir)
    assert builder.info.splits["train"].num_examples == counts["expected_examples"]


def test_a_failed_build_removes_what_it_made_and_only_that(tmp_path):
    manual_dir, data_dir = tmp_path / "manual", tmp_path / "data"
    manual_dir.mkdir()
    (manual_dir / cats_archive.CATS_ZIP_NAME).write_bytes(b"not a zip archive\n")
    # Someone else's file in the dataset's folder, from before the build.
    theirs = data_dir / "cats_vs_dogs_fast" / "original" / "notes.txt"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("kept\n")

    command = [*TFDS_CLI, "build", "cats_vs_dogs_fast", "--imports", "cats_vs_dogs_fast"]
    command += ["--config", "224", "--manual_dir", os.fspath(manual_dir)]
    command += ["--data_dir", os.fspath(data_dir)]
    done = forks.run(command, capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 1, (done.stdout + done.stderr)[-3000:]
    assert "is not a zip archive" in done.stderr.strip().splitlines()[-1]

    # The 224 folder, TFDS's .config and the build lock were made by the build: gone.
    left = sorted(p.relative_to(data_dir).as_posix() for p in data_dir.rglob("*"))
    assert [p for p in left if p.startswith("cats_vs_dogs_fast")] == [
        "cats_vs_dogs_fast",
        "cats_vs_dogs_fast/original",
        "cats_vs_dogs_fast/original/notes.txt",
    ], left
    assert theirs.read_text() == "kept\n"

    # With nothing there before, the dataset's folder goes too.
    other = tmp_path / "other"
    command[command.index("--data_dir") + 1] = os.fspath(other)
    done = forks.run(command, capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 1, (done.stdout + done.stderr)[-3000:]
    assert not (other / "cats_vs_dogs_fast").exists(), sorted(other.rglob("*"))


# -- hostile archive member names -------------------------------------------------


def files_under(folder: Path, *, skip: Path | None = None) -> set[str]:
    found = set()
    for root, dirs, files in os.walk(folder):
        if skip is not None:
            dirs[:] = [d for d in dirs if Path(root, d) != skip]
        found.update(os.path.relpath(os.path.join(root, f), folder) for f in files)
    return found


def hostile_names(tmp_path: Path, inside: str) -> list[str]:
    """Member names that would land outside the build folders if extracted."""
    return [
        "../../evil_relative.jpg",
        os.fspath(tmp_path / "outside" / "evil_absolute.jpg"),
        f"{inside}/../../../evil_climbing.jpg",
    ]


@pytest.fixture
def hostile_setup(tmp_path, monkeypatch):
    manual_dir, data_dir = tmp_path / "manual", tmp_path / "data"
    # '../../x' from here would be tmp_path/x.
    work = tmp_path / "work" / "deep"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    return manual_dir, data_dir


def assert_nothing_written_outside(tmp_path: Path, data_dir: Path, before: set[str]) -> None:
    after = files_under(tmp_path, skip=data_dir)
    assert after == before, f"written outside the data dir: {sorted(after - before)}"
    everywhere = files_under(tmp_path)
    assert not [f for f in everywhere if "evil" in f], everywhere


def test_cats_archive_members_with_absolute_or_dotdot_paths_are_never_written(
    tmp_path, hostile_setup
):
    manual_dir, data_dir = hostile_setup
    zip_path = manual_dir / cats_archive.CATS_ZIP_NAME
    counts = cats_archive.write_cats_zip(zip_path, 4, seed=5, quirks=False, image_size=(40, 32))
    photo = photos.jpeg_bytes(photos.random_photo(np.random.default_rng(0)))
    with zipfile.ZipFile(zip_path, "a") as archive:
        for name in hostile_names(tmp_path, "PetImages/Cat"):
            archive.writestr(name, photo)
        # Climbs out and back in: the same as PetImages/Cat/77.jpg.
        archive.writestr("PetImages/Dog/../Cat/77.jpg", photo)
    before = files_under(tmp_path, skip=data_dir)

    builder = tfds.builder("cats_vs_dogs_fast", config="224", data_dir=data_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir))
    )

    assert_nothing_written_outside(tmp_path, data_dir, before)
    names = [
        ex["image/filename"].numpy().decode()
        for ex in builder.as_dataset(split="train", decoders={"image": tfds.decode.SkipDecoding()})
    ]
    assert len(names) == counts["expected_examples"] + 1
    assert "PetImages/Cat/77.jpg" in names
    assert not [n for n in names if ".." in n or "evil" in n or n.startswith("/")]


def test_stanford_archive_members_with_absolute_or_dotdot_paths_or_links_are_never_written(
    tmp_path, hostile_setup
):
    import stanford_dogs_tfrecord  # noqa: F401  (registers the dataset)

    manual_dir, data_dir = hostile_setup
    written = dogs_sample.write_stanford_dogs_archives(
        manual_dir, 2, breeds=range(2), image_size=(40, 32), quirks=False
    )
    breed = written["breeds"][0]
    photo = photos.jpeg_bytes(photos.random_photo(np.random.default_rng(0)))
    with tarfile.open(manual_dir / "images.tar", "a") as archive:
        names = [*hostile_names(tmp_path, f"Images/{breed}"), "Images/../evil_parent.jpg"]
        for name in names:
            member = tarfile.TarInfo(name)
            member.size = len(photo)
            archive.addfile(member, io.BytesIO(photo))
        for kind, target in ((tarfile.SYMTYPE, "/etc/hostname"), (tarfile.LNKTYPE, "../../x")):
            link = tarfile.TarInfo(f"Images/{breed}/evil_link_{kind.decode()}.jpg")
            link.type, link.linkname = kind, target
            archive.addfile(link)
    before = files_under(tmp_path, skip=data_dir)

    builder = tfds.builder("stanford_dogs_tfrecord", config="224", data_dir=data_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir))
    )

    assert_nothing_written_outside(tmp_path, data_dir, before)
    # The spool files lived in the build folder and are gone with it.
    assert not list(Path(builder.data_dir).glob("**/_spool"))
    for split, expected in written["expected_examples"].items():
        names = [
            ex["image/filename"].numpy().decode()
            for ex in builder.as_dataset(
                split=split, decoders={"image": tfds.decode.SkipDecoding()}
            )
        ]
        assert len(names) == expected
        assert not [n for n in names if "evil" in n]
    # What reaches the builder with a strange name is recorded as skipped.
    unlisted = builder.info.metadata["skipped"]["unlisted"]["files"]
    assert {
        "file": "evil_parent.jpg",
        "reason": "not an image member Images/<breed>/<name>.jpg",
    } in (unlisted)
