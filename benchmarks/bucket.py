"""Epoch 1 from a gs:// bucket (emulated on loopback), with latency added per request.

    python -m benchmarks bucket --images-per-class 300 --latencies 0,20,50 --rounds 1

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
- `as_fast_dataset`: the reader's default (memory cache, float32);
- `as_fast_loader`: the Grain loader over the ArrayRecord files (uint8); with
  `--loader-threads N`, also `as_fast_loader:N`, the loader with num_threads=N.

Each is also read from the local copy (`local`, no proxy). The ratios printed name their
reference: the same pipeline's local epoch 1, and the article's epoch 1 from the bucket
at the same latency. The proxy is Python on the same CPU, so at 0 ms it costs what a
real bucket's network would not; compare within one run.
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

from benchmarks.data import REPO_ROOT, sample_data_dir

PIPELINES = ("article", "as_fast_dataset", "as_fast_loader")
BATCH = 32
CHILD_TIMEOUT_S = 1800

_CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    pipeline, data_dir = sys.argv[1:3]
    # Imported first in every process, the loader's too: TFDS reads a gs:// dataset's
    # metadata through TensorFlow where it is installed, and its import is not the bucket's.
    import tensorflow as tf
    import cats_vs_dogs_fast
    start = time.perf_counter()
    if pipeline.startswith("as_fast_loader"):
        # "as_fast_loader:16": with num_threads=16.
        threads = int(pipeline.split(":")[1]) if ":" in pipeline else None
        ds = cats_vs_dogs_fast.as_fast_loader(
            "train", data_dir=data_dir, batch_size=BATCH, seed=0, download_and_prepare=False,
            num_threads=threads)
    else:
        if pipeline == "article":
            from benchmarks.baselines import parallel_pipeline
            pattern = f"{data_dir}/cats_vs_dogs_fast/224/1.0.0/*-train.tfrecord-*"
            ds = parallel_pipeline(sorted(tf.io.gfile.glob(pattern)), batch_size=BATCH)
        else:
            ds = cats_vs_dogs_fast.as_fast_dataset(
                "train", data_dir=data_dir, batch_size=BATCH, seed=0,
                download_and_prepare=False)
    n = 0
    for images, labels in ds:
        n += int(labels.shape[0])
    print(json.dumps({"n": n, "seconds": time.perf_counter() - start}), flush=True)
    """
).replace("BATCH", str(BATCH))


def child_env(extra: dict[str, str]) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {
        **os.environ,
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": path,
        **extra,
    }


def epoch_one(pipeline: str, data_dir: str, env: dict[str, str]) -> float:
    """Examples per second of `pipeline`'s epoch 1 from `data_dir`, in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, pipeline, data_dir],
        capture_output=True,
        text=True,
        env=child_env(env),
        timeout=CHILD_TIMEOUT_S,
        cwd=REPO_ROOT,
    )
    if done.returncode != 0:
        raise SystemExit(f"{pipeline} from {data_dir} failed: {done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["n"] / result["seconds"]


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
    parser.add_argument("--images-per-class", type=int, default=300)
    parser.add_argument("--latencies", default="0,20,50", help="ms added per request")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workdir", default="fast_tfds_bench")
    parser.add_argument(
        "--loader-threads",
        type=int,
        help="also the loader with num_threads=N (default: one thread per core)",
    )
    args = parser.parse_args(argv)
    pipelines = list(PIPELINES)
    if args.loader_threads:
        pipelines.append(f"as_fast_loader:{args.loader_threads}")
    latencies = [int(ms) for ms in args.latencies.split(",")]
    if args.rounds < 1 or any(ms < 0 for ms in latencies):
        parser.error("--rounds must be at least 1 and --latencies at least 0")

    sys.path.insert(0, str(REPO_ROOT))
    from tests.bucket.emulated import Bucket

    tfrecords = sample_data_dir("cats_vs_dogs_fast", Path(args.workdir), args.images_per_class)
    array_records = array_record_dir(Path(args.workdir), args.images_per_class)
    local = {p: array_records if "loader" in p else tfrecords for p in pipelines}
    scratch = Path(tempfile.mkdtemp(prefix="bucket-bench-"))
    bucket = Bucket(scratch)
    rates: dict[tuple[str, str], list[float]] = {}
    try:
        version = "cats_vs_dogs_fast/224/1.0.0"
        bucket.upload(tfrecords / version, f"tfrecord/{version}")
        bucket.upload(array_records / version, f"array_record/{version}")
        remote = {p: bucket.url("array_record" if "loader" in p else "tfrecord") for p in pipelines}
        for round_ in range(args.rounds):
            for pipeline in pipelines:
                rate = epoch_one(pipeline, str(local[pipeline]), {})
                rates.setdefault((pipeline, "local"), []).append(rate)
                print(f"round {round_ + 1}: {pipeline} local {rate:,.0f}/s", flush=True)
                for ms in latencies:
                    bucket.proxy.latency_s = ms / 1000
                    bucket.proxy.reset()
                    rate = epoch_one(pipeline, remote[pipeline], bucket.env())
                    requests = len(bucket.proxy.requests)
                    rates.setdefault((pipeline, f"{ms} ms"), []).append(rate)
                    print(
                        f"round {round_ + 1}: {pipeline} bucket +{ms} ms/request {rate:,.0f}/s "
                        f"({requests} requests)",
                        flush=True,
                    )
    finally:
        bucket.close()
        shutil.rmtree(scratch, ignore_errors=True)

    def median(pipeline, where):
        return statistics.median(rates[(pipeline, where)])

    print(
        f"\nEpoch 1, examples/s, median of {args.rounds} round(s), config 224, batch {BATCH}, "
        f"{args.images_per_class} photos per class (fresh process each):"
    )
    header = f"  {'pipeline':<19}{'where':<22}{'examples/s':>11}  ratios"
    print(header)
    for pipeline in pipelines:
        base = median(pipeline, "local")
        print(f"  {pipeline:<19}{'local copy':<22}{base:>11,.0f}")
        for ms in latencies:
            rate = median(pipeline, f"{ms} ms")
            article = median("article", f"{ms} ms")
            ratios = f"{rate / base:.2f}x its local copy"
            if pipeline != "article":
                ratios += f", {rate / article:.2f}x the article's pipeline at +{ms} ms"
            where = f"bucket +{ms} ms/request"
            print(f"  {pipeline:<19}{where:<22}{rate:>11,.0f}  {ratios}")


if __name__ == "__main__":
    main()
