"""Epoch 1 from a gs:// bucket (emulated on loopback), with latency added per request.

    python -m benchmarks bucket --images-per-class 300 --latencies 0,20,50 --rounds 1

With `--store s3`, from S3 instead: moto's server (`tests/bucket/stores.py`) behind the
same proxy and its latency per request; the `article` pipeline (TensorFlow's file system,
which reads no s3://) and the options about TensorFlow's GCS client are not run there.

The bucket is `tests/bucket/emulated.py`'s: gcp-storage-emulator behind a loopback
proxy that TensorFlow's GCS client reaches through TLS and array_record and gcsfs
through plain HTTP; the proxy sleeps the given milliseconds before forwarding each
request. The sample's config 224 is uploaded twice: as TFRecords (tf.data) and as
ArrayRecords (the loader). Each pipeline's epoch 1 runs in a fresh process (a cold
GCS client, no cache), timed from the call that opens the dataset to its last batch
(opening reads metadata from the bucket too), batch 32:

- `article`: the source article's pipeline over the same bucket (TFRecordDataset +
  interleave + parallel map decode + cache + prefetch; float32), as
  `benchmarks.baselines.parallel_pipeline` writes it;
- `as_fast_dataset`: the reader's default (memory cache, float32), which reads the shards
  from whole-object local copies made with gcsfs; with `--tf-gcs-client`, also
  `as_fast_dataset:tf-gcs`, the same without gcsfs (TensorFlow's GCS client reads them);
- `as_fast_loader`: the Grain loader over the ArrayRecord files (uint8); with
  `--loader-threads N`, also `as_fast_loader:N`, the loader with num_threads=N.

With `--persist`, also `as_fast_dataset` and `as_fast_loader` with `cache=True,
persist=True` at each latency: a first process fills the local decoded file from the bucket
(its epoch 2 is the served rate, from the cache it filled), and the next process's epoch 1
comes from that file (the ratio to the served rate is printed, with the shard objects'
bytes it asked the bucket for: none, when the key matched).

With `--gcs-block-mb N`, also `article+NMB` and `as_fast_dataset+NMB`: the same with
TensorFlow's GCS_READ_CACHE_BLOCK_SIZE_MB=N in their environment (TensorFlow reads it
when imported; its default, 64, allocates a 64 MB buffer for every shard file opened).

With `--gcsfs-metadata`, also `as_fast_dataset+gcsfs-metadata` and
`as_fast_loader+gcsfs-metadata`: the same with etils' `EPATH_USE_TF=false` in their
environment, so that TFDS reads the dataset's metadata through gcsfs (no zonal-bucket
check, which imports Google's storage-control client, no TensorFlow GCS client).

With `--baseline-tree PATH` (another checkout, e.g. `git worktree add --detach PATH main`),
also `as_fast_dataset@base` and `as_fast_loader@base`: the same reads by that tree's code
(its PYTHONPATH and working directory), each beside this tree's in every round (this
tree's first in odd rounds, the baseline's in even ones), and the ratio of this tree's
rate to it (per round and the median). With `--phases`, each round's line adds when the
opening call returned and when the first batch came (seconds from the opening call), and,
from the bucket, when the shards' whole-object copies started and the last one landed.

Beside each row: its CPU seconds, of the pipeline's process over the timed epoch and of
the emulator's and the proxy's (this process's threads) over the child's run, to tell
what the bucket costs this machine's CPU from what the pipeline does.

Each is also read from the local copy (`local`, no proxy). The ratios printed name their
reference: the same pipeline's local epoch 1, and the article's epoch 1 from the bucket
at the same latency. The proxy is Python on the same CPU, so at 0 ms it costs what a
real bucket's network would not; compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from benchmarks import options
from benchmarks.data import REPO_ROOT, sample_data_dir

PIPELINES = ("article", "as_fast_dataset", "as_fast_loader")
BATCH = 32
CHILD_TIMEOUT_S = 1800

_CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    pipeline, data_dir = sys.argv[1:3]
    # "as_fast_dataset@base": the same read by the baseline tree (the parent's cwd and
    # PYTHONPATH chose it; the parent checks where fast_tfds came from).
    pipeline = pipeline.split("@")[0]
    if pipeline.endswith(":tf-gcs"):
        # gcsfs not importable: as_fast_dataset reads the shards through TensorFlow's GCS
        # client, as it did before it read them from whole-object copies.
        import importlib.abc

        class NoGcsfs(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "gcsfs":
                    raise ModuleNotFoundError("gcsfs blocked", name=name)

        sys.meta_path.insert(0, NoGcsfs())
    # "article+8MB": the article's pipeline with GCS_READ_CACHE_BLOCK_SIZE_MB=8 (set by
    # the parent in this process's environment: TensorFlow reads it when imported).
    pipeline = pipeline.split("+")[0]
    # Imported first in every process, the loader's too: TFDS reads a gs:// dataset's
    # metadata through TensorFlow where it is installed, and its import is not the bucket's.
    import tensorflow as tf
    import cats_vs_dogs_fast
    # When each whole-object copy started and landed (the DEBUG records of
    # fast_tfds.cache.remote.copies' `timeline`, whose name and `PHASE` the parent wrote
    # here: importing it now would take its import out of the timed call), in seconds
    # from the opening call, for --phases. A baseline tree's code may give none.
    import logging
    copy_times = {"started": [], "landed": []}

    class CopyTimes(logging.Handler):
        def emit(self, record):
            phase = getattr(record, "COPY_PHASE", None)
            if phase in copy_times:
                copy_times[phase].append(time.perf_counter() - start)

    timeline = logging.getLogger("COPY_TIMELINE")
    timeline.addHandler(CopyTimes())
    timeline.setLevel(logging.DEBUG)
    timeline.propagate = False
    start, cpu = time.perf_counter(), time.process_time()
    if pipeline.startswith("as_fast_loader"):
        # "as_fast_loader:16": with num_threads=16.
        threads = int(pipeline.split(":")[1]) if ":" in pipeline else None
        ds = cats_vs_dogs_fast.as_fast_loader(
            "train", data_dir=data_dir, batch_size=BATCH, seed=0, download_and_prepare=False,
            num_threads=threads, cache=False)
    else:
        if pipeline == "article":
            from benchmarks.baselines import parallel_pipeline
            pattern = f"{data_dir}/cats_vs_dogs_fast/224/1.0.0/*-train.tfrecord-*"
            ds = parallel_pipeline(sorted(tf.io.gfile.glob(pattern)), batch_size=BATCH)
        else:
            ds = cats_vs_dogs_fast.as_fast_dataset(
                "train", data_dir=data_dir, batch_size=BATCH, seed=0,
                download_and_prepare=False)
    opened, first, n = time.perf_counter() - start, None, 0
    for images, labels in ds:
        n += int(labels.shape[0])
        first = time.perf_counter() - start if first is None else first
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    import fast_tfds
    copies = [min(copy_times["started"]), max(copy_times["landed"]),
              len(copy_times["landed"])] if copy_times["landed"] else None
    print(json.dumps({"n": n, "seconds": seconds, "cpu": cpu, "opened": opened,
                      "first": first, "copies": copies, "code": fast_tfds.__file__}),
          flush=True)
    """
).replace("BATCH", str(BATCH))


# argv: pipeline (as_fast_dataset or as_fast_loader), data_dir, cache_dir, epochs. One JSON
# line: the seconds the call that opens the dataset took, then examples and seconds per epoch.
_PERSIST_CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    pipeline, data_dir, cache_dir, epochs = sys.argv[1:5]
    import tensorflow as tf
    import cats_vs_dogs_fast
    start = time.perf_counter()
    read = getattr(cats_vs_dogs_fast, pipeline)
    ds = read("train", data_dir=data_dir, batch_size=BATCH, seed=0, download_and_prepare=False,
              cache=True, persist=True, cache_dir=cache_dir)
    out = [time.perf_counter() - start]
    start = time.perf_counter()
    for _ in range(int(epochs)):
        n = 0
        for images, labels in ds:
            n += int(labels.shape[0])
        out.append([n, time.perf_counter() - start])
        start = time.perf_counter()
    print(json.dumps(out), flush=True)
    """
).replace("BATCH", str(BATCH))
PERSISTED = ("as_fast_dataset", "as_fast_loader")
SHARD_MARKS = (".tfrecord-", ".array_record-")


def persisted_rates(pipeline: str, data_dir: str, cache_dir: Path, bucket) -> dict[str, float]:
    """{"filling", "served", "next run"}: examples/s of the filling run's epochs 1 and 2
    and of the next process's epoch 1, each from its first batch asked for; "next open":
    the seconds the next process's call that opens the dataset took (the bucket's
    metadata, the listing for the key, mapping the file); "shard reads": the shard
    objects' bytes the next run asked the bucket for."""

    def run(epochs: int) -> tuple[float, list[float]]:
        done = subprocess.run(
            [sys.executable, "-c", _PERSIST_CHILD, pipeline, data_dir, str(cache_dir), str(epochs)],
            capture_output=True,
            text=True,
            env=child_env(bucket.env()),
            timeout=CHILD_TIMEOUT_S,
            cwd=REPO_ROOT,
        )
        if done.returncode != 0:
            raise SystemExit(f"{pipeline} persist from {data_dir} failed: {done.stderr[-3000:]}")
        opened, *epochs_done = json.loads(done.stdout.strip().splitlines()[-1])
        return opened, [n / seconds for n, seconds in epochs_done]

    shutil.rmtree(cache_dir, ignore_errors=True)
    cache_dir.mkdir(parents=True)
    _, (filling, served) = run(2)
    bucket.proxy.reset()
    next_open, (next_run,) = run(1)
    shard_reads = [r for r in bucket.proxy.media_reads() if any(m in r.object for m in SHARD_MARKS)]
    return {
        "filling": filling,
        "served": served,
        "next run": next_run,
        "next open": next_open,
        "shard reads": float(len(shard_reads)),
    }


def child_env(extra: dict[str, str], tree: Path | None = None) -> dict[str, str]:
    """The children's environment; `tree`: another checkout's code (its path alone)."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    if tree is not None:
        path = str(tree)
    return {
        **os.environ,
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": path,
        **extra,
    }


def cpu_of(pid: int | None) -> float:
    """CPU seconds (user + system) process `pid` has used so far (Linux' /proc); 0 without."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rusage(who) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """CPU seconds, over one child's run, of the emulator (its own process) and of this
    process, whose threads are the proxy (the benchmark itself only waits for the child
    meanwhile)."""

    def __init__(self, bucket=None):
        # The GCS emulator's process is `bucket.emulator.process`; S3's server, `bucket.process`.
        server = getattr(bucket, "emulator", bucket)
        self.emulator_pid = None if bucket is None else server.process.pid

    def __enter__(self):
        self.start = (cpu_of(self.emulator_pid), _rusage(resource.RUSAGE_SELF))
        return self

    def __exit__(self, *exc):
        end = (cpu_of(self.emulator_pid), _rusage(resource.RUSAGE_SELF))
        self.emulator, self.proxy = (b - a for a, b in zip(self.start, end, strict=True))
        if self.emulator_pid is None:
            self.emulator = self.proxy = 0.0


GCS_BLOCK_ENV = "GCS_READ_CACHE_BLOCK_SIZE_MB"


# etils' setting: TFDS's paths (epath) read gs:// through gcsfs, not TensorFlow.
GCSFS_METADATA = "gcsfs-metadata"
EPATH_ENV = {"EPATH_USE_TF": "false"}


def block_env(pipeline: str) -> dict[str, str]:
    """TensorFlow's GCS read block for a pipeline named "NAME+8MB", etils' EPATH_USE_TF=false
    for "NAME+gcsfs-metadata"; {} for the others."""
    if "+" not in pipeline:
        return {}
    if pipeline.split("+")[1] == GCSFS_METADATA:
        return dict(EPATH_ENV)
    return {GCS_BLOCK_ENV: pipeline.split("+")[1].removesuffix("MB")}


def epoch_one(
    pipeline: str, data_dir: str, env: dict[str, str], bucket=None, baseline: Path | None = None
) -> dict:
    """`pipeline`'s epoch 1 from `data_dir`, in a fresh process (of `baseline`'s code for a
    pipeline named "NAME@base"): {"rate": examples/s, "seconds": its wall time, "opened",
    "first": seconds to the opening call's return and to the first batch, "cpu":
    {"pipeline", "emulator", "proxy"}: CPU seconds of each process}."""
    from fast_tfds.cache.remote import copies

    tree = baseline if pipeline.endswith("@base") else None
    child = _CHILD.replace("COPY_TIMELINE", copies.timeline.name)
    child = child.replace("COPY_PHASE", copies.PHASE)
    with CpuMeter(bucket) as meter:
        done = subprocess.run(
            [sys.executable, "-c", child, pipeline, data_dir],
            capture_output=True,
            text=True,
            env=child_env({**env, **block_env(pipeline)}, tree),
            timeout=CHILD_TIMEOUT_S,
            cwd=tree or REPO_ROOT,
        )
    if done.returncode != 0:
        raise SystemExit(f"{pipeline} from {data_dir} failed: {done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    code = Path(result["code"]).resolve()
    if not code.is_relative_to(Path(tree or REPO_ROOT).resolve()):
        raise SystemExit(f"{pipeline}: fast_tfds came from {code}, not {tree or REPO_ROOT}")
    # The pipeline's CPU over the timed epoch (its imports apart); the bucket's over the
    # child's whole run (it works only while asked: the metadata and the epoch).
    cpu = {"pipeline": result["cpu"], "emulator": meter.emulator, "proxy": meter.proxy}
    return {
        "rate": result["n"] / result["seconds"],
        "seconds": result["seconds"],
        "opened": result["opened"],
        "first": result["first"],
        "copies": result.get("copies"),  # None from a baseline tree without the records
        "cpu": cpu,
    }


def phase_words(found: dict, phases: bool) -> str:
    """With --phases: when the opening call returned and the first batch came, and when
    the shards' whole-object copies (a bucket's) started and the last one landed."""
    if not phases:
        return ""
    words = f", opened at {found['opened']:.2f} s, first batch at {found['first']:.2f} s"
    if found.get("copies"):
        first, last, count = found["copies"]
        words += f", {count} copies from {first:.2f} s to {last:.2f} s"
    return words


def cpu_words(found: dict) -> str:
    cpu = found["cpu"]
    words = f"CPU s: pipeline {cpu['pipeline']:.1f}"
    if cpu["emulator"] or cpu["proxy"]:
        words += f", emulator {cpu['emulator']:.2f}, proxy {cpu['proxy']:.2f}"
    return words


def array_record_dir(workdir: Path, images_per_class: int) -> Path:
    """The sample's config 224 built as ArrayRecord files (from its archives), once."""
    root = Path(workdir) / f"cats_vs_dogs_fast-{images_per_class}"
    out = root / "array_record"
    if (out / "cats_vs_dogs_fast/224/1.0.0/dataset_info.json").exists():
        return out
    code = (
        "import sys, cats_vs_dogs_fast, tensorflow_datasets as tfds\n"
        "tfds.builder('cats_vs_dogs_fast', config='224', data_dir=sys.argv[1])"
        ".download_and_prepare(file_format='array_record', "
        "download_config=tfds.download.DownloadConfig(manual_dir=sys.argv[2]))\n"
    )
    command = [sys.executable, "-c", code, str(out), str(root / "manual")]
    subprocess.run(command, check=True, env=child_env({}), timeout=CHILD_TIMEOUT_S)
    return out


def main(argv=None, prog: str = "python -m benchmarks bucket") -> None:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    options.add_images_per_class(parser, 300)
    parser.add_argument("--latencies", default="0,20,50", help="ms added per request")
    options.add_rounds(parser, 1)
    parser.add_argument("--workdir", default="fast_tfds_bench")
    parser.add_argument(
        "--store",
        choices=("gs", "s3"),
        default="gs",
        help="the store read from: gs (gcp-storage-emulator) or s3 (moto's server)",
    )
    parser.add_argument(
        "--loader-threads",
        type=int,
        help="also the loader with num_threads=N (default: one thread per core)",
    )
    parser.add_argument(
        "--gcs-block-mb",
        type=int,
        help="also the article's pipeline and as_fast_dataset with TensorFlow's "
        "GCS_READ_CACHE_BLOCK_SIZE_MB=N (default 64) in their environment",
    )
    parser.add_argument(
        "--tf-gcs-client",
        action="store_true",
        help="also as_fast_dataset with gcsfs blocked (TensorFlow's GCS client reads the shards)",
    )
    parser.add_argument(
        "--persist",
        action="store_true",
        help="also persist=True: the next run's epoch 1 from the local decoded file",
    )
    parser.add_argument(
        "--persist-only", action="store_true", help="--persist, and none of the epoch-1 rows"
    )
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="also as_fast_dataset@base and as_fast_loader@base: the same reads by the code "
        "of this other checkout (e.g. a `git worktree add --detach` of main), interleaved",
    )
    parser.add_argument(
        "--gcsfs-metadata",
        action="store_true",
        help="also as_fast_dataset and as_fast_loader with EPATH_USE_TF=false (TFDS reads "
        "the metadata through gcsfs: no etils zonal-bucket check, no TensorFlow GCS client)",
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="each round's line adds when the opening call returned and the first batch came "
        "(and, from a bucket, when the shards' copies started and the last one landed)",
    )
    args = parser.parse_args(argv)
    args.persist = args.persist or args.persist_only
    if args.store != "gs" and (args.tf_gcs_client or args.gcs_block_mb or args.gcsfs_metadata):
        parser.error(f"--store {args.store}: the options about TensorFlow's GCS client are gs's")
    pipelines = [p for p in PIPELINES if args.store == "gs" or p != "article"]
    if args.loader_threads:
        pipelines.append(f"as_fast_loader:{args.loader_threads}")
    if args.tf_gcs_client:
        pipelines.insert(pipelines.index("as_fast_dataset") + 1, "as_fast_dataset:tf-gcs")
    if args.gcs_block_mb:
        pipelines += [f"{p}+{args.gcs_block_mb}MB" for p in ("article", "as_fast_dataset")]
    if args.gcsfs_metadata:
        pipelines += [f"{p}+{GCSFS_METADATA}" for p in ("as_fast_dataset", "as_fast_loader")]
    if args.baseline_tree:
        if not (args.baseline_tree / "fast_tfds" / "__init__.py").exists():
            parser.error(f"--baseline-tree {args.baseline_tree}: no fast_tfds/ there")
        for p in ("as_fast_dataset", "as_fast_loader"):
            pipelines.insert(pipelines.index(p) + 1, f"{p}@base")
    latencies = [int(ms) for ms in args.latencies.split(",")]
    options.check_counts(parser, args)
    if any(ms < 0 for ms in latencies):
        parser.error(f"--latencies={args.latencies}: must be at least 0")

    sys.path.insert(0, str(REPO_ROOT))
    from tests.bucket.emulated import Bucket
    from tests.bucket.stores import S3Bucket

    tfrecords = sample_data_dir("cats_vs_dogs_fast", Path(args.workdir), args.images_per_class)
    array_records = array_record_dir(Path(args.workdir), args.images_per_class)
    local = {p: array_records if "loader" in p else tfrecords for p in pipelines}
    scratch = Path(tempfile.mkdtemp(prefix="bucket-bench-"))
    bucket = Bucket(scratch) if args.store == "gs" else S3Bucket(scratch / "s3")
    rates: dict[tuple[str, str], list[float]] = {}
    persisted: dict[tuple[str, int], list[dict[str, float]]] = {}
    try:
        version = "cats_vs_dogs_fast/224/1.0.0"
        bucket.upload(tfrecords / version, f"tfrecord/{version}")
        bucket.upload(array_records / version, f"array_record/{version}")
        remote = {p: bucket.url("array_record" if "loader" in p else "tfrecord") for p in pipelines}
        for round_ in range(args.rounds):
            for pipeline in () if args.persist_only else in_turn(pipelines, round_):
                base = args.baseline_tree
                found = epoch_one(pipeline, str(local[pipeline]), {}, baseline=base)
                rates.setdefault((pipeline, "local"), []).append(found)
                print(
                    f"round {round_ + 1}: {pipeline} local {found['rate']:,.0f}/s "
                    f"in {found['seconds']:.1f} s ({cpu_words(found)})"
                    f"{phase_words(found, args.phases)}",
                    flush=True,
                )
                for ms in latencies:
                    bucket.proxy.latency_s = ms / 1000
                    bucket.proxy.reset()
                    found = epoch_one(
                        pipeline, remote[pipeline], bucket.env(), bucket, baseline=base
                    )
                    requests = len(bucket.proxy.requests)
                    rates.setdefault((pipeline, f"{ms} ms"), []).append(found)
                    print(
                        f"round {round_ + 1}: {pipeline} bucket +{ms} ms/request "
                        f"{found['rate']:,.0f}/s in {found['seconds']:.1f} s ({requests} "
                        f"requests; {cpu_words(found)}){phase_words(found, args.phases)}",
                        flush=True,
                    )
            for pipeline in PERSISTED if args.persist else ():
                for ms in latencies:
                    bucket.proxy.latency_s = ms / 1000
                    found = persisted_rates(
                        pipeline,
                        remote[pipeline],
                        scratch / "persist-cache",
                        bucket,
                    )
                    persisted.setdefault((pipeline, ms), []).append(found)
                    print(
                        f"round {round_ + 1}: {pipeline} persist=True +{ms} ms/request: "
                        f"filling {found['filling']:,.0f}/s, served {found['served']:,.0f}/s, "
                        f"next run {found['next run']:,.0f}/s after {found['next open']:.1f} s "
                        f"opening ({found['shard reads']:.0f} shard reads)",
                        flush=True,
                    )
    finally:
        bucket.close()
        shutil.rmtree(scratch, ignore_errors=True)

    if rates:
        epoch_one_table(rates, pipelines, latencies, args)
    if persisted:
        persisted_table(persisted)


def in_turn(pipelines: list[str], round_: int) -> list[str]:
    """The pipelines in round `round_`'s order: "NAME@base" after NAME in the first round,
    before it in the next, and so on (what runs first in a pair may run at another speed)."""
    if round_ % 2 == 0:
        return pipelines
    swapped = list(pipelines)
    for i, pipeline in enumerate(pipelines):
        if f"{pipeline}@base" in pipelines:
            j = pipelines.index(f"{pipeline}@base")
            swapped[i], swapped[j] = swapped[j], swapped[i]
    return swapped


def epoch_one_table(rates, pipelines, latencies, args) -> None:
    def median(pipeline, where, key="rate"):
        return statistics.median(found[key] for found in rates[(pipeline, where)])

    def cpu(pipeline, where):
        found = rates[(pipeline, where)]
        each = [
            statistics.median(f["cpu"][part] for f in found)
            for part in ("pipeline", "emulator", "proxy")
        ]
        # The bucket's processes use hundredths of a second per epoch here.
        return "  ".join(
            f"{c:>5.1f}" if i == 0 else f"{c:>5.2f}" if c else f"{'':>5}"
            for i, c in enumerate(each)
        )

    print(
        f"\nEpoch 1, examples/s, median of {args.rounds} round(s), config 224, batch {BATCH}, "
        f"{args.images_per_class} photos per class (fresh process each):"
    )
    print(
        "  (CPU s, medians: the pipeline process's over the timed epoch, the emulator's and"
        " the proxy's over the child's run)"
    )
    cpu_header = "CPU s: pipe   emu  proxy"
    width = max(23, *(len(p) + 1 for p in pipelines))  # the pipeline's column
    header = f"  {'pipeline':<{width}}{'where':<22}{'examples/s':>11}  {cpu_header:<25}ratios"
    print(header)

    def against_baseline(pipeline, where) -> str:
        # This tree's rate over the baseline tree's, per round (run back to back).
        if f"{pipeline}@base" not in pipelines:
            return ""
        each = [
            a["rate"] / b["rate"]
            for a, b in zip(
                rates[(pipeline, where)], rates[(f"{pipeline}@base", where)], strict=True
            )
        ]
        spread = ", ".join(f"{r:.2f}" for r in each)
        return f"{statistics.median(each):.2f}x @base [rounds: {spread}]"

    for pipeline in pipelines:
        base = median(pipeline, "local")
        used = cpu(pipeline, "local")
        local_row = f"  {pipeline:<{width}}{'local copy':<22}{base:>11,.0f}  {used:<25}"
        print(local_row + against_baseline(pipeline, "local"))
        for ms in latencies:
            rate = median(pipeline, f"{ms} ms")
            # The article's pipeline with the same TensorFlow settings.
            same = "article" + (f"+{pipeline.split('+')[1]}" if "+" in pipeline else "")
            same = "article" if same.endswith(GCSFS_METADATA) else same  # its setting is ours
            ratios = f"{rate / base:.2f}x its local copy"
            if not pipeline.startswith("article") and same in pipelines:  # not over s3://
                article = median(same, f"{ms} ms")
                ratios += f", {rate / article:.2f}x {same} at +{ms} ms"
            if baseline := against_baseline(pipeline, f"{ms} ms"):
                ratios += f", {baseline}"
            where = f"bucket +{ms} ms/request"
            used = cpu(pipeline, f"{ms} ms")
            print(f"  {pipeline:<{width}}{where:<22}{rate:>11,.0f}  {used:<25}{ratios}")


def persisted_table(persisted) -> None:
    print(
        "\npersist=True, examples/s from the first batch asked for, median of the rounds: "
        "the filling run's epoch 1 and 2 (served), the next process's epoch 1 from the "
        "local file, and the seconds its opening call took:"
    )
    for (pipeline, ms), found in persisted.items():
        fill, served, next_run, opened = (
            statistics.median(f[k] for f in found)
            for k in ("filling", "served", "next run", "next open")
        )
        reads = max(f["shard reads"] for f in found)
        print(
            f"  {pipeline:<19}bucket +{ms} ms/request  filling {fill:,.0f}, served "
            f"{served:,.0f}, next run {next_run:,.0f}: {next_run / served:.2f}x the served "
            f"rate; opening {opened:.1f} s ({reads:.0f} shard reads)"
        )


if __name__ == "__main__":
    main()
