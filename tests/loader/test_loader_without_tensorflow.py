"""The loader never imports TensorFlow: not at import, not while reading, not in its
worker processes; and without its extra it says which one to install."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import REPO


def python(code: str, *args: str, path: list[str] = (), cwd=None) -> dict:
    """Runs `code` in a fresh interpreter; it prints 'RESULT <json>' last."""
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env["PYTHONPATH"] = os.pathsep.join([*map(os.fspath, path), os.fspath(REPO)])
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or REPO,
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def test_importing_the_loader_and_the_datasets_does_not_load_tensorflow():
    result = python(
        "import json, sys\n"
        "import fast_tfds.loader, cats_vs_dogs_fast, stanford_dogs_tfrecord, fast_tfds\n"
        "fast_tfds.as_fast_loader, cats_vs_dogs_fast.as_fast_loader\n"
        "print('RESULT ' + json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'keras'))))\n"
    )
    assert result == []


def blocked_package(tmp_path, name: str) -> str:
    """A folder holding a package `name` whose import fails, as if it were not installed."""
    folder = tmp_path / f"without_{name}"
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed')\n")
    return os.fspath(folder)


# A script, not `-c`: the worker processes (spawned) re-import the main module.
_READ_EVERYTHING = """
import json, sys
import cats_vs_dogs_fast, stanford_dogs_tfrecord

def main():
    cats_dir, dogs_dir = sys.argv[1:3]
    counts = {}
    for workers in (0, 2):
        loader = cats_vs_dogs_fast.as_fast_loader(
            "train", data_dir=cats_dir, num_workers=workers, batch_size=8, seed=1,
            download_and_prepare=False,
        )
        counts[f"cats_workers_{workers}"] = sum(len(labels) for _, labels in loader)
    loader = stanford_dogs_tfrecord.as_fast_loader(
        "train", data_dir=dogs_dir, crop_to_box=True, with_boxes=True, config="original",
        image_size=96, download_and_prepare=False,
    )
    counts["dogs"] = sum(len(target["label"]) for _, target in loader)
    try:
        import tensorflow  # noqa: F401
    except ImportError as err:
        counts["tensorflow"] = str(err)
    print("RESULT " + json.dumps(counts))

if __name__ == "__main__":
    main()
"""


def test_the_loader_reads_where_tensorflow_cannot_be_imported(
    tmp_path, cats_array_record_dir, stanford_array_record_dir
):
    script = tmp_path / "read_everything.py"
    script.write_text(_READ_EVERYTHING)
    result = python(
        f"import runpy; runpy.run_path({os.fspath(script)!r}, run_name='__main__')",
        os.fspath(cats_array_record_dir),
        os.fspath(stanford_array_record_dir),
        path=[blocked_package(tmp_path, "tensorflow")],  # inherited by the workers
        cwd=tmp_path,
    )
    assert result.pop("tensorflow") == "tensorflow is not installed"
    cats = result["cats_workers_0"]
    assert cats > 0 and result == {"cats_workers_0": cats, "cats_workers_2": cats, "dogs": 8}


def test_without_the_extra_the_error_names_it(tmp_path, cats_array_record_dir):
    result = python(
        "import json, sys\n"
        "import cats_vs_dogs_fast\n"
        "try:\n"
        "    cats_vs_dogs_fast.as_fast_loader('train', data_dir=sys.argv[1])\n"
        "except ImportError as err:\n"
        "    print('RESULT ' + json.dumps([type(err).__name__, str(err)]))\n",
        os.fspath(cats_array_record_dir),
        path=[blocked_package(tmp_path, "simplejpeg")],
    )
    name, message = result
    assert name == "MissingLoaderExtra"
    assert "simplejpeg" in message and 'pip install "fast-image-tfds[loader]"' in message
