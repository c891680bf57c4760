"""`fast_tfds.augment` runs where TensorFlow cannot be imported (the loader's users)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import REPO, child_env

_USE_IT = """
import sys
import numpy as np
import fast_tfds
from fast_tfds.augment import kernels, step, windows
from fast_tfds.cache import pictures as store

augment = fast_tfds.Augment(brightness=0.2)
cache = store.PictureCache([30, 40], [40, 30], (16, 16), shorter_side=20)
for slot in range(2):
    cache.put(slot, np.full((*cache.shape(slot), 3), 100, np.uint8))
draw = windows.Draw(augment, 0, 0, [5, 6])
out = step.serve_into(cache, [0, 1], draw, np.zeros((2, 16, 16, 3), np.uint8))
sizes = cache.reference_heights[[0, 1]], cache.reference_widths[[0, 1]]
drawn = windows.sample(draw, *sizes, cache.output_size)
for i in range(2):  # a flat grey picture: every pixel 100 x its brightness factor
    assert np.abs(out[i].astype(int) - round(100 * float(drawn.brightness[i]))).max() <= 1
print("RESULT", out.shape, sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"))
"""


def test_augmentation_works_where_tensorflow_cannot_be_imported(tmp_path):
    blocked = tmp_path / "without_tensorflow" / "tensorflow"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('tensorflow is not installed')\n")
    env = child_env(PYTHONPATH=os.pathsep.join([str(blocked.parent), str(REPO)]))
    done = subprocess.run(
        [sys.executable, "-c", _USE_IT], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "RESULT (2, 16, 16, 3) []" in done.stdout
