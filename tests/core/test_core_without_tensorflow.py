"""`fast_tfds.core` and `fast_tfds.cache` (but its `tf_*` file-cache modules) are what
the loader shares with the tf.data reader, so they must work where TensorFlow cannot be
imported: finding a build, checking splits and options, the dataset hooks, the JPEG
block decoder, an arena filled and served, its rows placed by the memory budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from fast_tfds.cache import store
from tests.helpers import REPO, child_env

_USE_THE_CORE = """
import json, sys
import numpy as np
import cats_vs_dogs_fast, stanford_dogs_tfrecord
from fast_tfds.core import dataset_hooks, jpeg_blocks, options, sizes, splits
from fast_tfds.core import builder_lookup
from fast_tfds.cache import disk_rows, housekeeping, persistent_format
from fast_tfds.cache import placement, store

builder = builder_lookup.load_builder(
    "cats_vs_dogs_fast", data_dir=sys.argv[1], download_and_prepare=False
)
info = builder.info
options.check_int("batch_size", 32)
parts = dataset_hooks.hook_for("stanford_dogs_tfrecord").example_parts(
    {"crop_to_box": True, "with_boxes": True, "max_boxes": 2}
)
result = {
    "examples": splits.split_info(info, "train[:50%]").num_examples,
    "size": sizes.output_size(sizes.stored_size(info.features["image"].shape), None,
                              dataset=info.full_name),
    "window": parts.window({"objects/bbox": np.array([0.0, 0.0, 0.5, 0.5])})(10, 10),
    "decoded": list(jpeg_blocks.decode_jpeg_block(np.array([], object), (2, 2, 3)).shape),
}
# A table of 3 rows in memory (a budget that fits), asked what its first epoch does.
backing = placement.allocator(3 * 4, what="test", cache_budget=1 << 20, cache_dir=None)
cache = store.Store(3, {"x": ((4,), np.uint8)}, None, backing)
result["arena_state"] = int(cache.begin(True))
result["budget_positive"] = placement.available_memory().bytes > 0
kinds = (housekeeping.FILE_CACHES, disk_rows.ROWS, persistent_format.PERSISTENT)
result["listed"] = sum(len(housekeeping.find(sys.argv[1], kind)) for kind in kinds)

try:
    import tensorflow  # noqa: F401
except ImportError as err:
    result["tensorflow"] = str(err)
result["loaded"] = sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")
print("RESULT " + json.dumps(result))
"""


def test_the_core_works_where_tensorflow_cannot_be_imported(tmp_path, cats_data_dir):
    blocked = tmp_path / "without_tensorflow" / "tensorflow"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('tensorflow is not installed')\n")
    env = child_env(PYTHONPATH=os.pathsep.join([str(blocked.parent), str(REPO)]))
    done = subprocess.run(
        [sys.executable, "-c", _USE_THE_CORE, os.fspath(cats_data_dir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert result.pop("tensorflow") == "tensorflow is not installed"
    assert result.pop("loaded") == []
    assert 0 < result.pop("examples")
    assert result.pop("arena_state") == store.FILL  # A new table asks to be filled.
    assert result.pop("budget_positive") is True
    assert result.pop("listed") == 0  # No cache of any kind in the data folder.
    assert result == {"size": [224, 224], "window": [0, 0, 5, 5], "decoded": [0, 2, 2, 3]}
