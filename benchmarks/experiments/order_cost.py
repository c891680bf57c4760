"""What the order contract costs: images/s of as_fast_dataset's filling and served epochs,
shuffle=True (seeded) and shuffle=False, for two source trees side by side, in one run.

    mkdir /tmp/before && git archive 148c4f7 | tar -x -C /tmp/before  # the reader before
    # a sample made by `python -m benchmarks --images-per-class 1000`:
    D=fast_tfds_bench/cats_vs_dogs_fast-1000/tensorflow_datasets
    python benchmarks/experiments/order_cost.py $D --trees /tmp/before . --rounds 3

Each (tree, case) runs in a fresh child process (TensorFlow imported from that tree),
the trees interleaved round by round so that both see the same machine load; each
figure is the median over rounds. Cases: cache=True (epoch 1 fills the arena, epoch 2
is served from it) and cache=False (every epoch decodes), at the stored 224 px and
resized from `original` to 224.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import tensorflow as tf
import cats_vs_dogs_fast
data_dir, config, cache, shuffle = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
options = dict(batch_size=64, dtype=tf.uint8, cache=cache, shuffle=shuffle, image_size=224)
if shuffle:
    options["seed"] = 0
ds = cats_vs_dogs_fast.as_fast_dataset(
    "train", data_dir=data_dir, config=config, download_and_prepare=False, **options)
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
rates = []
for _ in range(2):
    start, used, n = time.perf_counter(), cpu(), 0
    for images, _ in ds:
        n += int(images.shape[0])
    rates.append([n / (time.perf_counter() - start), 1000 * (cpu() - used) / n])
print("RATES", json.dumps(rates))
"""

CASES = [
    (config, cache, shuffle)
    for config in ("224", "original")
    for cache in (True, False)
    for shuffle in (True, False)
]


def run(tree: str, data_dir: str, case) -> list[list[float]]:
    """[[images/s, CPU ms per image] of epoch 1, of epoch 2]."""
    config, cache, shuffle = case
    env = {
        **os.environ,
        "PYTHONPATH": os.path.abspath(tree),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "TF_ENABLE_ONEDNN_OPTS": "0",
    }
    args = [sys.executable, "-c", CHILD, data_dir, config, str(int(cache)), str(int(shuffle))]
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"{tree} {case} failed:\n{out.stderr[-3000:]}")
    line = next(x for x in out.stdout.splitlines() if x.startswith("RATES "))
    return json.loads(line[len("RATES ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir")
    parser.add_argument("--trees", nargs=2, default=[".", "."], metavar=("BEFORE", "AFTER"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--config", choices=["224", "original"], help="only this config")
    parser.add_argument("--cache", choices=["True", "False"], help="only this cache choice")
    args = parser.parse_args()
    cases = [c for c in CASES if args.config in (None, c[0]) and args.cache in (None, str(c[1]))]
    results: dict = {}
    for _ in range(args.rounds):
        for case in cases:
            for tree in args.trees:
                rates = run(tree, args.data_dir, case)
                results.setdefault((tree, case), []).append(rates)
                print("ROUND", tree, case, json.dumps(rates), flush=True)
    before, after = args.trees
    print(f"median of {args.rounds} rounds; before={before} after={after}")
    print(
        f"{'config':9}{'cache':7}{'shuffle':9}{'epoch':10}{'img/s before':>13}{'after':>7}"
        f"{'ratio':>7}{'CPU ms/img before':>19}{'after':>7}{'ratio':>7}"
    )
    for case in cases:
        names = ("1 (fill)", "2 served") if case[1] else ("1", "2")
        for epoch, name in enumerate(names):
            b, bc = (
                statistics.median(r[epoch][k] for r in results[(before, case)]) for k in (0, 1)
            )
            a, ac = (statistics.median(r[epoch][k] for r in results[(after, case)]) for k in (0, 1))
            config, cache, shuffle = case
            print(
                f"{config:9}{str(cache):7}{str(shuffle):9}{name:10}{b:13.0f}{a:7.0f}{a / b:7.2f}"
                f"{bc:19.2f}{ac:7.2f}{ac / bc:7.2f}"
            )
    raw = {f"{tree} {case}": rounds for (tree, case), rounds in results.items()}
    print("RAW", json.dumps(raw))


if __name__ == "__main__":
    main()
