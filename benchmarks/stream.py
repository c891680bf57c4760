"""Streaming benchmark: every pipeline over the same split, one process, interleaved rounds.

Round 1 runs every pipeline once, round 2 again, and so on, so that a slow
spell of a shared machine hits all pipelines alike; the report gives the
median and the min-max over rounds. Each pipeline object is iterated twice:
epoch 2 is a second pass over the same dataset, so caches count.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import resource
import statistics
from collections.abc import Callable

import psutil
import tensorflow as tf
from tqdm import tqdm

import fast_tfds
from benchmarks import baselines
from benchmarks.memory import (
    MiB,
    PeakRss,
    anonymous_in_use,
    frozen_heap,
    release_memory,
    rss,
)

SIZE = (224, 224)
UINT8_BYTES_PER_IMAGE = 224 * 224 * 3
WARMUP_BATCHES = 3
TEN_EPOCHS = "fast_224_float32_cache_10_epochs"


@dataclasses.dataclass(frozen=True)
class Pipeline:
    name: str
    label: str
    group: str  # 'ceiling', 'reference', 'baseline' or 'ours'
    output: str  # 'uint8' or 'float32'
    config: str  # the stored config it reads: '224' or 'original'
    epochs: int = 2
    ceiling: str | None = None  # the ceiling of the same work with the same output
    cached: bool = False


def all_pipelines() -> list[Pipeline]:
    rows = []
    convert = {"uint8": "", "float32": " + to_unit_float"}  # the reader's float32 conversion
    for config, work in (("224", "decode 224px"), ("original", "decode+resize original")):
        for output in ("uint8", "float32"):
            label = f"ceiling: {work} JPEGs from memory, all cores{convert[output]}"
            rows.append(Pipeline(f"ceiling_{config}_{output}", label, "ceiling", output, config, 1))
    # The library's block decoder (simplejpeg, a block per call) on the same bytes; then
    # into the rows of one new array for the split, as a cache filling in epoch 1
    # must: what first touching that much memory costs on the machine.
    for output in ("uint8", "float32"):
        label = f"ceiling: decode 224px JPEGs from memory in blocks (simplejpeg){convert[output]}"
        rows.append(Pipeline(f"ceiling_224_blocks_{output}", label, "ceiling", output, "224", 1))
    label = "ceiling: decode 224px JPEGs from memory in blocks into one new [N, 224, 224, 3] array"
    rows.append(Pipeline("ceiling_224_into_new_memory", label, "ceiling", "uint8", "224", 1))
    for output in ("uint8", "float32"):
        label = f"decoded uint8 images in memory: from_tensor_slices, batch 32{convert[output]}"
        rows.append(Pipeline(f"in_memory_{output}", label, "reference", output, "224", 1))
    ceiling = {c: f"ceiling_{c}_float32" for c in ("224", "original")}
    rows += [
        Pipeline(
            "course_naive",
            # tf.data's default map_parallelization parallelizes its map() all the same.
            "course notebook's naive pipeline: 1 reader, map() without num_parallel_calls, "
            "float resize",
            "baseline",
            "float32",
            "original",
            ceiling=ceiling["original"],
        ),
        Pipeline(
            "course_parallel",
            "course notebook's parallel pipeline: interleave, parallel map, float32 cache",
            "baseline",
            "float32",
            "original",
            ceiling=ceiling["original"],
            cached=True,
        ),
    ]
    for config in ("original", "224"):
        label = f"tfds.load user ({config}): as_dataset + map(resize, /255), no autocache"
        rows.append(
            Pipeline(
                f"tfds_load_{config}", label, "baseline", "float32", config, ceiling=ceiling[config]
            )
        )
    for config in ("224", "original"):
        resized = " -> 224" if config == "original" else ""
        for output in ("float32", "uint8"):
            for cached in (True, False):
                name = f"fast_{config}_{output}" + ("_cache" if cached else "")
                label = f"as_fast_dataset config {config}{resized}, cache={cached}, {output}"
                rows.append(
                    Pipeline(
                        name,
                        label,
                        "ours",
                        output,
                        config,
                        ceiling=f"ceiling_{config}_{output}",
                        cached=cached,
                    )
                )
    rows.append(
        Pipeline(
            TEN_EPOCHS,
            "as_fast_dataset config 224, cache=True, float32: 10 epochs end to end",
            "ours",
            "float32",
            "224",
            epochs=10,
            ceiling="ceiling_224_float32",
            cached=True,
        )
    )
    return rows


class Inputs:
    """Builds each pipeline's dataset; the in-memory inputs are made once, on first use."""

    def __init__(self, builders: dict, split: str):
        self.builders = builders  # config -> prepared builder
        self.split = split

    def files(self, config: str) -> list[str]:
        return baselines.shard_files(self.builders[config], self.split)

    @functools.cache  # noqa: B019  (one Inputs per run; it lives as long as the run)
    def jpegs(self, config: str) -> tf.Tensor:
        return baselines.stored_jpegs(self.files(config))

    @functools.cached_property
    def decoded_224(self) -> tf.Tensor:
        return tf.concat(list(baselines.decode_ceiling(self.jpegs("224"), SIZE)), axis=0)

    def make(self, p: Pipeline) -> tf.data.Dataset:
        convert = baselines.to_unit_float if p.output == "float32" else None
        if p.name.startswith("ceiling_224_blocks_"):
            return baselines.decode_blocks_ceiling(self.jpegs("224"), SIZE, convert=convert)
        if p.name == "ceiling_224_into_new_memory":
            return baselines.decode_blocks_ceiling(self.jpegs("224"), SIZE, into_new_memory=True)
        if p.group == "ceiling":
            resize = SIZE if p.config == "original" else None
            return baselines.decode_ceiling(self.jpegs(p.config), resize, convert=convert)
        if p.group == "reference":
            ds = tf.data.Dataset.from_tensor_slices(self.decoded_224).batch(baselines.BATCH_SIZE)
            if convert is not None:
                ds = ds.map(convert, num_parallel_calls=tf.data.AUTOTUNE)
            return _without_graph_rewrites(ds.prefetch(tf.data.AUTOTUNE))
        if p.name == "course_naive":
            return baselines.naive_pipeline(self.files(p.config))
        if p.name == "course_parallel":
            return baselines.parallel_pipeline(self.files(p.config))
        if p.name.startswith("tfds_load_"):
            return baselines.tfds_load_user(self.builders[p.config], self.split)
        dtype = tf.float32 if p.output == "float32" else tf.uint8
        return fast_tfds.read_split(
            self.builders[p.config], self.split, cache=p.cached, dtype=dtype, image_size=SIZE
        )


def _without_graph_rewrites(ds: tf.data.Dataset) -> tf.data.Dataset:
    """tf.data's default rewrites serialize the dataset graph, with the tensors it
    captures, for every new iterator: ~2 s for the 2 GB of decoded images, which
    would make the reference look slow. Its parallelism is explicit anyway."""
    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = False
    return ds.with_options(options)


# -- memory ------------------------------------------------------------------------


def check_memory(pipelines: list[Pipeline], images: int, jpeg_bytes: int) -> None:
    """Stops early, with what to do, when the largest cache cannot fit in free memory."""
    largest = 0
    for p in pipelines:
        per_image = (
            4 * UINT8_BYTES_PER_IMAGE if p.name == "course_parallel" else UINT8_BYTES_PER_IMAGE
        )
        if p.cached or p.group == "reference":
            largest = max(largest, per_image * images)
    resident = jpeg_bytes
    if any(p.group == "reference" for p in pipelines):
        resident += UINT8_BYTES_PER_IMAGE * images
    needed = int(1.15 * (largest + resident)) + 2**30
    available = psutil.virtual_memory().available
    if needed > available:
        raise SystemExit(
            f"bench: {images} images need ~{needed / 2**30:.1f} GiB of free memory "
            f"(the course notebook's float32 cache alone is 0.6 MB an image) but "
            f"{available / 2**30:.1f} GiB are available; use a smaller --images-per-class "
            "or leave course_parallel out with --only"
        )


# -- measuring ---------------------------------------------------------------------


def warm_up(pipelines: list[Pipeline], inputs: Inputs) -> None:
    """Reads every shard file once (page cache) and a few batches of every pipeline
    (thread pools, kernels, the XLA conversion's compilation) before anything is timed."""
    configs = sorted({p.config for p in pipelines})
    for config in configs:
        for filename in inputs.files(config):
            with open(filename, "rb") as f:
                while f.read(1 << 24):
                    pass
    for p in tqdm(pipelines, desc="Warm-up", unit="pipeline", leave=False):
        iterator = iter(inputs.make(p))
        for _ in range(WARMUP_BATCHES):
            if next(iterator, None) is None:
                break
        del iterator
    release_memory()


def measure_once(p: Pipeline, make: Callable[[], tf.data.Dataset]) -> dict:
    """One round of one pipeline: its epochs, time to first batch and memory growth."""
    release_memory()
    start, start_anon = rss(), anonymous_in_use()
    with PeakRss() as peak:
        ds = make()
        epochs = []
        for _ in range(p.epochs):
            cpu = resource.getrusage(resource.RUSAGE_SELF)
            images, seconds, first_batch_s = baselines.time_epoch(ds)
            cpu_after = resource.getrusage(resource.RUSAGE_SELF)
            epochs.append(
                {
                    "images": images,
                    "seconds": round(seconds, 4),
                    "images_per_s": round(images / seconds, 1),
                    "first_batch_s": round(first_batch_s, 4),
                    # CPU seconds of the whole process; sys time is mostly page faults.
                    "cpu_user_s": round(cpu_after.ru_utime - cpu.ru_utime, 3),
                    "cpu_sys_s": round(cpu_after.ru_stime - cpu.ru_stime, 3),
                    "minor_faults_per_image": round(
                        (cpu_after.ru_minflt - cpu.ru_minflt) / max(images, 1), 2
                    ),
                }
            )
        release_memory()  # the iterators are gone; what is left is held by the dataset
        retained_rss = rss() - start
        retained_anon = None if start_anon is None else anonymous_in_use() - start_anon
        del ds
    return {
        "epochs": epochs,
        "rss_start_mib": round(start / MiB, 1),
        "peak_rss_growth_mib": round(max(0, peak.peak - start) / MiB, 1),
        "retained_rss_mib": round(retained_rss / MiB, 1),
        "retained_anon_mib": None if retained_anon is None else round(retained_anon / MiB, 1),
    }


def run(pipelines: list[Pipeline], inputs: Inputs, rounds: int) -> dict[str, list[dict]]:
    """{pipeline name: [one result per round]}, measured in interleaved rounds."""
    print("Loading the stored JPEGs into memory for the ceilings ...", flush=True)
    for config in sorted({p.config for p in pipelines if p.group == "ceiling"}):
        inputs.jpegs(config)
    if any(p.group == "reference" for p in pipelines):
        print("Decoding them once for the in-memory reference ...", flush=True)
        inputs.decoded_224  # noqa: B018  (made now, not inside a timed row)
    results: dict[str, list[dict]] = {p.name: [] for p in pipelines}
    # The inputs and the modules, alive for the whole run, set aside from the collections
    # before and after each row (`release_memory`): they would take most of a small
    # sample's run.
    with frozen_heap():
        warm_up(pipelines, inputs)
        with tqdm(total=rounds * len(pipelines), desc="Measuring", unit="run") as bar:
            for round_index in range(rounds):
                for p in pipelines:
                    bar.set_postfix_str(f"round {round_index + 1}/{rounds}: {p.name}")
                    result = measure_once(p, functools.partial(inputs.make, p))
                    results[p.name].append(result)
                    bar.write(_progress_line(round_index, p, result))
                    bar.update()
    return results


def _progress_line(round_index: int, p: Pipeline, result: dict) -> str:
    rates = "  ".join(
        f"epoch {i + 1} {e['images_per_s']:8.0f}/s" for i, e in enumerate(result["epochs"])
    )
    return f"  round {round_index + 1}  {p.name:<30} {rates}"


# -- summary -----------------------------------------------------------------------


def summarize(p: Pipeline, rounds: list[dict], images: int) -> dict:
    """Medians and min-max over rounds, and the memory figures per image."""
    out: dict = {}
    for i in range(p.epochs):
        rates = [r["epochs"][i]["images_per_s"] for r in rounds]
        out[f"epoch{i + 1}"] = {
            "median": round(statistics.median(rates), 1),
            "min": min(rates),
            "max": max(rates),
        }
        out[f"epoch{i + 1}"]["minor_faults_per_image"] = round(
            statistics.median(r["epochs"][i]["minor_faults_per_image"] for r in rounds), 2
        )
    out["images"] = rounds[0]["epochs"][0]["images"]
    out["total_seconds"] = round(
        statistics.median(sum(e["seconds"] for e in r["epochs"]) for r in rounds), 3
    )
    out["first_batch_s"] = round(
        statistics.median(r["epochs"][0]["first_batch_s"] for r in rounds), 4
    )
    out["peak_rss_growth_mib"] = round(
        statistics.median(r["peak_rss_growth_mib"] for r in rounds), 1
    )
    if p.cached:
        by_anon = all(r.get("retained_anon_mib") is not None for r in rounds)
        key = "retained_anon_mib" if by_anon else "retained_rss_mib"
        retained = max(0.0, statistics.median(r[key] for r in rounds))
        out["cache_measured_as"] = "anonymous memory (RssAnon)" if by_anon else "RSS"
        out["cache_mib"] = round(retained, 1)
        out["cache_mib_per_1000_images"] = round(retained / images * 1000, 2)
        out["cache_vs_uint8_bytes"] = round(retained * MiB / (images * UINT8_BYTES_PER_IMAGE), 3)
        out["peak_vs_uint8_bytes"] = round(
            out["peak_rss_growth_mib"] * MiB / (images * UINT8_BYTES_PER_IMAGE), 3
        )
    return out


def select(pipelines: list[Pipeline], only: str | None) -> list[Pipeline]:
    """The pipelines named in `only` (comma-separated names or shell patterns), in table order."""
    if not only:
        return pipelines
    import fnmatch

    patterns = [s.strip() for s in only.split(",") if s.strip()]
    unknown = [pat for pat in patterns if not any(fnmatch.fnmatch(p.name, pat) for p in pipelines)]
    if unknown:
        names = ", ".join(p.name for p in pipelines)
        raise SystemExit(f"--only: {', '.join(unknown)} match no pipeline; the pipelines: {names}")
    return [p for p in pipelines if any(fnmatch.fnmatch(p.name, pat) for pat in patterns)]


def jpeg_bytes_on_disk(inputs: Inputs, configs: set[str]) -> int:
    return sum(os.path.getsize(f) for c in configs for f in inputs.files(c))
