"""What our code does to the process it runs in, and what its programs print as they start.

- Importing our packages, making builders and building in Python leave the
  process as it was: `sys.excepthook`, logging, warnings filters, the
  environment. Only programs change them: `fast-tfds`, and our builders when the
  `tfds` command line runs them, where a BuildError is one line, not a traceback.
- `fast-tfds` (each subcommand) and the loader start without TensorFlow's C++
  start-up noise, in an environment that does not silence it already; the offline demo
  (`fast-tfds demo`) is run here, once, and what it says it built and read is checked.

Every check runs in a fresh interpreter: the test process itself has long
imported everything.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fast_tfds.building import MIN_SHARDS_PER_SPLIT
from fast_tfds.samples import cats_vs_dogs as cats_archive
from tests.children import Child
from tests.helpers import DATASETS, TFDS_CLI, project_modules

TFDS_SCRIPT = Path(sys.executable).with_name("tfds")
FAST_TFDS_SCRIPT = Path(sys.executable).with_name("fast-tfds")
# TensorFlow's start-up lines (CUDA probe, oneDNN notice, CPU feature notice, absl's
# pre-init warning) and TFDS's "WARNING:root:apitools not found" from Beam's GCS client.
NOISE = (
    "cuInit",
    "cudart",
    "cuda_",
    "oneDNN",
    "cpu_feature_guard",
    "rebuild TensorFlow",
    "absl::InitializeLog",
    "apitools",
    "Unable to register cu",
)

# The state a library must leave alone, as comparable values (repr() where the
# objects themselves do not compare).
SNAPSHOT = """
import json, logging, os, signal, sys, threading, warnings

def snapshot():
    loggers = {"": logging.root, **{
        name: logger for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }}
    state = {
        "sys.excepthook": repr(sys.excepthook),
        "threading.excepthook": repr(threading.excepthook),
        "sys.unraisablehook": repr(sys.unraisablehook),
        "sys.stdout, sys.stderr": repr((sys.stdout, sys.stderr)),
        "os.environ": dict(os.environ),
        "cwd": os.getcwd(),
        "signals": repr([signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]),
        "warnings.filters": [repr(f) for f in warnings.filters],
        "logging.disable": logging.root.manager.disable,
        "logging.getLoggerClass": repr(logging.getLoggerClass()),
        "loggers": {
            name: [logger.level, repr(logger.handlers), logger.propagate, logger.disabled]
            for name, logger in loggers.items()
        },
    }
    if "absl.logging" in sys.modules:
        state["absl verbosity"] = sys.modules["absl.logging"].get_verbosity()
    return state

def changes(before, after):
    found = []
    for key in before:
        if key == "loggers":
            # A new module-level logger (level unset, no handler) changes nothing.
            new = {name: v for name, v in after[key].items() if name not in before[key]}
            found += [f"logger {n!r}: {v}" for n, v in new.items() if v != [0, "[]", True, False]]
            found += [
                f"logger {n!r}: {v} -> {after[key][n]}"
                for n, v in before[key].items() if after[key][n] != v
            ]
        elif before[key] != after[key]:
            if key == "warnings.filters":
                added = [f for f in after[key] if f not in before[key]]
                removed = [f for f in before[key] if f not in after[key]]
                found.append(f"warnings.filters: added {added}, removed {removed}"
                             + ("" if added or removed else ", reordered"))
            elif key == "os.environ":
                names = {n for n in {*before[key], *after[key]}
                         if before[key].get(n) != after[key].get(n)}
                found.append(f"os.environ: {sorted(names)}")
            else:
                found.append(f"{key}: {before[key]} -> {after[key]}")
    return found
"""


def run_python(code: str, *args: str, env=None, cwd=None, timeout=300):
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done


def changes_made_by(code: str, folder: Path, prelude: str = "") -> list[str]:
    """What `code` changes in a fresh interpreter's state, third-party imports left out.

    The third-party modules that our code loads change some of that state
    themselves on import (numpy, SciPy, urllib3 and requests add warnings
    filters, OpenCV extends LD_LIBRARY_PATH). So `code` runs twice, each time
    in a new interpreter with its own empty folder (`sys.argv[1]`): the first
    run lists the third-party modules it loaded; the second imports those
    first, then compares the state before and after `code`.
    """
    ours = ("fast_tfds", *DATASETS)
    listing = folder / "third_party.json"
    first, second = folder / "first", folder / "second"
    first.mkdir(), second.mkdir()
    run_python(
        SNAPSHOT + prelude + "already = set(sys.modules)\n" + code + "\n"
        f"ours = {ours!r}\n"
        "loaded = [m for m in sys.modules if m not in already and m.split('.')[0] not in ours]\n"
        f"open({os.fspath(listing)!r}, 'w').write(json.dumps(loaded))",
        os.fspath(first),
        cwd=first,
    )
    done = run_python(
        SNAPSHOT + "import importlib\n"
        f"for name in json.loads(open({os.fspath(listing)!r}).read()):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        pass\n" + prelude + "before = snapshot()\n" + code + "\n"
        "print(json.dumps(changes(before, snapshot())))",
        os.fspath(second),
        cwd=second,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_datasets_leaves_sys_excepthook_alone(tmp_path):
    run_python(
        "import sys; h = sys.excepthook; import cats_vs_dogs_fast, stanford_dogs_tfrecord; "
        "assert sys.excepthook is h, sys.excepthook",
        cwd=tmp_path,
    )


def test_importing_every_module_of_ours_changes_nothing_in_the_process(tmp_path):
    # `__main__` modules run their program when imported; modules that need an
    # extra which is not installed (torch) are left out.
    modules = [name for name in project_modules() if not name.endswith("__main__")]
    assert "fast_tfds.read.reader" in modules and "cats_vs_dogs_fast" in modules
    code = (
        "import importlib\n"
        f"for name in {modules!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as err:\n"
        f"        if err.name.split('.')[0] in {('fast_tfds', *DATASETS)!r}:\n"
        "            raise"
    )
    assert changes_made_by(code, tmp_path) == []


def test_making_builders_and_building_in_python_change_nothing_in_the_process(
    cats_sample, tmp_path
):
    manual_dir, _ = cats_sample
    # absl, which TFDS logs with, runs logging.basicConfig() on its first message
    # when the root logger has no handler (as the stdlib's logging.info() does).
    # TFDS logs when it makes any builder that has configs; so does the prelude.
    prelude = (
        "import tensorflow as tf, tensorflow_datasets as tfds\n"
        "from absl import logging as absl_logging\n"
        "absl_logging.info('before')\n"
    )
    code = (
        "import cats_vs_dogs_fast, stanford_dogs_tfrecord\n"
        f"for name in {DATASETS!r}:\n"
        "    for config in ('224', 'original'):\n"
        "        tfds.builder(name, config=config, data_dir=sys.argv[1])\n"
        "builder = tfds.builder('cats_vs_dogs_fast', config='224', data_dir=sys.argv[1])\n"
        "builder.download_and_prepare(\n"
        f"    download_config=tfds.download.DownloadConfig(manual_dir={os.fspath(manual_dir)!r}))\n"
        "assert builder.is_prepared()"
    )
    assert changes_made_by(code, tmp_path, prelude) == []


@pytest.mark.parametrize("tfds_cli", ["tfds", "python -m"])
def test_tfds_build_prints_a_build_error_as_one_line(tmp_path, tfds_cli):
    # Both ways of running the TFDS command line: the `tfds` script, and its module.
    command = [os.fspath(TFDS_SCRIPT)] if tfds_cli == "tfds" else TFDS_CLI
    (tmp_path / cats_archive.CATS_ZIP_NAME).write_bytes(b"<html>Please sign in</html>\n")
    done = subprocess.run(
        [*command, "build", "cats_vs_dogs_fast", "--imports", "cats_vs_dogs_fast"]
        + ["--manual_dir", os.fspath(tmp_path), "--data_dir", os.fspath(tmp_path / "data")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("ERROR: ")]
    assert errors == [
        f"ERROR: cats_vs_dogs_fast: {tmp_path / cats_archive.CATS_ZIP_NAME} is not a zip "
        "archive (it is an HTML or XML page): is it the right file? Put the dataset's own "
        f"{cats_archive.CATS_ZIP_NAME} in its place."
    ], output[-3000:]


# -- quiet start-up --------------------------------------------------------------


def noisy_env() -> dict[str, str]:
    """This environment without the variables that silence TensorFlow (the test
    session sets them)."""
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    return env


def assert_quiet(stderr: str) -> None:
    noise = [line for line in stderr.splitlines() if any(n in line for n in NOISE)]
    assert noise == [], stderr[-3000:]


def test_tensorflow_is_noisy_here_without_our_entry_points(tmp_path):
    # The premise of the tests below: in their environment TensorFlow prints its noise.
    done = run_python(
        "import tensorflow as tf; tf.config.list_physical_devices('GPU')",
        env=noisy_env(),
        cwd=tmp_path,
    )
    assert any(n in done.stderr for n in NOISE), done.stderr


def test_fast_tfds_help_is_quiet_and_does_not_import_tensorflow(tmp_path):
    done = run_python(
        "import sys\n"
        "from fast_tfds.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0\n"
        "print('tensorflow' in sys.modules)",
        env=noisy_env(),
        cwd=tmp_path,
    )
    assert "usage: fast-tfds" in done.stdout
    assert done.stdout.splitlines()[-1] == "False"
    assert_quiet(done.stderr)


def run_fast_tfds(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [os.fspath(FAST_TFDS_SCRIPT), *args],
        capture_output=True,
        text=True,
        env=noisy_env(),
        cwd=cwd,
        timeout=timeout,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done


def test_fast_tfds_subcommands_are_quiet(cats_data_dir, tmp_path):
    sizes = ("--images-per-class", "4", "--dogs-per-breed", "1", "--breeds", "3")
    done = run_fast_tfds("sample", "samples", *sizes, cwd=tmp_path)
    assert (tmp_path / "samples" / cats_archive.CATS_ZIP_NAME).exists()
    assert_quiet(done.stderr)

    done = run_fast_tfds("verify", os.fspath(cats_data_dir), cwd=tmp_path)
    assert "2 dataset(s) verified" in done.stdout
    assert_quiet(done.stderr)

    done = run_fast_tfds("cache", "list", os.fspath(tmp_path), cwd=tmp_path)
    assert_quiet(done.stderr)

    # The offline demo, run once here: quiet, and what it says it did.
    done = run_fast_tfds("demo", "--work-dir", "demo", *sizes, cwd=tmp_path)
    assert_quiet(done.stderr)
    output = done.stdout + done.stderr
    # What the sample writers say they wrote is what the builds hold.
    cats = int(re.search(r"cats_vs_dogs_fast: (\d+) images that decode", output).group(1))
    dogs = re.search(
        r"stanford_dogs_tfrecord: \d+ images that decode \(train (\d+), test (\d+)\)", output
    )
    dogs = {"train": int(dogs.group(1)), "test": int(dogs.group(2))}
    assert "from the manual dir" in output
    shards = min(MIN_SHARDS_PER_SPLIT, cats)
    assert f"Built {cats} examples in {shards} shards per config" in output
    assert "as_fast_dataset() epoch 2: store, global shuffle" in output
    assert f"as_fast_dataset(crop_to_box=True), {dogs['train']} images" in output


def test_fast_tfds_service_is_quiet(tmp_path):
    server = Child(
        [os.fspath(FAST_TFDS_SCRIPT), "service", "dispatcher", "--port", "0"],
        env=noisy_env(),
        cwd=tmp_path,
    )
    try:
        first_line = server.line()  # printed once the server is up
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=60)
    assert "tf.data service dispatcher listening at grpc://" in first_line, stderr[-3000:]
    assert_quiet(stderr)


def test_the_loader_is_quiet(cats_both_formats_dir, tmp_path):
    # That it imports no TensorFlow is checked where the loader's entry points are
    # (tests/loader/test_loader_without_tensorflow.py: at import, and reading with
    # TensorFlow blocked); here, that reading prints nothing.
    done = run_python(
        "import sys\n"
        "import cats_vs_dogs_fast\n"
        "loader = cats_vs_dogs_fast.as_fast_loader(\n"
        "    'train', data_dir=sys.argv[1], batch_size=4, seed=0, download_and_prepare=False)\n"
        "images, labels = next(iter(loader))\n"
        "print(images.shape)",
        os.fspath(cats_both_formats_dir),
        env=noisy_env(),
        cwd=tmp_path,
    )
    assert done.stdout.splitlines()[-1] == "(4, 224, 224, 3)"
    assert_quiet(done.stderr)
