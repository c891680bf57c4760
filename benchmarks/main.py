"""The benchmark: as_fast_dataset against what users would otherwise write, on the
same data, in one process. Run it from the root of a clone of the repository:

  python -m benchmarks                          streaming: images/s, first batch, memory
  python -m benchmarks --train                  how long MobileNetV2 steps wait for input
  python -m benchmarks --loaders                the JAX/PyTorch loader rows instead
  python -m benchmarks sizes [--help]           output sizes 160/224/384, the disk cache
  python -m benchmarks recipes [--help]         training recipes: crops, flips, jitter
  python -m benchmarks bucket [--help]          epoch 1 from a gs:// bucket (emulated)
  python -m benchmarks accelerator [--help]     a GPU's wait for input (no TensorFlow)
  python -m benchmarks against --baseline REV   this tree against commit REV, same run
  python -m benchmarks --compare A.json B.json  the ratio of two runs, row by row
  python -m benchmarks --list                   the pipelines (names for --only)
  python -m benchmarks --quick                  a smoke run: a small sample, one round

By default it generates a look-alike sample (~15,000 images), builds it once
with TFDS into --workdir and reuses it; --data-dir points it at any data dir
where the dataset is built in both configs ('224' and 'original').
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import sys
from pathlib import Path

from benchmarks import options
from benchmarks import report as bench_report
from benchmarks.data import DATASETS, DEFAULT_IMAGES_PER_CLASS, DEFAULT_WORKDIR, load_builders

DEFAULT_ROUNDS = 3
# --quick: a sample of some 600 images (Cats vs Dogs), written, built and streamed in minutes.
QUICK_IMAGES_PER_CLASS = {"cats_vs_dogs_fast": 300, "stanford_dogs_tfrecord": 5}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", choices=DATASETS, default=DATASETS[0])
    p.add_argument(
        "--data-dir",
        help="a TFDS data dir where --dataset is built in configs 224 and original "
        "(default: a generated sample in --workdir)",
    )
    p.add_argument("--split", default="train", help="a whole split (default: train)")
    options.add_images_per_class(
        p,
        None,
        "size of the generated sample: photos per class (cats_vs_dogs_fast, default "
        f"{DEFAULT_IMAGES_PER_CLASS['cats_vs_dogs_fast']}) or per breed "
        f"(stanford_dogs_tfrecord, default {DEFAULT_IMAGES_PER_CLASS['stanford_dogs_tfrecord']},"
        " 60%% of them in train)",
    )
    p.add_argument("--workdir", default=str(DEFAULT_WORKDIR), help="samples and results")
    options.add_rounds(p, None, f"interleaved rounds (default {DEFAULT_ROUNDS}; 1 with --quick)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run, to try the benchmark or a change: a small generated sample "
        f"({QUICK_IMAGES_PER_CLASS['cats_vs_dogs_fast']} photos per class; "
        f"{QUICK_IMAGES_PER_CLASS['stanford_dogs_tfrecord']} per breed) and one round, "
        "unless --images-per-class or --rounds say otherwise; its figures are noisier",
    )
    p.add_argument("--only", help="comma-separated pipeline names or patterns, e.g. 'fast_224_*'")
    p.add_argument("--list", action="store_true", help="list the pipelines and exit")
    p.add_argument("--json", help="where to write the results (default: in --workdir/results)")
    p.add_argument("--chart", help="where to write the PNG chart (default: next to the JSON)")
    p.add_argument("--compare", nargs=2, metavar=("A_JSON", "B_JSON"), help="compare two runs")
    train = p.add_argument_group("accelerator-wait mode (--train)")
    train.add_argument("--train", action="store_true", help="train MobileNetV2 on each pipeline")
    train.add_argument(
        "--steps", type=int, default=20, help="timed steps per pipeline (default 20)"
    )
    train.add_argument(
        "--warmup-steps", type=int, default=3, help="untimed steps first (default 3)"
    )
    train.add_argument("--batch-size", type=int, default=16, help="(default 16)")
    train.add_argument("--image-size", type=int, default=224, help="(default 224; >= 32)")
    train.add_argument("--weights", choices=["imagenet"], help="default: random init (offline)")
    train.add_argument(
        "--model",
        choices=["mobilenetv2", "tiny"],
        default="mobilenetv2",
        help="the model trained (default mobilenetv2); 'tiny' is one convolution, for checking "
        "that the mode runs in seconds (the tests), not for its figures",
    )
    p.add_argument(
        "--loaders",
        action="store_true",
        help="the non-TensorFlow rows instead: the Grain loader (as_fast_loader) vs "
        "as_fast_dataset(uint8, cache=False) and ImageFolder + DataLoader (needs .[bench])",
    )
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else DEFAULT_ROUNDS
    _check(p, args)
    return args


def sample_size(args: argparse.Namespace) -> int:
    """Photos per class (per breed) of the generated sample these arguments ask for."""
    if args.images_per_class is not None:
        return args.images_per_class
    sizes = QUICK_IMAGES_PER_CLASS if args.quick else DEFAULT_IMAGES_PER_CLASS
    return sizes[args.dataset]


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    positive = {"--steps": args.steps, "--batch-size": args.batch_size}
    positive["--warmup-steps"] = args.warmup_steps  # >= 1: the trace is never timed
    options.check_counts(parser, args, positive)
    if args.model == "tiny" and args.weights:
        parser.error("--weights: only MobileNetV2 has them; leave out --model tiny")
    if args.model == "mobilenetv2" and args.image_size < 32:
        parser.error(f"--image-size={args.image_size}: MobileNetV2 needs at least 32")
    if "[" in args.split:
        parser.error(
            f"--split={args.split}: use a whole split such as 'train'; the baseline pipelines "
            "read whole shard files, so a slice would count different images"
        )
    if args.data_dir and args.images_per_class is not None:
        parser.error(
            "--images-per-class sizes the generated sample; it has no effect with --data-dir"
        )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["sizes"]:  # A run of its own, with its own options.
        from benchmarks import sizes

        sizes.main(argv[1:], prog="python -m benchmarks sizes")
        return
    if argv[:1] == ["bucket"]:  # Reads from an emulated gs:// bucket: a run of its own.
        from benchmarks import bucket

        bucket.main(argv[1:], prog="python -m benchmarks bucket")
        return
    if argv[:1] == ["against"]:  # This tree against an earlier commit: a run of its own.
        from benchmarks import against_commit

        against_commit.main(argv[1:], prog="python -m benchmarks against")
        return
    if argv[:1] == ["recipes"]:  # Augmentation recipes: a run of its own.
        from benchmarks import recipes

        recipes.main(argv[1:], prog="python -m benchmarks recipes")
        return
    args = parse_args(argv)
    if args.compare:
        print(bench_report.compare(*args.compare))
        return
    from fast_tfds.quiet import quiet_tensorflow

    quiet_tensorflow()
    from benchmarks import stream as bench_stream
    from benchmarks import train as bench_train

    if args.list:
        rows = bench_train.ROWS if args.train else bench_stream.all_pipelines()
        for row in rows:
            print(f"{row.name:<34}{row.label}")
        return
    selected = bench_stream.select(
        bench_train.ROWS if args.train else bench_stream.all_pipelines(), args.only
    )
    importlib.import_module(args.dataset)  # registers the dataset with TFDS
    images_per_class = sample_size(args)
    if args.data_dir:
        data_dir = Path(args.data_dir)
    else:
        from benchmarks.data import sample_data_dir

        data_dir = sample_data_dir(args.dataset, Path(args.workdir), images_per_class)
    if args.loaders:  # Same sample, same rounds; benchmarks.loaders prints its table.
        from benchmarks import loaders

        json_path = args.json or _default_path(args.workdir, "loaders")
        loader_argv = ["--data-dir", str(data_dir), "--dataset", args.dataset]
        loader_argv += ["--split", args.split, "--rounds", str(args.rounds)]
        loaders.main([*loader_argv, "--workdir", args.workdir, "--json", str(json_path)])
        print(f"Wrote {json_path}")
        return
    configs = sorted({p.config for p in selected} | ({"224"} if args.train else set()))
    builders = load_builders(args.dataset, data_dir, configs, args.split)
    result = {
        "schema": 1,
        "mode": "train" if args.train else "stream",
        "command": " ".join(["python -m benchmarks", *argv]),
        "machine": _machine(),
        "dataset": {
            "name": args.dataset,
            "split": args.split,
            "data_dir": str(data_dir),
            "images": builders[configs[0]].info.splits[args.split].num_examples,
            "generated_sample_images_per_class": None if args.data_dir else images_per_class,
        },
    }
    if args.train:
        _run_train(args, selected, builders, result)
        text = bench_report.train_table(result)
    else:
        _run_stream(args, selected, builders, result)
        text = bench_report.stream_table(result)
    print("\n" + text + "\n")
    json_path = Path(args.json or _default_path(args.workdir, result["mode"]))
    chart_path = Path(args.chart or json_path.with_suffix(".png"))
    print(f"Wrote {bench_report.write_json(result, json_path)}")
    print(f"Wrote {bench_report.write_chart(result, chart_path)}")
    if not result.get("counts_consistent", True):
        raise SystemExit(
            "benchmark: a pipeline did not yield every image once per epoch (see above)"
        )


def _run_stream(args, selected, builders, result) -> None:
    from benchmarks import stream as bench_stream

    inputs = bench_stream.Inputs(builders, args.split)
    images = result["dataset"]["images"]
    on_disk = bench_stream.jpeg_bytes_on_disk(inputs, set(builders))
    bench_stream.check_memory(selected, images, on_disk)
    raw = bench_stream.run(selected, inputs, args.rounds)
    summaries = {p.name: bench_stream.summarize(p, raw[p.name], images) for p in selected}
    result["rounds"] = args.rounds
    result["pipelines"] = {
        p.name: {
            "label": p.label,
            "group": p.group,
            "output": p.output,
            "config": p.config,
            "cached": p.cached,
            "ceiling": p.ceiling,
            "rounds": raw[p.name],
            "summary": summaries[p.name],
        }
        for p in selected
    }
    if "224" in builders and any(p.name.startswith("fast_224") for p in selected):
        from benchmarks import epoch_boundaries

        print("Timing Keras fit's epoch boundaries ...", flush=True)
        result["epoch_boundaries"] = epoch_boundaries.measure(
            builders["224"], f"{args.split}[:10%]"
        )
    errors = [
        f"{name} round {r + 1} epoch {e + 1}: {epoch['images']} images, expected {images}"
        for name, rounds in raw.items()
        for r, one in enumerate(rounds)
        for e, epoch in enumerate(one["epochs"])
        if epoch["images"] != images
    ]
    result["images_per_epoch"] = images
    result["counts_consistent"] = not errors
    result["count_errors"] = errors


def _run_train(args, selected, builders, result) -> None:
    from benchmarks import train as bench_train

    result.update(
        steps=args.steps,
        warmup_steps=args.warmup_steps,
        batch_size=args.batch_size,
        image_size=args.image_size,
        weights=args.weights,
        model=args.model,
        device=bench_train.device_name(),
    )
    result["pipelines"] = bench_train.run(
        builders,
        args.split,
        steps=args.steps,
        warmup=args.warmup_steps,
        batch_size=args.batch_size,
        image_size=args.image_size,
        weights=args.weights,
        model=args.model,
        only=[row.name for row in selected],
    )


def _machine() -> dict:
    from benchmarks.data import machine_info

    return machine_info()


def _default_path(workdir: str, mode: str) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(workdir) / "results" / f"{mode}-{stamp}.json"


if __name__ == "__main__":
    main()
