"""The persistent arena (`persist=True`) against the memory arena, in fresh processes.

    python -m benchmarks.persist --images-per-class 300 --rounds 3 [--warm-up] [--augment]

Each round, in this order, each in a process of its own (config 224, uint8, batch 64):
- `memory`: today's memory arena, 3 epochs: epoch 1 is its fill, epochs 2-3 its served rate;
- `persist fill`: persist=True into an empty cache folder, epoch 1 (fill and write the file);
- `persist read`: persist=True again, a second process: epochs 1-2 served from the file.
Then 4 processes serve from the file at once; each one's proportional set size (PSS) of
the file's mapping is read from /proc/PID/smaps when all four have read an epoch, and
summed: the page cache holds one copy for all of them, so the sum stays near one copy.
Each process's whole PSS (TensorFlow included) is printed beside it.

With --augment, every process reads config `original` at 224 with `augment=Augment()`
(random-resized crop + flip): the caches are the training recipe's picture caches (the
pictures at their cache resolution), and one copy is the picture file's size.

With --warm-up, every process first runs a tiny tf.data pipeline, so that TensorFlow's
one-time costs of a process's first pipeline are not counted in anyone's epoch 1.

Targets (issue 24): fill >= 0.9x the memory arena's fill; the second process's epoch 1
>= 0.9x the in-process arena's served rate; 4 readers' summed PSS <= 1.3x one copy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from benchmarks import options
from benchmarks.data import REPO_ROOT, sample_data_dir

BATCH = 64

_READER = textwrap.dedent(
    """
    import json, pathlib, sys, time
    import tensorflow as tf
    import cats_vs_dogs_fast
    data_dir, cache_dir, persist, epochs, hold, warm, augment = sys.argv[1:8]
    if warm == "1":
        # TensorFlow's one-time costs of a process's first pipeline (thread pools, the
        # first numpy_function), paid before any epoch is timed, in every process alike.
        w = tf.data.Dataset.range(256).batch(64).map(
            lambda x: tf.numpy_function(lambda a: a * 2, [x], tf.int64),
            num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)
        for _ in range(2):
            for _ in w:
                pass
    recipe = {}
    if augment == "1":
        # Issue 23's training recipe: pictures cached at the cache resolution, a new
        # random-resized crop + flip every epoch.
        import fast_tfds
        recipe = dict(config="original", image_size=224, augment=fast_tfds.Augment(), seed=0)
    ds = cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=data_dir, download_and_prepare=False, batch_size=BATCH_SIZE,
        dtype=tf.uint8, cache_dir=cache_dir, persist=persist == "1", **recipe)
    for epoch in range(int(epochs)):
        start, n = time.perf_counter(), 0
        for images, labels in ds:
            n += int(images.shape[0])
        print(json.dumps({"epoch": epoch + 1, "seconds": time.perf_counter() - start, "n": n}),
              flush=True)
        if epoch == 0 and persist == "1":
            # The file is written out after the fill, in a thread: when is it in place?
            while not list(pathlib.Path(cache_dir).glob("*.arena")):
                time.sleep(0.005)
            print(json.dumps({"file_ready_s": time.perf_counter() - start}), flush=True)
    if hold == "1":
        print("ready", flush=True)
        sys.stdin.readline()
    """
).replace("BATCH_SIZE", str(BATCH))


def env() -> dict:
    return {
        **os.environ,
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }


WARM = ["0"]  # "1": every process warms TensorFlow up before its first timed epoch
AUGMENT = ["0"]  # "1": the training recipe's picture cache (`--augment`)


def reader(data_dir, cache, persist: bool, epochs: int) -> list[float]:
    """Examples per second of each epoch, in a fresh process; with `persist`, then the
    rate counting the time until the file was in place (written out after epoch 1)."""
    command = [sys.executable, "-c", _READER, str(data_dir), str(cache), str(int(persist))]
    done = subprocess.run(
        [*command, str(epochs), "0", WARM[0], AUGMENT[0]],
        capture_output=True,
        text=True,
        env=env(),
        timeout=900,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    rates, ready = [], None
    for line in done.stdout.splitlines():
        epoch = json.loads(line)
        if "file_ready_s" in epoch:
            ready = epoch["file_ready_s"]
            continue
        rates.append(epoch["n"] / epoch["seconds"])
        n = epoch["n"]
    return rates + ([n / ready] if ready is not None else [])


def pss_kib(pid: int, path: Path | None = None) -> int:
    """PSS of a process (KiB): the whole process, or only its mappings of `path`."""
    if path is None:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    total, inside = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
                inside = len(fields) >= 6 and fields[5] == str(path)
            elif inside and fields[0] == "Pss:":
                total += int(fields[1])
    return total


def concurrent_readers(data_dir, cache, arena: Path, count: int = 4) -> dict:
    command = [sys.executable, "-c", _READER, str(data_dir), str(cache), "1", "1", "1", WARM[0]]
    command.append(AUGMENT[0])
    children = [
        subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env(),
        )
        for _ in range(count)
    ]
    try:
        for child in children:
            lines = [child.stdout.readline().strip()]
            while lines[-1] not in ("ready", ""):
                lines.append(child.stdout.readline().strip())
            if lines[-1] != "ready":
                raise SystemExit(f"a reader stopped: {lines}")
        mapped = [pss_kib(c.pid, arena) for c in children]
        whole = [pss_kib(c.pid) for c in children]
    finally:
        for child in children:
            child.kill()
            child.wait(timeout=60)
    return {"mapped_kib": mapped, "whole_kib": whole}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_images_per_class(parser, 300)
    options.add_rounds(parser, 3)
    parser.add_argument("--workdir", default="fast_tfds_bench")
    parser.add_argument(
        "--warm-up",
        action="store_true",
        help="each process runs a tiny tf.data pipeline before its first timed epoch",
    )
    parser.add_argument(
        "--augment",
        action="store_true",
        help="config original read at 224 with augment=Augment() (random-resized crop + "
        "flip): the picture cache at its cache resolution instead of the 224 arena",
    )
    args = parser.parse_args(argv)
    options.check_counts(parser, args)
    WARM[0] = "1" if args.warm_up else "0"
    AUGMENT[0] = "1" if args.augment else "0"
    data_dir = sample_data_dir("cats_vs_dogs_fast", Path(args.workdir), args.images_per_class)
    memory, fill, second = [], [], []
    scratch = Path(tempfile.mkdtemp(prefix="persist-bench-"))
    try:
        for round_ in range(args.rounds):
            cache = scratch / f"round{round_}"
            memory.append(reader(data_dir, scratch / "unused", False, 3))
            fill.append(reader(data_dir, cache, True, 1))  # [epoch 1, until the file is in place]
            second.append(reader(data_dir, cache, True, 2)[:2])
            print(
                f"round {round_ + 1}: memory {[round(r) for r in memory[-1]]}/s, persist fill "
                f"{round(fill[-1][0])}/s (file in place: {round(fill[-1][1])}/s), second "
                f"process {[round(r) for r in second[-1]]}/s",
                flush=True,
            )
        (arena,) = (scratch / f"round{args.rounds - 1}").glob("*.arena")
        arena_file_kib = arena.stat().st_size // 1024
        shared = concurrent_readers(data_dir, arena.parent, arena)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def median(runs, epoch):
        return statistics.median(r[epoch] for r in runs)

    arena_kib = sum(shared["mapped_kib"])
    arena_size_kib = arena_file_kib if args.augment else _data_kib(data_dir)
    warm = ", TensorFlow warmed up first" if args.warm_up else ""
    what = "original at 224, augment=Augment()" if args.augment else "config 224"
    print(f"\n{args.rounds} rounds, medians, examples/s ({what}, uint8, batch {BATCH}{warm}):")
    print(f"  memory cache fill (epoch 1)          {median(memory, 0):>9,.0f}")
    served = f"{median(memory, 1):>9,.0f} {median(memory, 2):>9,.0f}"
    print(f"  memory cache served (epoch 2, 3)     {served}")
    print(f"  persist fill (epoch 1, first process){median(fill, 0):>9,.0f}")
    print(f"  ... counting until the file is in place{median(fill, 1):>7,.0f}")
    served = f"{median(second, 0):>9,.0f} {median(second, 1):>9,.0f}"
    print(f"  persist served (second process, 1, 2){served}")
    print(f"  fill ratio: persist fill / memory fill = {median(fill, 0) / median(memory, 0):.2f}x")
    print(
        f"  ... until the file is in place / memory fill = "
        f"{median(fill, 1) / median(memory, 0):.2f}x"
    )
    for epoch in (1, 2):
        ratio = median(second, 0) / median(memory, epoch)
        print(f"  second process epoch 1 / memory cache epoch {epoch + 1} = {ratio:.2f}x")
    print(
        f"  4 readers: PSS of the file's mapping {shared['mapped_kib']} KiB, sum {arena_kib:,} "
        f"KiB = {arena_kib / arena_size_kib:.2f}x one copy ({arena_size_kib:,} KiB); whole "
        f"processes' PSS {shared['whole_kib']} KiB"
    )


def _data_kib(data_dir) -> int:
    """One copy of the cache's rows: examples x (224 x 224 x 3 + an int64 label)."""
    import tensorflow_datasets as tfds

    builder = tfds.builder("cats_vs_dogs_fast", config="224", data_dir=data_dir)
    n = builder.info.splits["train"].num_examples
    return n * (224 * 224 * 3 + 8) // 1024


if __name__ == "__main__":
    main()
