"""What `mix=` adds to a cached crop + flip read (tf.data and the loader), in one run.

    python benchmarks/experiments/mix_overhead.py DATA_DIR [--rounds 5] [--batch 64]

DATA_DIR holds cats_vs_dogs_fast built, config `original` (e.g.
fast_tfds_bench/cats_vs_dogs_fast-2000/tensorflow_datasets); the loader rows need its
ArrayRecord files too (skipped, with the reason, where they are missing). Each reader is
made once and its first epoch (which fills the cache) is not timed; then every round
times one epoch of each reader, in an order that alternates from round to round, so
that a machine shared with other work slows all of them alike. The ratio is the
median epoch time with `mix=` over that of the same reader without it (the reference),
both cached crop + flip (`Augment()`; `--recipe trivial_augment_erase`: TrivialAugmentWide +
erasing 0.25, the reference of `python -m benchmarks recipes`' mix row), uint8, batch 64,
seed 0. The CPU ratio is the
same for this process's CPU seconds per epoch (all its threads: what the epoch costs,
less swayed by other work than the wall time). Last, each mix alone on one batch of
the reference's pictures, this thread's CPU per batch (the loader's threads stopped),
in place (the loader's way) and into a new array (tf.data's); `--alone-only` runs just
that.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

ROWS = {
    "unmixed (reference)": None,
    "+ mix timm (mixup 0.8, cutmix 1.0, smoothing 0.1)": dict(
        mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1
    ),
    "+ mix MixUp only (alpha 0.8: every batch blended)": dict(mixup_alpha=0.8),
}


RECIPES = {
    "crop_flip": {},
    "trivial_augment_erase": {"auto_augment": "trivial_augment_wide", "erase": 0.25},
}


def readers(data_dir: str, batch: int, back_end: str, recipe: str = "crop_flip"):
    import tensorflow as tf

    import cats_vs_dogs_fast
    import fast_tfds

    made = {}
    for name, fields in ROWS.items():
        mix = None if fields is None else fast_tfds.Mix(**fields)
        common = dict(
            data_dir=data_dir,
            config="original",
            download_and_prepare=False,
            batch_size=batch,
            seed=0,
            augment=fast_tfds.Augment(**RECIPES[recipe]),
            mix=mix,
        )
        if back_end == "tf.data":
            made[name] = cats_vs_dogs_fast.as_fast_dataset(
                "train", cache=True, dtype=tf.uint8, **common
            )
        else:
            made[name] = cats_vs_dogs_fast.as_fast_loader("train", cache=True, **common)
    return made


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def epoch_seconds(reader) -> tuple[float, int, float]:
    """(wall seconds, images, CPU seconds) of one epoch."""
    start, cpu, n = time.perf_counter(), cpu_seconds(), 0
    for images, *_ in reader:
        n += int(images.shape[0])
    return time.perf_counter() - start, n, cpu_seconds() - cpu


def mix_alone(reader, batches: int = 30) -> None:
    """Each row's mix on one batch of `reader`'s pictures, this thread's CPU ms per
    batch (the process's would count the loader's threads, still filling its buffer)."""
    import numpy as np

    import fast_tfds
    from fast_tfds.augment import mixing
    from fast_tfds.core import aligned

    images, labels, *_ = next(iter(reader))
    images, labels = np.array(images), np.array(labels)
    reader.close()
    out = aligned.empty(images.shape)
    shape = list(images.shape)
    print(f"  each mix alone on a batch {shape}, CPU ms per batch ({batches} batches):")
    for name, fields in ROWS.items():
        if fields is None:
            continue
        mix = fast_tfds.Mix(**fields)
        costs = []
        for into in (None, out):
            work = images.copy()
            mixing.mix(work, labels, 2, mix, seed=0, epoch=1, batch=0, out=into)  # warm-up
            cpu = time.thread_time()
            for b in range(batches):
                mixing.mix(work, labels, 2, mix, seed=0, epoch=0, batch=b, out=into)
            costs.append((time.thread_time() - cpu) / batches * 1e3)
        print(f"    {name:52s} in place {costs[0]:5.2f}  into a new array {costs[1]:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--alone-only", action="store_true", help="each mix alone, no epochs")
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="crop_flip")
    args = parser.parse_args()
    for back_end in ("tf.data", "loader"):
        if args.alone_only and back_end != "loader":
            continue
        try:
            made = readers(args.data_dir, args.batch, back_end, args.recipe)
        except Exception as err:  # e.g. no ArrayRecord files for the loader
            print(f"{back_end}: skipped ({str(err).splitlines()[0]})")
            continue
        if args.alone_only:
            mix_alone(made[next(iter(ROWS))])
            continue
        for reader in made.values():
            epoch_seconds(reader)  # epoch 1 fills the cache
        times = {name: [] for name in made}
        cpus = {name: [] for name in made}
        count = 0
        for r in range(args.rounds):
            names = list(made) if r % 2 == 0 else list(reversed(made))
            for name in names:
                seconds, count, cpu = epoch_seconds(made[name])
                times[name].append(seconds)
                cpus[name].append(cpu)
        first = next(iter(ROWS))
        reference = statistics.median(times[first])
        reference_cpu = statistics.median(cpus[first])
        print(
            f"{back_end}: {count} images per epoch, recipe {args.recipe}, "
            f"{args.rounds} interleaved rounds"
        )
        for name, values in times.items():
            median = statistics.median(values)
            cpu = statistics.median(cpus[name])
            print(
                f"  {name:52s} {count / median:8,.0f} images/s  "
                f"time x{median / reference:.3f}, CPU x{cpu / reference_cpu:.3f} of the "
                f"reference  (rounds: {', '.join(f'{count / v:,.0f}' for v in values)}; "
                f"CPU s per epoch {cpu:.2f})"
            )
        if back_end == "loader":
            mix_alone(made[first])


if __name__ == "__main__":
    main()
