"""Two `tfds build` processes on the same data dir and dataset at once: both exit cleanly,
one waits for the other, and the dataset that remains is complete.

Without a build lock, TFDS builds twice into two incomplete.* folders, and the
second to finish fails to rename its folder over the first one's result.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from fast_tfds.cli import verify
from tests.children import Child

# The real `tfds build` command line, started once its imports are done and a
# file says go, so that both builds start within milliseconds of each other.
_CHILD = textwrap.dedent(
    """
    import os, sys, time
    from tensorflow_datasets.scripts.cli import main
    import cats_vs_dogs_fast
    go = sys.argv[1]
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)
    sys.argv = ["tfds", "build", *sys.argv[2:]]
    main.launch_cli()
    """
)
ENV = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}


def output_until_ready(child: Child) -> str:
    """The child's output before its 'ready' line (TensorFlow's import notes)."""
    return child.line_starting("ready")[1]


def test_two_builds_at_once_both_succeed_and_leave_one_complete_dataset(cats_sample, tmp_path):
    manual_dir, counts = cats_sample
    data_dir, go = tmp_path / "data", tmp_path / "go"
    args = ["cats_vs_dogs_fast", "--imports", "cats_vs_dogs_fast", "--config", "224"]
    args += ["--manual_dir", os.fspath(manual_dir), "--data_dir", os.fspath(data_dir)]
    children = [
        Child(
            [sys.executable, "-c", _CHILD, os.fspath(go), *args],
            stderr=subprocess.STDOUT,
            env=ENV,
        )
        for _ in range(2)
    ]
    try:
        before = [output_until_ready(child) for child in children]
        go.touch()
        outputs = [
            b + child.communicate(timeout=300)[0] for b, child in zip(before, children, strict=True)
        ]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate(timeout=60)

    for child, output in zip(children, outputs, strict=True):
        assert child.returncode == 0, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        assert f"<SplitInfo num_examples={counts['expected_examples']}," in output, output[-3000:]
    waited = [out for out in outputs if "waiting for it to finish" in out]
    assert len(waited) == 1, "one build should have waited for the other"
    assert "Reusing dataset cats_vs_dogs_fast" in waited[0]

    config_dir = data_dir / "cats_vs_dogs_fast" / "224"
    assert sorted(p.name for p in config_dir.iterdir()) == ["1.0.0"]  # no incomplete.*
    report = verify.verify_paths([data_dir])
    assert not report.problems and not report.notes, (report.problems, report.notes)
    assert report.checked == [os.fspath(config_dir / "1.0.0")]
