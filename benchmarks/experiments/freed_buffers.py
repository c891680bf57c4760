"""Filling and served epochs with and without `fast_tfds.core.platform.keep_freed_buffers`.

    python benchmarks/experiments/freed_buffers.py [--images-per-class 2500]
        [--workdir fast_tfds_bench] [--rounds 3] [--epochs 8]

Every batch the reader serves is a new buffer of a few MiB. glibc hands a freed buffer of
that size back to the kernel, so the next one costs a page fault per 4 KiB; the front doors
ask glibc to keep them (`docs/design.md`, the pipeline's step 4). This times the served
epochs of three reads of the generated Cats vs Dogs sample, each in a fresh process, once as
the library does, once with FAST_TFDS_KEEP_FREED_BUFFERS=0 (glibc's defaults) and once as
the library does in a process started with MALLOC_ARENA_MAX=1 (one malloc arena: a thread's
arena keeps its buffers in heaps of at most 64 MiB, and glibc unmaps an extra heap once it
is empty, so a float32 batch of 19 MiB can still cost fresh pages), back to back in
interleaved rounds (the order turns every round):

- default f32 / uint8: `as_fast_dataset("train")` of config 224 (float32, batch 32, cache),
  and the same with dtype=tf.uint8;
- augmented uint8: config `original`, image_size=224, batch 64, seed 0,
  augment=fast_tfds.Augment().

Epoch 1 (the fill) is timed, then `--epochs` served epochs together. Printed: images/s and
images per CPU-second of the process (all its threads), per round, and the median ratios:
kept / glibc's defaults, and one arena / kept.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    data_dir, read, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import tensorflow as tf
    import fast_tfds, cats_vs_dogs_fast
    options = dict(data_dir=data_dir, download_and_prepare=False)
    if read == "augmented uint8":
        options.update(config="original", image_size=224, batch_size=64, seed=0,
                       augment=fast_tfds.Augment(), dtype=tf.uint8)
    elif read == "default uint8":
        options.update(config="224", dtype=tf.uint8)
    else:
        options.update(config="224")
    ds = cats_vs_dogs_fast.as_fast_dataset("train", **options)
    found = {}
    for phase, count in (("fill", 1), ("served", epochs)):
        start, cpu, n = time.perf_counter(), time.process_time(), 0
        for _ in range(count):
            for images, labels in ds:
                n += int(images.shape[0])
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        found[phase] = {"rate": n / seconds, "per_cpu": n / cpu}
    print(json.dumps(found), flush=True)
    """
)
READS = ("default f32", "default uint8", "augmented uint8")
SETTINGS = {
    "kept": {},
    "glibc's": {"FAST_TFDS_KEEP_FREED_BUFFERS": "0"},
    "one arena": {"MALLOC_ARENA_MAX": "1"},
}
# (numerator, denominator) of each table of ratios.
COMPARED = (("kept", "glibc's"), ("one arena", "kept"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images-per-class", type=int, default=2500)
    parser.add_argument("--workdir", default="fast_tfds_bench")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=8)
    args = parser.parse_args()

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from benchmarks.data import sample_data_dir

    data_dir = sample_data_dir("cats_vs_dogs_fast", Path(args.workdir), args.images_per_class)
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    base.update(TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    found: dict[tuple[str, str], list[dict]] = {}
    for round_ in range(args.rounds):
        for read in READS:
            turn = round_ % len(SETTINGS)
            order = list(SETTINGS)[turn:] + list(SETTINGS)[:turn]
            for setting in order:
                done = subprocess.run(
                    [sys.executable, "-c", _CHILD, str(data_dir), read, str(args.epochs)],
                    capture_output=True,
                    text=True,
                    env={**base, **SETTINGS[setting]},
                    cwd=root,
                    check=True,
                )
                result = json.loads(done.stdout.strip().splitlines()[-1])
                found.setdefault((read, setting), []).append(result)
                print(
                    f"round {round_ + 1}: {read}, {setting} allocator: "
                    + ", ".join(
                        f"{phase} {result[phase]['rate']:,.0f} images/s "
                        f"({result[phase]['per_cpu']:,.0f} per CPU-second)"
                        for phase in ("fill", "served")
                    ),
                    flush=True,
                )
    for top, bottom in COMPARED:
        print(f"\nFill and {args.epochs} served epochs, {top} / {bottom}:")
        heads = f"{'images/s per round':30} {'median':>7}  {'per CPU-s per round':30} median"
        print(f"{'row':25} {heads}")
        for read in READS:
            for phase in ("fill", "served"):
                cells = []
                for key in ("rate", "per_cpu"):
                    ratios = [
                        a[phase][key] / b[phase][key]
                        for a, b in zip(found[(read, top)], found[(read, bottom)], strict=True)
                    ]
                    words = " ".join(f"{r:.2f}" for r in ratios)
                    cells.append(f"{words:30} {statistics.median(ratios):6.2f}x")
                print(f"{read + ' ' + phase:25} {cells[0]}  {cells[1]}")


if __name__ == "__main__":
    main()
