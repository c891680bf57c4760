"""One as_fast_dataset in a fresh process: epoch 1 (and 2 with the cache) timed.

The A/B figures in docs/design.md for block parsing and for transparent huge
pages come from this script, one process per run, variants alternated, 3 rounds
(from the root of the repository):

    D=fast_tfds_bench/cats_vs_dogs_fast-7500/tensorflow_datasets  # made by `python -m benchmarks`
    git worktree add /tmp/old <commit before the change>
    S=benchmarks/experiments/fresh_process_epochs.py
    for round in 1 2 3; do for mode in --cache --no-cache; do for dtype in uint8 float32; do
      PYTHONPATH=/tmp/old python $S $D $mode --dtype $dtype
      python $S $D $mode --dtype $dtype
    done; done; done

Add `--thp` (against the same run without it) for the huge-page comparison.
PYTHONPATH puts the old tree ahead of the editable install; each line says which
`fast_tfds` it imported. Unlike the benchmark, `--thp` reaches into the reader's
private arena allocation (an experiment on the reader itself), so it follows
that code when it changes.
"""

from __future__ import annotations

import argparse
import json
import mmap
import resource
import time

import numpy as np
import tensorflow as tf

import cats_vs_dogs_fast
import fast_tfds
from fast_tfds.cache import memory


def _huge_page_allocate(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The arena's own allocation, with MADV_HUGEPAGE on its (page-aligned) mapping."""
    array = _ALLOCATE(shape, dtype)
    memory.MADVISE(array.ctypes.data, array.nbytes, mmap.MADV_HUGEPAGE)
    return array


_ALLOCATE = memory.allocate_in_memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", help="a data dir with cats_vs_dogs_fast/224 built")
    parser.add_argument("--cache", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--dtype", choices=["uint8", "float32"], default="float32")
    parser.add_argument("--thp", action="store_true", help="MADV_HUGEPAGE on the arena")
    args = parser.parse_args()
    if args.thp:
        memory.allocate_in_memory = _huge_page_allocate  # What `memory.IN_MEMORY` calls.
    ds = cats_vs_dogs_fast.as_fast_dataset(
        "train",
        data_dir=args.data_dir,
        batch_size=32,
        dtype=getattr(tf, args.dtype),
        cache=args.cache,
        download_and_prepare=False,
    )
    epochs = []
    for _ in range(2 if args.cache else 1):
        before, start, images = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), 0
        for batch, _labels in ds:
            images += int(batch.shape[0])
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        epochs.append(
            {
                "images_per_s": round(images / seconds),
                "cpu_user_s": round(after.ru_utime - before.ru_utime, 2),
                "cpu_sys_s": round(after.ru_stime - before.ru_stime, 2),
                "minor_faults_per_image": round((after.ru_minflt - before.ru_minflt) / images, 1),
            }
        )
    run = {"fast_tfds": fast_tfds.__file__, **vars(args), "epochs": epochs}
    print(json.dumps(run))


if __name__ == "__main__":
    main()
