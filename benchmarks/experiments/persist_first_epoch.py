"""Is a second process's slower epoch 1 from a persistent file the file's, or the process's?

    python benchmarks/experiments/persist_first_epoch.py DATA_DIR CACHE_DIR [--runs 3]

DATA_DIR holds cats_vs_dogs_fast built (e.g. fast_tfds_bench/cats_vs_dogs_fast-1000/
tensorflow_datasets); CACHE_DIR already holds its persistent file (`persist=True`,
batch 64, uint8: run `python -m benchmarks.persist` or one read first). Each run is a
fresh process that reads two datasets one after the other, A then B, each a new
`as_fast_dataset(persist=True)` (a new arena over a new mapping of the file), two epochs
each. If B's epoch 1 is as fast as A's epoch 2, the slower A1 is the process's first
pipeline (TensorFlow's one-time costs), not the file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap

from benchmarks.persist import env

_CHILD = textwrap.dedent(
    """
    import sys, time
    import tensorflow as tf
    import cats_vs_dogs_fast
    data, cache = sys.argv[1], sys.argv[2]
    out = []
    for which in ("A", "B"):
        ds = cats_vs_dogs_fast.as_fast_dataset(
            "train", data_dir=data, download_and_prepare=False, batch_size=64,
            dtype=tf.uint8, persist=True, cache_dir=cache)
        for epoch in range(2):
            start, n = time.perf_counter(), 0
            for images, labels in ds:
                n += int(images.shape[0])
            out.append(f"{which}{epoch + 1} {n / (time.perf_counter() - start):,.0f}/s")
    print("  ".join(out))
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("cache_dir")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.runs):
        command = [sys.executable, "-c", _CHILD, args.data_dir, os.fspath(args.cache_dir)]
        done = subprocess.run(command, capture_output=True, text=True, env=env(), timeout=900)
        print(done.stdout.strip() if done.returncode == 0 else done.stderr[-2000:])


if __name__ == "__main__":
    main()
