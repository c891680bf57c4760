"""The commands our error messages suggest work as printed, from any folder.

Each test triggers the real error, copies the backquoted `tfds build ...` command
out of its message, fills in the one placeholder (FOLDER: where the source
archives are) and runs it with the installed `tfds` script in an empty folder,
so that nothing can be imported from the current folder, as for a user who
installed the package. Then the dataset is where the message's reader looks.
A command that would download the archives gets `--manual_dir` added instead:
the tests run without the network.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
import stanford_dogs_tfrecord  # noqa: F401  (registers the dataset)
from fast_tfds.building.archive_sources import DownloadFailedError
from tests.helpers import REPO, child_env
from tests.reliability.local_http import closed_port

TFDS_SCRIPT = Path(sys.executable).with_name("tfds")
# The archives each builder's dummy data holds: a tiny, real source.
DUMMY_DATA = {
    name: REPO / name / "dummy_data" for name in ("cats_vs_dogs_fast", "stanford_dogs_tfrecord")
}
PROXIES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def suggested_command(message: str) -> str:
    """The one backquoted `tfds build` command in `message`."""
    commands = re.findall(r"`(tfds build [^`]*)`", message)
    assert len(commands) == 1, message
    return commands[0]


def run_as_printed(command: str, manual_dir: Path, cwd: Path) -> str:
    """Runs the suggested command, FOLDER filled in, with the `tfds` script in `cwd`."""
    argv = [manual_dir.as_posix() if word == "FOLDER" else word for word in shlex.split(command)]
    assert argv[0] == "tfds" and TFDS_SCRIPT.exists()
    cwd.mkdir()
    env = {k: v for k, v in child_env().items() if k not in (*PROXIES, "PYTHONPATH")}
    done = subprocess.run(
        [os.fspath(TFDS_SCRIPT), *argv[1:]],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"$ {command}\n{output[-3000:]}"
    return output


@pytest.fixture
def offline(monkeypatch):
    """Downloads fail at once: every proxy is a port that refuses connections."""
    proxy = f"http://127.0.0.1:{closed_port()}"
    for name in PROXIES:
        monkeypatch.setenv(name, proxy)
    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.setenv("no_proxy", "")


@pytest.mark.parametrize("name", ["cats_vs_dogs_fast", "stanford_dogs_tfrecord"])
def test_the_offline_build_errors_command_builds_the_dataset(offline, tmp_path, name):
    data_dir = tmp_path / "data"
    with pytest.raises(DownloadFailedError) as excinfo:
        tfds.builder(name, config="224", data_dir=data_dir).download_and_prepare()
    command = suggested_command(str(excinfo.value))
    assert "FOLDER" in shlex.split(command), command

    output = run_as_printed(command, DUMMY_DATA[name], tmp_path / "elsewhere")
    assert "from the manual dir" in output
    assert tfds.builder(name, config="224", data_dir=data_dir).is_prepared()


NOT_BUILT = {"batch_size": 2, "download_and_prepare": False}


def read_cats(data_dir: Path):
    """A first batch through as_fast_dataset (tf.data)."""
    return next(iter(cats_vs_dogs_fast.as_fast_dataset("train", data_dir=data_dir, **NOT_BUILT)))


def load_cats(data_dir: Path):
    """A first batch through as_fast_loader (Grain, from the ArrayRecord files)."""
    loader = cats_vs_dogs_fast.as_fast_loader("train", data_dir=data_dir, seed=0, **NOT_BUILT)
    return next(iter(loader))


@pytest.mark.parametrize("read", [read_cats, load_cats], ids=["as_fast_dataset", "as_fast_loader"])
def test_the_not_built_errors_command_builds_what_the_reader_reads(offline, tmp_path, read):
    data_dir = tmp_path / "data"
    with pytest.raises(Exception, match="download_and_prepare") as excinfo:
        read(data_dir)
    command = suggested_command(str(excinfo.value))

    # The command downloads the archives; here a manual dir stands in for the network.
    if "FOLDER" not in shlex.split(command):
        command += " --manual_dir FOLDER"
    run_as_printed(command, DUMMY_DATA["cats_vs_dogs_fast"], tmp_path / "elsewhere")
    images, labels = read(data_dir)
    assert images.shape[0] == 2 and labels.shape[0] == 2
