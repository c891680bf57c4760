"""Real `tfds build` processes of the Cats archive, one of them held while it generates
examples: a `sitecustomize` on the child's PYTHONPATH wraps the standard library's
`zipfile.ZipFile.read` (what reads each member of the source archive) so that, after a few
members, the build says so and waits there, until a signal ends it or, where the test names
a release file, until that file exists. The library has no switch for this; the hold is the
test's, outside it, so a test never depends on how fast a build runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.children import Child
from tests.helpers import TFDS_CLI

ENV = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
HELD = "held by the test after reading members"
_HOLD = f"""
import os, signal, sys, time, zipfile

# Ctrl-C as from a terminal: a suite started in the background of a shell without job
# control (`cmd &` in a script) ignores SIGINT, every child inherits that, and Python then
# installs no KeyboardInterrupt handler: the held build would ignore the test's signal.
signal.signal(signal.SIGINT, signal.default_int_handler)

_read, _count, _said = zipfile.ZipFile.read, [0], []


def read(self, *args, **kwargs):
    _count[0] += 1
    if _count[0] > {{members}}:
        if not _said:
            _said.append(True)
            print({HELD!r}, file=sys.stderr, flush=True)
        while not {{release!r}} or not os.path.exists({{release!r}}):
            time.sleep(0.05)
    return _read(self, *args, **kwargs)


zipfile.ZipFile.read = read
"""


def build_command(manual_dir: Path, data_dir: Path, config: str = "original") -> list[str]:
    return [
        *TFDS_CLI,
        "build",
        "cats_vs_dogs_fast",
        *("--imports", "cats_vs_dogs_fast", "--config", config),
        *("--manual_dir", os.fspath(manual_dir), "--data_dir", os.fspath(data_dir)),
    ]


def held_build(
    manual_dir: Path,
    data_dir: Path,
    hold_dir: Path,
    members: int = 3,
    *,
    config: str = "original",
    release: Path | None = None,
) -> Child:
    """`build_command`, held after reading `members` members (TFDS is generating examples
    then) until a signal ends it, or until `release` exists; stderr merged into stdout."""
    hold_dir.mkdir()
    hold = _HOLD.format(members=members, release=os.fspath(release) if release else "")
    (hold_dir / "sitecustomize.py").write_text(hold)
    path = os.pathsep.join(p for p in (os.fspath(hold_dir), ENV.get("PYTHONPATH")) if p)
    command = build_command(manual_dir, data_dir, config)
    return Child(command, stderr=subprocess.STDOUT, env={**ENV, "PYTHONPATH": path})
