"""Helpers shared by the tests."""

from __future__ import annotations

import collections
import fcntl
import functools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tests import forks

REPO = Path(__file__).parents[1]
# The real `tfds` command line, run as a user would (in a child process).
TFDS_CLI = [sys.executable, "-m", "tensorflow_datasets.scripts.cli.main"]
DATASETS = ("cats_vs_dogs_fast", "stanford_dogs_tfrecord")


def shared_folder(tmp_path_factory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `name` of this test run, made by `make(folder)` once per run and shared
    by every xdist worker (their own temporary folders are under one of the run's), not
    made again by each worker. The first worker to ask makes it, holding a lock that the
    others wait on; a folder whose making failed is made again by the next to ask."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder, done = base / name, base / f"{name}.done"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes, or its process dies.
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


def project_modules() -> dict[str, Path]:
    """{'fast_tfds.building.builder': path} for every module of the installed packages."""
    modules = {}
    for package in ("fast_tfds", *DATASETS):
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python: this one, with TensorFlow's start-up noise off."""
    return {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2", **extra}


def fast_tfds_cache(*args, cwd: Path | None = None, **env: str) -> str:
    """`fast-tfds cache ARGS...` in a child process; its stdout, asserting that it succeeded.
    The child is a fork of a server that has imported TensorFlow (`tests.forks`): what is
    checked is what the command prints and removes, not how it starts."""
    done = forks.run(
        [sys.executable, "-m", "fast_tfds.cli", "cache", *map(os.fspath, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=child_env(**env),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def listed_line(output: str, path: Path) -> str:
    """The one line of a `fast-tfds cache list|clean` output that names `path`."""
    found = [line for line in output.splitlines() if line.endswith(f"  {path}")]
    assert len(found) == 1, output
    return found[0]


def run_ok(command, timeout: float = 300, fork: bool = False, **kwargs) -> str:
    """Runs `command` in a child process; its stdout + stderr, asserting that it succeeded.
    With `fork`, a `python -c|-m` command runs as a fork of a server that has imported
    TensorFlow (`tests.forks`: where the test allows one)."""
    kwargs.setdefault("env", child_env())
    run = forks.run if fork else subprocess.run
    done = run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    return output


def not_collected(method):
    """`method`, hidden from pytest. TensorFlow's TestCase (under TFDS's builder tests)
    has a helper named like a test, `test_session`, which TFDS calls: pytest would
    collect it as a test and skip it ("Not a test.")."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        return method(*args, **kwargs)

    wrapper.__test__ = False
    return wrapper


def filenames_of(ds) -> list[str]:
    """Filenames in the order a dict-output dataset (batched or not) yields them."""
    names = []
    for example in ds:
        batch = example["image/filename"].numpy()
        names.extend(n.decode() for n in np.atleast_1d(batch))
    return names


def assert_exactly_once(names, expected) -> None:
    duplicates = [n for n, c in collections.Counter(names).items() if c > 1]
    assert not duplicates, f"read more than once: {duplicates[:5]}"
    assert sorted(names) == sorted(expected), f"{len(names)} examples, expected {len(expected)}"


# The start of a child-process script in which the packages named (comma-separated)
# in sys.argv[1] cannot be imported, as on a collaborator's machine that has TensorFlow
# Datasets and nothing of ours. It fails if one of them is importable all the same.
BLOCK_PACKAGES = """
import importlib.abc
import sys

BLOCKED = set(sys.argv[1].split(","))

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, Blocker())
for name in sorted(BLOCKED):
    try:
        __import__(name)
    except ImportError:
        pass
    else:
        raise SystemExit(f"{name} is importable: the test proves nothing")
"""


def written_out(backing, timeout: float = 120) -> None:
    """Waits until the persistent file a fill writes (`persisted.FileFill`) is written out.
    A reader's last batch may come before the fill's last block has told the file that it
    is complete (a read thread writes that block, e.g. a partial one left out of the
    batches): the writer is joined once it exists."""
    deadline = time.monotonic() + timeout
    while backing.writing is None:
        assert time.monotonic() < deadline, "the fill never told its file it was complete"
        time.sleep(0.01)
    backing.writing.join(timeout=max(0.0, deadline - time.monotonic()))
