"""CPU per image of each stage in front of the decoder, in one process, interleaved rounds.

The figures behind block parsing (docs/design.md), from the root of the repository:

    D=fast_tfds_bench/cats_vs_dogs_fast-7500/tensorflow_datasets  # made by `python -m benchmarks`
    python benchmarks/experiments/pipeline_stages.py $D

Each row adds one stage to the one above it; the difference between two rows is
that stage's cost. The last two rows put the block decoder behind each way of parsing.
The stages are the reader's private building blocks (an experiment on the reader
itself, unlike the benchmark), so this script follows them when they change.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import tensorflow as tf
import tensorflow_datasets as tfds

import cats_vs_dogs_fast  # noqa: F401  (registers the dataset)
from fast_tfds.read import decoding, parsing, records

AUTOTUNE = tf.data.AUTOTUNE
IMAGE = {"image": tf.TensorSpec((224, 224, 3), tf.uint8)}


def pipelines(data_dir: str) -> dict:
    builder = tfds.builder("cats_vs_dogs_fast", config="224", data_dir=data_dir)
    instructions = records.file_instructions(builder, "train")
    features = builder.info.features
    parse_one = parsing.make_parser(features, None, {"image", "label"})
    parse_block = parsing.make_batch_parser(features, {"image", "label"})
    decode_block = decoding.decode_jpeg_blocks(IMAGE)

    def checked():
        return records.read_indexed_records(
            instructions,
            records.instruction_offsets(instructions),
            file_seed=tf.constant([int.from_bytes(os.urandom(4), "little"), 0], tf.int64),
            deterministic=False,
            indices=False,
        )

    def raw():
        files = [str(fi.filename) for fi in instructions]
        return tf.data.Dataset.from_tensor_slices(files).interleave(
            tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=AUTOTUNE
        )

    def parsed():
        return checked().map(parse_one, num_parallel_calls=AUTOTUNE, deterministic=False)

    def blocks(ds):
        return ds.map(parse_block, num_parallel_calls=AUTOTUNE, deterministic=False)

    def decoded(ds):
        return ds.map(decode_block, num_parallel_calls=AUTOTUNE, deterministic=False)

    return {
        "TFRecordDataset": lambda: raw().batch(32),
        "+ per-shard count check": lambda: checked().batch(32),
        "+ parse per record": lambda: parsed().batch(32),
        "+ shuffle parsed dicts": lambda: parsed().shuffle(1024).batch(32),
        "checked, parse blocks of 32": lambda: blocks(checked().batch(32)),
        "per record: parse, shuffle, decode": lambda: decoded(parsed().shuffle(1024).batch(32)),
        "blocks: shuffle, parse, decode": lambda: decoded(
            blocks(checked().shuffle(1024).batch(32))
        ),
    }


def count(element) -> int:
    labels = element["label"] if isinstance(element, dict) else element
    return int(labels.shape[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", help="a data dir with cats_vs_dogs_fast/224 built")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = pipelines(args.data_dir)
    results = {name: [] for name in rows}
    for _ in range(args.rounds):
        for name, make in rows.items():
            ds = make().prefetch(AUTOTUNE)
            before, start, images = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), 0
            for element in ds:
                images += count(element)
            seconds = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            results[name].append((images / seconds, cpu / images * 1e6))
    for name, runs in results.items():
        rate = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"{name:38s} {rate:9.0f} images/s  {cpu:6.1f} us CPU/image")


if __name__ == "__main__":
    main()
