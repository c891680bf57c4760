"""The accelerator benchmark here, without a GPU: the pack command makes the bundle the GPU
machine reads (the tests' small sample as ArrayRecord, and the wheels that machine lacks),
within what the device tool carries; `python -m benchmarks accelerator --cpu` runs the same
loop, wait timing and table over it, where torch is installed, and imports neither
TensorFlow, the datasets' builders nor matplotlib. No timing assertions."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmarks import accelerator, accelerator_pack
from benchmarks.data import REPO_ROOT


@pytest.fixture(scope="module")
def bundle(cats_every_config_both_formats_dir, tmp_path_factory):
    """The pack command's output for a copy of the tests' sample, with its ArrayRecord files
    (the pack adds them where they are missing, as the loader rows do: tests/benchmarks/
    test_loader_rows.py checks that)."""
    tmp = tmp_path_factory.mktemp("accelerator")
    data_dir = tmp / "data"
    shutil.copytree(cats_every_config_both_formats_dir, data_dir)
    out = tmp / "fast_tfds_device"
    accelerator_pack.main(["--data-dir", str(data_dir), "--out", str(out)])
    return out


def test_the_bundle_holds_array_record_builds_and_the_wheels_within_the_limit(bundle):
    for config in ("224", "original"):
        (folder,) = (bundle / "tensorflow_datasets" / accelerator.DATASET / config).iterdir()
        names = [p.name for p in folder.iterdir()]
        assert any(".array_record-" in n for n in names) and "dataset_info.json" in names
        assert not any(".tfrecord-" in n for n in names), "TFRecords stay behind"
    wheels = sorted(p.name for p in (bundle / "wheels").iterdir())
    assert all(w.endswith(".whl") for w in wheels)
    for name in ("grain", "array_record", "simplejpeg", "tensorflow_datasets", "promise"):
        assert sum(w.startswith(name + "-") for w in wheels) == 1, (name, wheels)
    native = [w for w in wheels if not w.endswith("-none-any.whl")]
    assert native and all("-cp312-" in w and "manylinux" in w for w in native), native
    total = accelerator_pack.tree_bytes() + accelerator_pack.folder_bytes(bundle)
    assert total <= accelerator_pack.LIMIT


def test_the_wheels_are_the_locked_versions():
    pins = accelerator_pack.locked()
    assert len(pins) == len(accelerator_pack.WHEELS)
    assert any(p.startswith("grain==") for p in pins)
    with pytest.raises(SystemExit, match="no version of not-a-package"):
        accelerator_pack.locked(("not-a-package",))


# The modules the GPU machine lacks: the run must not import them.
ABSENT_THERE = ("tensorflow", "matplotlib", "cats_vs_dogs_fast", "stanford_dogs_tfrecord")
RUN = """
import atexit, runpy, sys
absent = {absent!r}
atexit.register(lambda: print("LOADED", [m for m in absent if m in sys.modules]))
sys.argv = ["benchmarks", *{argv!r}]
runpy.run_module("benchmarks", run_name="__main__", alter_sys=True)
"""


def test_cpu_mode_runs_the_loop_and_writes_its_table(bundle, tmp_path):
    # Looked for, not imported: torch next to this process's TensorFlow can crash it.
    for module in ("torch", "torchvision"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed: the --cpu mode and its peer need it")
    out = tmp_path / "accelerator.json"
    argv = ["accelerator", "--cpu", "--data", str(bundle / "tensorflow_datasets")]
    argv += ["--json", str(out)]
    code = RUN.format(absent=ABSENT_THERE, argv=argv)
    env = {**os.environ, "PYTHONPATH": os.fspath(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LOADED []" in done.stdout, done.stdout[-2000:]
    result = json.loads(out.read_text())
    assert result["mode"] == "accelerator-cpu"
    rows = result["rows"]
    assert list(rows) == [
        accelerator.MODEL,
        accelerator.SERVED,
        accelerator.DECODING,
        accelerator.PEER,
    ]
    batch = result["settings"]["batch_size"]
    for name, row in rows.items():
        assert row["steps"] >= 3 and row["images"] == row["steps"] * batch, name
        assert 0 <= row["wait_share"] < 1, name
        assert set(row["ms_per_step"]) >= {"gap", "host_wait_for_batch", "step"}, name
    for name, points in result["scaling"].items():
        assert sorted(points) == ["1", "2"], name
        for point in points.values():
            assert point["images"] >= 3 * batch and point["cpu_seconds"] >= 0, name
    table = done.stdout
    for name in (*rows, "scaling, no model (224)", "Targets (the run issue):"):
        assert name in table, name


def test_bad_arguments_are_one_line_errors(capsys):
    for argv, message in (
        (["--batch-size", "15"], "--batch-size=15: must be even"),
        (["--threads", "1,x"], "--threads=1,x: give counts"),
        (["--workers", "0"], "--workers=0: must be at least 1"),
    ):
        with pytest.raises(SystemExit):
            accelerator.parse_args(argv, "accelerator")
        assert message in capsys.readouterr().err


def test_missing_data_says_how_to_make_it(tmp_path):
    with pytest.raises(SystemExit, match="scripts/device/pack.sh"):
        accelerator.Data(tmp_path)
