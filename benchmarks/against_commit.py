"""This working tree against an earlier commit, on the same data, in one run.

    python -m benchmarks.against_commit --baseline COMMIT [--images-per-class 500]
        [--rounds 3] [--workdir fast_tfds_bench] [--save]
    (or `python -m benchmarks against ...`)

The baseline is checked out in a temporary `git worktree add --detach` (removed at the
end). Every measurement runs in a fresh process of this interpreter with PYTHONPATH and
the working directory set to one tree; the child checks that `fast_tfds` and
`cats_vs_dogs_fast` come from that tree (not from an editable install). The generated
Cats vs Dogs sample is built once, by this tree, and both trees read the same build
(the run stops if their builder versions differ). Each round runs every measurement for
both trees back to back, the baseline first in odd rounds and the current tree first in
even ones: this machine's speed swings within seconds, so only interleaved figures compare.

Rows, images/s (uint8, batch 64, image_size 224, shuffled, seed 0; plain rows read config
`224`, augmented rows config `original` with augment=fast_tfds.Augment(), the random-
resized crop + flip, as benchmarks.persist and benchmarks.recipes do):
- tf.data plain fill / served: as_fast_dataset(cache=True), epoch 1 (fills the cache),
  then epochs 2-3 of the same dataset (served from it);
- tf.data augmented fill / served: the same with augment=Augment();
- loader plain / augmented fill / served: the same rows for the Grain loader,
  as_fast_loader(cache=True, num_workers=0) over ArrayRecord files added next to the
  build (`tfds convert_format`); each pass of the loader is an epoch;
- persist fill / served: as_fast_dataset(cache=True, persist=True), config 224, a fresh
  cache folder per round and tree: epoch 1 of a first process (fills the file; the
  process then waits until the file is in place, untimed), and epoch 1 of a second
  process, served from that file;
- tf.data plain / augmented stream: as_fast_dataset(cache=False), epochs 1-2.
- tf.data transform fill / served: the plain read with transform= a function that
  returns its example unchanged: each example decoded alone, and copied into the arena
  of examples (epoch 1), then served from it (the plan of a `transform`, such as
  Stanford Dogs' crop to the box, and of a tf.data service's examples).
- tf.data default f32 / uint8 fill / served: the default read of config `224`,
  as_fast_dataset("train") with no other option (float32, batch 32, cache=True,
  shuffled without a seed), and the same with dtype=tf.uint8: epoch 1, then epochs 2-3.

`--only tf_plain,loader_aug` runs some of the measurements (names as in MEASUREMENTS);
`--served-epochs N` times N served epochs instead of 2 (a served epoch of 4,000 images
lasts under half a second here: more of them steady the figures).

A second table gives images per CPU-second of the measuring process (all its threads),
which other work on the machine sways less than it sways images/s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from benchmarks import options
from benchmarks.data import REPO_ROOT, sample_data_dir

DATASET = "cats_vs_dogs_fast"
BATCH = 64

_CHILD = textwrap.dedent(
    """
    import json, pathlib, sys, time
    spec = json.loads(sys.argv[1])
    import fast_tfds, cats_vs_dogs_fast
    tree = pathlib.Path(spec["tree"]).resolve()
    for module in (fast_tfds, cats_vs_dogs_fast):
        where = pathlib.Path(module.__file__).resolve()
        assert tree in where.parents, f"{module.__name__} imported from {where}, not {tree}"
    print(json.dumps({"fast_tfds": fast_tfds.__file__}), flush=True)
    if spec["probe"]:
        import tensorflow_datasets as tfds
        built = [tfds.builder(spec["dataset"], config=c, data_dir=spec["data_dir"]).is_prepared()
                 for c in ("224", "original")]
        print(json.dumps({"version": str(cats_vs_dogs_fast.Builder.VERSION), "built": built}))
        sys.exit()
    options = dict(data_dir=spec["data_dir"], config=spec["config"], download_and_prepare=False)
    if not spec["defaults"]:
        options.update(image_size=224, batch_size=spec["batch"], seed=0, cache=spec["cache"])
    if spec["augment"]:
        options["augment"] = fast_tfds.Augment()
    if spec["transform"]:
        options["transform"] = lambda example: example  # the plan of any transform
    if spec["persist"]:
        options.update(persist=True, cache_dir=spec["cache_dir"])
    if spec["loader"]:
        reader = cats_vs_dogs_fast.as_fast_loader("train", num_workers=0, **options)
    else:
        import tensorflow as tf
        if spec["dtype"] is not None:
            options["dtype"] = getattr(tf, spec["dtype"])
        reader = cats_vs_dogs_fast.as_fast_dataset("train", **options)
    for epoch in range(spec["epochs"]):
        start, cpu, n = time.perf_counter(), time.process_time(), 0
        for images, labels in reader:
            n += int(images.shape[0])
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(json.dumps({"seconds": seconds, "cpu": cpu, "n": n}), flush=True)
    if spec["persist"] and spec["epochs"] == 1:  # the fill: wait until the file is in place
        deadline = time.time() + 300
        while not list(pathlib.Path(spec["cache_dir"]).glob("*.arena")):
            assert time.time() < deadline, "no .arena file 300 s after the fill"
            time.sleep(0.01)
    if hasattr(reader, "close"):
        reader.close()
    """
)

# Measurements, each one process per tree: name -> (options, {row: the epochs it times}).
_PLAIN = {"config": "224", "augment": False, "loader": False}
_AUG = {"config": "original", "augment": True, "loader": False}
_DEFAULT = {**_PLAIN, "defaults": True, "dtype": None}


def _rows(name: str) -> dict[str, list[int]]:
    return {f"{name} fill": [0], f"{name} served": [1, 2]}


MEASUREMENTS = {
    "tf_plain": (_PLAIN, _rows("tf.data plain")),
    "tf_aug": (_AUG, _rows("tf.data augmented")),
    "loader_plain": ({**_PLAIN, "loader": True}, _rows("loader plain")),
    "loader_aug": ({**_AUG, "loader": True}, _rows("loader augmented")),
    "persist_fill": ({**_PLAIN, "persist": True}, {"persist fill": [0]}),
    "persist_read": ({**_PLAIN, "persist": True}, {"persist served": [0]}),
    "tf_plain_stream": ({**_PLAIN, "cache": False}, {"tf.data plain stream": [0, 1]}),
    "tf_aug_stream": ({**_AUG, "cache": False}, {"tf.data augmented stream": [0, 1]}),
    "tf_transform": ({**_PLAIN, "transform": True}, _rows("tf.data transform")),
    # The default read: only the dtype named (no seed, batch 32, cache=True).
    "tf_default": (_DEFAULT, _rows("tf.data default f32")),
    "tf_default_uint8": ({**_DEFAULT, "dtype": "uint8"}, _rows("tf.data default uint8")),
}


def child(tree: Path, spec_in: dict) -> list[dict]:
    """The JSON lines a measuring process printed, run in and importing from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"
    spec = {"tree": str(tree), "probe": False, "persist": False, "cache": True, "batch": BATCH}
    spec.update(defaults=False, dtype="uint8", transform=False)
    spec.update(spec_in)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(spec)],
        cwd=tree,  # `-c` puts the working directory first on sys.path, before PYTHONPATH
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"a child in {tree} failed ({spec}):\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO_ROOT), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def prepare_data(workdir: Path, images_per_class: int) -> tuple[Path, int]:
    """The sample (built by this tree), with ArrayRecord files for the loader rows."""
    import tensorflow_datasets as tfds

    from benchmarks.loaders import add_array_record_files

    data_dir = sample_data_dir(DATASET, workdir, images_per_class).resolve()
    for config in ("224", "original"):
        (folder,) = (data_dir / DATASET / config).glob("*/dataset_info.json")
        builder = add_array_record_files(tfds.builder_from_directory(str(folder.parent)))
    return data_dir, builder.info.splits["train"].num_examples


def check_trees(trees: dict[str, Path], data_dir: Path) -> str:
    """Both trees import their own package, have one builder version and read the build."""
    versions = {}
    for name, tree in trees.items():
        lines = child(tree, {"probe": True, "dataset": DATASET, "data_dir": str(data_dir)})
        versions[name] = lines[-1]["version"]
        print(f"  {name}: fast_tfds from {lines[0]['fast_tfds']}, {DATASET} {versions[name]}")
        if not all(lines[-1]["built"]):
            raise SystemExit(f"{name} ({tree}) cannot read the build in {data_dir}")
    if len(set(versions.values())) > 1:
        raise SystemExit(f"{DATASET}'s builder version differs between the trees: {versions}")
    return versions["current"]


def rows_of(name: str, served_epochs: int) -> dict[str, list[int]]:
    """{row: the epochs it times} of measurement `name`, with `served_epochs` served ones."""
    rows = MEASUREMENTS[name][1]
    return {
        row: list(range(1, 1 + served_epochs)) if row.endswith(" served") and len(es) > 1 else es
        for row, es in rows.items()
    }


def measure(
    name: str, tree: Path, data_dir: Path, cache_dir: Path, images: int, served_epochs: int = 2
) -> tuple[dict, dict]:
    """({row: images/s}, {row: images per CPU-second of the process}) of one measurement
    in one tree; every epoch must count every image."""
    options = MEASUREMENTS[name][0]
    rows = rows_of(name, served_epochs)
    epochs = 1 + max(e for es in rows.values() for e in es)
    spec = {**options, "data_dir": str(data_dir), "cache_dir": str(cache_dir), "epochs": epochs}
    timed = child(tree, spec)[1:]
    if [e["n"] for e in timed] != [images] * epochs:
        raise SystemExit(f"{name} in {tree}: epochs of {[e['n'] for e in timed]} images")

    def rate(key: str) -> dict:
        return {row: images * len(es) / sum(timed[e][key] for e in es) for row, es in rows.items()}

    return rate("seconds"), rate("cpu")


def run(
    trees: dict[str, Path],
    data_dir: Path,
    images: int,
    rounds: int,
    scratch: Path,
    names,
    served_epochs: int = 2,
):
    """({row: {tree: [images/s per round]}}, the same of images per CPU-second) of
    measurements `names`, in interleaved rounds."""
    rows = [row for name in names for row in MEASUREMENTS[name][1]]
    rates = {row: {tree: [] for tree in trees} for row in rows}
    per_cpu = {row: {tree: [] for tree in trees} for row in rows}
    for round_ in range(rounds):
        start = time.perf_counter()
        order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
        for name in names:
            for tree in order:
                cache_dir = scratch / f"round{round_}-{tree}"  # persist_read reads the fill's
                got, cpu = measure(name, trees[tree], data_dir, cache_dir, images, served_epochs)
                for row, rate in got.items():
                    rates[row][tree].append(rate)
                    per_cpu[row][tree].append(cpu[row])
                print(f"  round {round_ + 1} {tree:<8} {name:<13}", end="")
                print("  ".join(f"{r}: {v:,.0f}/s" for r, v in got.items()), flush=True)
        print(f"round {round_ + 1}: {time.perf_counter() - start:.0f} s", flush=True)
    return rates, per_cpu


def table(rates: dict, sha: str, unit: str = "img/s") -> str:
    rounds = len(next(iter(rates.values()))["current"])
    width = max(20, 7 * rounds + 2)

    def figures(values, form, width=width):
        return f"{' '.join(form.format(v) for v in values):>{width}}"

    head = f"{'baseline ' + unit:>{width}}{'current ' + unit:>{width}}{'ratio per round':>{width}}"
    lines = [f"{'row':<26}{head}  median"]
    for row, by_tree in rates.items():
        ratios = [c / b for b, c in zip(by_tree["baseline"], by_tree["current"], strict=True)]
        lines.append(
            f"{row:<26}{figures(by_tree['baseline'], '{:6.0f}')}"
            f"{figures(by_tree['current'], '{:6.0f}')}{figures(ratios, '{:6.2f}')}"
            f"  {statistics.median(ratios):.2f}x"
        )
    lines.append(f"ratio = current / baseline ({sha}) on the same data, same run")
    return "\n".join(lines)


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks.against_commit"):
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--baseline", required=True, help="a commit-ish of this repository")
    options.add_images_per_class(p, 500)
    options.add_rounds(p, 3)
    p.add_argument("--workdir", default="fast_tfds_bench", help="where the sample is built")
    p.add_argument("--save", action="store_true", help="also write benchmarks/results/...txt")
    p.add_argument("--only", help="comma-separated measurement names (default: all)")
    p.add_argument(
        "--served-epochs",
        type=int,
        default=2,
        help="served epochs timed after the fill (default 2: epochs 2-3); more for steadier "
        "figures where a served epoch lasts well under a second",
    )
    args = p.parse_args(argv)
    names = list(MEASUREMENTS) if not args.only else args.only.split(",")
    unknown = [name for name in names if name not in MEASUREMENTS]
    if unknown:
        p.error(f"--only: unknown {unknown}; one of {', '.join(MEASUREMENTS)}")
    names = [name for name in MEASUREMENTS if name in names]  # the fill before its read
    if "persist_read" in names and "persist_fill" not in names:
        p.error("--only: persist_read serves the file persist_fill writes; name both")
    options.check_counts(p, args, {"--served-epochs": args.served_epochs})
    sha = git("rev-parse", "--verify", f"{args.baseline}^{{commit}}")[:7]
    head = git("rev-parse", "--short=7", "HEAD")
    dirty = git("status", "--porcelain", "--", "fast_tfds", DATASET)
    current = f"{REPO_ROOT} at {head}{' + uncommitted changes' if dirty else ''}"
    data_dir, images = prepare_data(Path(args.workdir), args.images_per_class)
    scratch = Path(tempfile.mkdtemp(prefix="bench-against-"))
    base_tree = scratch / "baseline"
    git("worktree", "add", "--detach", str(base_tree), sha)
    try:
        trees = {"baseline": base_tree, "current": REPO_ROOT}
        version = check_trees(trees, data_dir)
        print(f"{images} images, {args.rounds} rounds; baseline {sha}, current {current}")
        rates, per_cpu = run(
            trees, data_dir, images, args.rounds, scratch, names, args.served_epochs
        )
    finally:
        git("worktree", "remove", "--force", str(base_tree))
        shutil.rmtree(scratch, ignore_errors=True)
    report = "\n".join(
        [
            " ".join([prog, *(sys.argv[1:] if argv is None else argv)]),
            f"{datetime.datetime.now().isoformat(timespec='seconds')}, {os.cpu_count()} CPUs",
            f"baseline {sha}; current {current}",
            f"{DATASET} {version} sample: {images} train images ({data_dir}); uint8, batch "
            f"{BATCH}, 224; tf.data and loader rows shuffled, seed 0 (default rows: the "
            f"defaults, float32 or uint8, batch 32, no seed); served = epochs "
            f"2-{1 + args.served_epochs}",
            "",
            table(rates, sha),
            "",
            "Images per CPU-second of the measuring process (all its threads): less swayed "
            "by other work, not by the CPU's own speed swings",
            table(per_cpu, sha, "img/CPU-s"),
        ]
    )
    print("\n" + report)
    if args.save:
        out = REPO_ROOT / "benchmarks" / "results"
        out /= f"bench-against-{sha}-{datetime.date.today().isoformat()}.txt"
        out.write_text(report + "\n")
        print(f"Wrote {out}")


if __name__ == "__main__":
    main()
