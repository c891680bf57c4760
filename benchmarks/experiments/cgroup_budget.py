"""The default 2-epoch read under a container's memory limit, against the same read without one.

    python benchmarks/experiments/cgroup_budget.py DATA_DIR [--config 224] [--image-size 224]

DATA_DIR holds cats_vs_dogs_fast built (e.g. the benchmark's sample,
fast_tfds_bench/cats_vs_dogs_fast-7500/tensorflow_datasets). Each read runs in a
fresh child process placed in a cgroup v1 memory cgroup of its own (needs root and
the v1 memory controller at /sys/fs/cgroup/memory):

1. without a limit: its time, and the cgroup's peak memory (the reader's own need
   plus the arena);
2. with a limit of (that peak - the arena + half the arena): the reader finds the
   limit, sends the arena to disk (its log line is printed), and the time is
   compared with (1). Each epoch's major page faults and bytes read from disk are
   printed too (a served epoch should read back about the part of the arena that
   the limit evicted, not more).

Rounds alternate (1, 2, 1, 2, ...) so that the CPU's swings hit both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

MEMORY = Path("/sys/fs/cgroup/memory")

CHILD = """
import os, sys, time
cgroup, data_dir, config, size, limit = sys.argv[1:6]
with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
    f.write(str(os.getpid()))
if int(limit):
    with open(os.path.join(cgroup, "memory.limit_in_bytes"), "w") as f:
        f.write(limit)
from fast_tfds.quiet import quiet_tensorflow
tf = quiet_tensorflow()
import cats_vs_dogs_fast
start = time.perf_counter()
ds = cats_vs_dogs_fast.as_fast_dataset(
    "train", data_dir=data_dir, config=config, download_and_prepare=False,
    image_size=int(size), dtype=tf.uint8, batch_size=64)
import resource
images, times = 0, []
def io():
    read = [l for l in open("/proc/self/io") if l.startswith("read_bytes")][0].split()[1]
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt, int(read) >> 20
for epoch in range(2):
    before = io()
    for batch, _ in ds:
        images += int(batch.shape[0])
    times.append(time.perf_counter() - start - sum(times))
    after = io()
    faults, read = after[0] - before[0], after[1] - before[1]
    print("EPOCH", epoch, "majflt", faults, "read MiB", read, file=sys.stderr)
print("RESULT", images, time.perf_counter() - start, *times, flush=True)
"""


def run_child(data_dir: str, config: str, size: int, limit: int) -> tuple[int, float, int, str]:
    """(images, seconds, peak bytes of the cgroup, stderr) of one read in a new cgroup."""
    cgroup = MEMORY / f"fast_tfds_budget_{uuid.uuid4().hex[:8]}"
    cgroup.mkdir()
    try:
        repo = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": os.fspath(repo)}
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(cgroup), data_dir, config, str(size), str(limit)],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
        )
        peak = int((cgroup / "memory.max_usage_in_bytes").read_text())
    finally:
        for _ in range(100):
            try:
                cgroup.rmdir()
                break
            except OSError:
                import time

                time.sleep(0.1)
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    if done.returncode != 0 or not result:
        return 0, float("nan"), peak, done.stderr[-2000:]
    _, images, seconds, *epochs = result[-1].split()
    epochs = ", ".join(f"{float(e):.1f}" for e in epochs)
    return int(images), float(seconds), peak, f"epochs: {epochs} s\n{done.stderr}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data_dir")
    p.add_argument("--config", default="224")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--limit-mib", type=int, help="the limit (default: the peak less half the arena)"
    )
    args = p.parse_args()
    if os.geteuid() != 0 or not (MEMORY / "memory.limit_in_bytes").exists():
        sys.exit("needs root and the cgroup v1 memory controller at /sys/fs/cgroup/memory")
    import tensorflow_datasets as tfds

    import cats_vs_dogs_fast  # noqa: F401

    builder = tfds.builder("cats_vs_dogs_fast", config=args.config, data_dir=args.data_dir)
    count = builder.info.splits["train"].num_examples
    arena = count * args.image_size**2 * 3
    free, limited = [], []
    limit = args.limit_mib * 2**20 if args.limit_mib else None
    for _ in range(args.rounds):
        images, seconds, peak, said = run_child(args.data_dir, args.config, args.image_size, 0)
        free.append(seconds)
        if limit is None:
            limit = peak - arena + arena // 2
            print(
                f"{count} images, arena {arena / 2**20:.0f} MiB; peak without a limit "
                f"{peak / 2**20:.0f} MiB; the limit: {limit / 2**20:.0f} MiB"
            )
        print(f"no limit: {images} images in {seconds:.1f} s ({said.splitlines()[0]})")
        images, seconds, peak, stderr = run_child(
            args.data_dir, args.config, args.image_size, limit
        )
        limited.append(seconds)
        said = [line for line in stderr.splitlines() if "fast_tfds:" in line]
        print(
            f"limit:    {images} images in {seconds:.1f} s ({stderr.splitlines()[0]}), "
            f"peak {peak / 2**20:.0f} MiB"
        )
        for line in said[:1]:
            print("   ", line.split("fast_tfds:", 1)[1].strip()[:300])
        for line in stderr.splitlines():
            if line.startswith("EPOCH"):
                print("   ", line)
    ratio = statistics.median(a / b for a, b in zip(limited, free, strict=True))
    print(f"with the limit / without: {ratio:.2f}x (median of {args.rounds} alternated rounds)")


if __name__ == "__main__":
    main()
