"""The default 2-epoch read under a container's memory limit, against the same read without one.

    python benchmarks/experiments/cgroup_budget.py DATA_DIR [--config 224] [--image-size 224]

DATA_DIR holds cats_vs_dogs_fast built (e.g. the benchmark's sample,
fast_tfds_bench/cats_vs_dogs_fast-1000/tensorflow_datasets). Each read (2 epochs,
cache on, uint8, batch 64) runs in a fresh child process that first moves itself
into a cgroup v1 memory cgroup of its own, made under this process's memory
cgroup (needs root and the v1 memory controller at /sys/fs/cgroup/memory):

0. once, the same read without a cache and without a limit: the cgroup's peak is
   the reader's own resident need;
1. the read without a limit: its time and peak (the reader's need plus the cache);
2. the read with a limit of (the reader's own need + half the cache's bytes): the
   reader finds the limit and puts its cache on disk (it logs one line saying so,
   printed here), and its time is compared with (1). Each epoch's major page
   faults and bytes read from disk are printed too (a served epoch should read
   back about the part of the cache that the limit evicted, not more).

Rounds alternate (1, 2, 1, 2, ...) so that the CPU's swings hit both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

MEMORY = Path("/sys/fs/cgroup/memory")

# Joins its cgroup (and sets the limit) before importing anything large, so that
# all the read's memory is charged to the cgroup.
CHILD = """
import os, sys, time
cgroup, data_dir, config, size, limit, cache = sys.argv[1:7]
with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
    f.write(str(os.getpid()))
if int(limit):
    with open(os.path.join(cgroup, "memory.limit_in_bytes"), "w") as f:
        f.write(limit)
from fast_tfds.quiet import quiet_tensorflow
tf = quiet_tensorflow()
import resource
import cats_vs_dogs_fast
def io():
    read = [l for l in open("/proc/self/io") if l.startswith("read_bytes")][0].split()[1]
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt, int(read) >> 20
start = time.perf_counter()
ds = cats_vs_dogs_fast.as_fast_dataset(
    "train", data_dir=data_dir, config=config, download_and_prepare=False,
    image_size=int(size), cache=bool(int(cache)), dtype=tf.uint8, batch_size=64)
images, times = 0, []
for epoch in range(2):
    before = io()
    for batch, _ in ds:
        images += int(batch.shape[0])
    times.append(time.perf_counter() - start - sum(times))
    after = io()
    faults, read = after[0] - before[0], after[1] - before[1]
    print("EPOCH", epoch + 1, "majflt", faults, "read MiB", read, file=sys.stderr)
print("RESULT", images, time.perf_counter() - start, *times, flush=True)
"""


class Read:
    """One child's read: what it printed and the cgroup's peak."""

    def __init__(self, stdout: str, stderr: str, returncode: int, peak: int, cache: bool):
        self.stderr, self.returncode, self.peak, self.cache = stderr, returncode, peak, cache
        result = [line.split() for line in stdout.splitlines() if line.startswith("RESULT")]
        if returncode == 0 and result:
            _, images, seconds, *epochs = result[-1]
            self.images, self.seconds = int(images), float(seconds)
            self.epochs = [float(e) for e in epochs]
        else:
            self.images, self.seconds, self.epochs = 0, float("nan"), []
        said = [line for line in stderr.splitlines() if "fast_tfds:" in line]
        self.log = [line.split("fast_tfds:", 1)[1].strip() for line in said]
        self.on_disk = any("memory-mapped file" in line for line in self.log)
        self.per_epoch_io = [line for line in stderr.splitlines() if line.startswith("EPOCH")]

    def line(self, label: str) -> str:
        if not self.images:
            return f"{label}: failed (exit code {self.returncode}):\n{self.stderr[-2000:]}"
        epochs = ", ".join(f"{e:.2f}" for e in self.epochs)
        cache = "cache on disk" if self.on_disk else "cache in memory"
        return (
            f"{label}: {self.images} images in {self.seconds:.2f} s (epochs {epochs} s), "
            f"peak {self.peak / 2**20:.0f} MiB" + (f", {cache}" if self.cache else "")
        )


def own_cgroup() -> Path:
    """This process's memory cgroup folder (the children's go under it), else the root."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = MEMORY / path.lstrip("/")
            if folder.is_dir():
                return folder
    return MEMORY


def run_child(data_dir: str, config: str, size: int, limit: int, cache: bool = True) -> Read:
    """One read in a new cgroup (`limit` bytes, 0: none), removed afterwards."""
    cgroup = own_cgroup() / f"fast_tfds_budget_{uuid.uuid4().hex[:8]}"
    cgroup.mkdir()
    try:
        repo = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": os.fspath(repo)}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
        argv = [str(cgroup), data_dir, config, str(size), str(limit), str(int(cache))]
        done = subprocess.run(
            [sys.executable, "-c", CHILD, *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
        )
        peak = int((cgroup / "memory.max_usage_in_bytes").read_text())
    finally:
        for _ in range(100):  # The cgroup is busy until the child's exit is reaped.
            try:
                cgroup.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    return Read(done.stdout, done.stderr, done.returncode, peak, cache)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data_dir")
    p.add_argument("--config", default="224")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--limit-mib",
        type=int,
        help="the limit (default: the reader's need without a cache + half the cache)",
    )
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("cgroup_budget: this experiment makes memory cgroups, which needs root; skipped")
    if not (MEMORY / "memory.limit_in_bytes").exists():
        sys.exit(
            f"cgroup_budget: no cgroup v1 memory controller at {MEMORY} (cgroup v2 only, or "
            "not Linux); skipped"
        )
    import tensorflow_datasets as tfds

    import cats_vs_dogs_fast  # noqa: F401

    builder = tfds.builder("cats_vs_dogs_fast", config=args.config, data_dir=args.data_dir)
    count = builder.info.splits["train"].num_examples
    arena = count * args.image_size**2 * 3
    print(
        f"{count} images of config {args.config} at {args.image_size}: the cache needs "
        f"{arena / 2**20:.0f} MiB; cgroups under {own_cgroup()}"
    )
    if args.limit_mib:
        limit = args.limit_mib * 2**20
    else:
        bare = run_child(args.data_dir, args.config, args.image_size, 0, cache=False)
        print(bare.line("no cache, no limit"))
        if not bare.images:
            sys.exit(1)
        limit = bare.peak + arena // 2
        print(
            f"the limit: the reader's own need {bare.peak / 2**20:.0f} MiB + half the cache "
            f"{arena / 2**21:.0f} MiB = {limit / 2**20:.0f} MiB"
        )
    free, limited = [], []
    for r in range(args.rounds):
        print(f"round {r + 1}:")
        read = run_child(args.data_dir, args.config, args.image_size, 0)
        free.append(read)
        print("   ", read.line("no limit"))
        read = run_child(args.data_dir, args.config, args.image_size, limit)
        limited.append(read)
        print("   ", read.line(f"limit {limit / 2**20:.0f} MiB"))
        for line in read.log[:1]:
            print("        the reader said:", line[:300])
        for line in read.per_epoch_io:
            print("       ", line)
    reads = free + limited
    if any(read.images != 2 * count for read in reads):
        sys.exit(f"a read did not yield its {2 * count} images (2 epochs); see above")
    ratio = statistics.median(a.seconds / b.seconds for a, b in zip(limited, free, strict=True))
    disk = sum(read.on_disk for read in limited)
    print(
        f"with the limit / without: {ratio:.2f}x the time (median of {args.rounds} alternated "
        f"rounds); the cache went to disk in {disk} of {args.rounds} limited reads and "
        f"{sum(read.on_disk for read in free)} of {args.rounds} unlimited ones"
    )


if __name__ == "__main__":
    main()
