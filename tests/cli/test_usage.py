"""`fast-tfds` as a newcomer meets it: its help, its option names, what `sample` prints."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile

from fast_tfds.cli import build_parser
from fast_tfds.samples import cats_vs_dogs as cats_archive
from tests.helpers import child_env

FAST_TFDS = [sys.executable, "-m", "fast_tfds.cli"]


def fast_tfds(*args: str, cwd=None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*FAST_TFDS, *args],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=cwd,
        timeout=timeout,
    )


def test_a_bare_fast_tfds_prints_the_commands():
    done = fast_tfds()
    assert done.returncode == 2
    assert "usage: fast-tfds" in done.stderr
    for command in ("sample", "demo", "service", "verify", "cache", "publish"):
        assert re.search(rf"^\s+{command}\s+\w", done.stderr, re.M), (command, done.stderr)


def test_demo_help_names_the_work_dir_and_every_default():
    done = fast_tfds("demo", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # argparse wraps lines
    assert "--work-dir WORK_DIR" in text
    assert "--workdir" not in text  # the old spelling works but is not shown
    assert "(default: fast_tfds_demo, in the current folder)" in text
    for default in ("(default: 2000)", "(default: 10)", "(default: 120)"):
        assert default in text, default


def test_sample_help_shows_the_defaults():
    done = fast_tfds("sample", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    for default in ("(default: 2000)", "(default: 10)", "(default: 120)"):
        assert default in text, default


def test_demo_and_service_spell_work_dir_alike_and_the_old_spelling_still_works():
    parser, _ = build_parser()
    assert parser.parse_args(["demo", "--work-dir", "a"]).work_dir == "a"
    assert parser.parse_args(["demo", "--workdir", "b"]).work_dir == "b"
    service = parser.parse_args(["service", "dispatcher", "--work-dir", "c"])
    assert service.work_dir == "c"


def test_sample_prints_the_photos_asked_for_and_the_quirk_files(tmp_path):
    done = fast_tfds(
        "sample", "out", "--images-per-class", "3", "--dogs-per-breed", "1", "--breeds", "3",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    kept, skipped = len(cats_archive.KEPT_QUIRKS), len(cats_archive.SKIPPED_QUIRKS)
    assert (
        f"cats_vs_dogs_fast: {2 * (3 + kept)} images that decode: 2 classes x 3 photos + "
        f"{2 * kept} quirk files that decode; {2 * skipped} quirks that the build skips"
    ) in done.stdout
    # The archive holds what the line says: 3 ordinary photos per class, then the quirks.
    with zipfile.ZipFile(tmp_path / "out" / cats_archive.CATS_ZIP_NAME) as archive:
        numbered = [
            int(name.rsplit("/", 1)[1].removesuffix(".jpg"))
            for name in archive.namelist()
            if re.fullmatch(r"PetImages/(Cat|Dog)/\d+\.jpg", name)
        ]
    assert sorted(n for n in numbered if n < 3) == [0, 0, 1, 1, 2, 2]
    assert len(numbered) == 2 * (3 + kept + skipped)
    assert re.search(
        r"stanford_dogs_tfrecord: 6 images that decode \(train \d+, test \d+\): "
        r"3 breeds x 1 photos \+ 3 quirk files that decode; 4 quirks that the build skips",
        done.stdout,
    ), done.stdout
