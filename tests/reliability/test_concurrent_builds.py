"""Two `tfds build` processes on the same data dir and dataset at once: both exit cleanly,
one waits for the other, and the dataset that remains is complete.

Without a build lock, TFDS builds twice into two incomplete.* folders, and the
second to finish fails to rename its folder over the first one's result.
"""

from __future__ import annotations

import os
import subprocess

from fast_tfds.cli import verify
from tests.forks import ForkedChild
from tests.reliability.held_builds import ENV, HELD, build_command, held_build


def test_two_builds_at_once_both_succeed_and_leave_one_complete_dataset(cats_sample, tmp_path):
    manual_dir, counts = cats_sample
    data_dir, release = tmp_path / "data", tmp_path / "release"
    # The first build is held while it generates examples (it holds the build lock then),
    # and released only once the second has said it waits: the overlap is certain, however
    # fast either runs.
    first = held_build(manual_dir, data_dir, tmp_path / "hold", config="224", release=release)
    second = None
    try:
        seen = [first.until(HELD), ""]
        # The second, a fork of a server that has imported TensorFlow (`tests.forks`): what
        # is checked is that it waits for the lock and then reuses the dataset, not how an
        # interpreter starts (the first, held by its `sitecustomize`, needs one of its own).
        second = ForkedChild(
            build_command(manual_dir, data_dir, "224"), stderr=subprocess.STDOUT, env=ENV
        )
        seen[1] = second.until("waiting for it to finish")
        release.touch()
        children = [first, second]
        outputs = [
            s + child.communicate(timeout=300)[0] for s, child in zip(seen, children, strict=True)
        ]
    finally:
        for child in (first, second):
            if child is not None and child.poll() is None:
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
