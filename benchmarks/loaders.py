"""Benchmark rows for the non-TensorFlow readers, on the same images as the tf.data rows.

  - the Grain loader (`as_fast_loader`, uint8), in decode threads (its default)
    and in 2 worker processes, over ArrayRecord files that `tfds convert_format`
    adds next to the TFRecord build;
  - what a PyTorch user writes today: `torchvision.datasets.ImageFolder` over the
    same JPEGs extracted to class folders, with `DataLoader(num_workers=2)`
    (needs torch; the row is left out without it);
  - for comparison in one run: the 224 decode ceiling and
    `as_fast_dataset(dtype=uint8, cache=False)`.

`loader_pipelines()` and `LoaderInputs.make()` give these rows to the main
benchmark (`python -m benchmarks --loaders`); `python -m benchmarks.loaders
--data-dir DIR` runs them alone, in interleaved rounds, and prints images/s and
the loader's rate as a ratio of tf.data's and of ImageFolder's.

This module imports TensorFlow only inside functions: the loader's worker
processes are spawned and re-import the main module, and a worker that imports
TensorFlow takes seconds longer to start and holds its memory for nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import fast_tfds
from benchmarks import options

BATCH = 32  # as in every other row (baselines.BATCH_SIZE, which would import TensorFlow)
TORCH_WORKERS = 2


def loader_pipelines(*, with_torch: bool | None = None) -> list:
    """The loader rows (`benchmarks.stream.Pipeline`), and the ImageFolder row when torch
    is installed."""
    from benchmarks.stream import Pipeline

    if with_torch is None:
        with_torch = torch_available()
    rows = [
        Pipeline(
            "grain_loader_224_uint8",
            "as_fast_loader (Grain, ArrayRecord), decode threads",
            "ours",
            "uint8",
            "224",
            ceiling="ceiling_224_uint8",
        ),
        Pipeline(
            "grain_loader_224_uint8_workers2",
            "as_fast_loader (Grain, ArrayRecord), 2 worker processes",
            "ours",
            "uint8",
            "224",
            ceiling="ceiling_224_uint8",
        ),
    ]
    if with_torch:
        rows.append(
            Pipeline(
                "torch_imagefolder_224_uint8",
                f"ImageFolder + DataLoader(num_workers={TORCH_WORKERS}), extracted JPEGs",
                "baseline",
                "uint8",
                "224",
                ceiling="ceiling_224_uint8",
            )
        )
    return rows


def comparison_pipelines() -> list:
    """The main benchmark's rows that the loader rows are compared with."""
    from benchmarks.stream import Pipeline

    return [
        Pipeline(
            "ceiling_224_uint8",
            "ceiling: decode 224px JPEGs from memory, all cores",
            "ceiling",
            "uint8",
            "224",
            1,
        ),
        Pipeline(
            "fast_224_uint8",
            "as_fast_dataset config 224, cache=False, uint8",
            "ours",
            "uint8",
            "224",
            ceiling="ceiling_224_uint8",
        ),
    ]


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


class LoaderInputs:
    """The main benchmark's inputs (`benchmarks.stream.Inputs`), plus ArrayRecord files
    and an ImageFolder tree for the rows of this module."""

    def __init__(self, builders: dict, split: str, workdir: str | os.PathLike):
        from benchmarks.stream import Inputs

        self.inputs = Inputs(builders, split)
        self.builders = builders
        self.split = split
        self.workdir = Path(workdir)
        self.imagefolder_kind = ""

    @functools.cached_property
    def array_record_builder(self):
        """The 224 build with ArrayRecord files next to its TFRecords (added once)."""
        return add_array_record_files(self.builders["224"])

    @functools.cached_property
    def image_folder(self) -> Path:
        return extract_image_folder(self.array_record_builder, self.split, self.workdir)

    def make(self, p):
        """The iterable of batches that pipeline row `p` measures."""
        if p.name == "fast_224_uint8":
            import tensorflow as tf

            return fast_tfds.read_split(
                self.builders["224"], self.split, cache=False, dtype=tf.uint8, batch_size=BATCH
            )
        if p.name.startswith("grain_loader_"):
            workers = 2 if p.name.endswith("_workers2") else 0
            return fast_tfds.as_fast_loader(
                self.array_record_builder.name,
                self.split,
                builder_dir=self.array_record_builder.data_dir,
                batch_size=BATCH,
                seed=0,
                num_workers=workers,
                num_threads=1 if workers else None,
                cache=False,  # every epoch decodes, as the other loaders of the table
            )
        if p.name == "torch_imagefolder_224_uint8":
            data, self.imagefolder_kind = image_folder_loader(self.image_folder)
            return AsTuples(data)
        return self.inputs.make(p)


def add_array_record_files(builder):
    """`tfds convert_format` on the build folder unless its info lists ArrayRecord files.

    Decided by the dataset's info, not by files on disk: ArrayRecord files that a
    conversion wrote without recording them in dataset_info.json (an interrupted
    run) are removed and converted again, since TFDS's convert_format skips the
    metadata when every shard already exists.
    """
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core import file_adapters

    folder = Path(builder.data_dir).resolve()
    formats = tfds.builder_from_directory(os.fspath(folder)).info.available_file_formats()
    if file_adapters.FileFormat.ARRAY_RECORD not in formats:
        for unrecorded in folder.glob("*.array_record-*"):
            unrecorded.unlink()
        print(f"Adding ArrayRecord files next to the TFRecords in {folder} ...", flush=True)
        command = [
            *(sys.executable, "-m", "tensorflow_datasets.scripts.cli.main", "convert_format"),
            *("--dataset_version_dir", os.fspath(folder), "--out_file_format", "array_record"),
            *("--num_workers", str(os.cpu_count() or 1)),
        ]
        env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"tfds convert_format failed:\n{done.stderr[-2000:]}")
    return tfds.builder_from_directory(os.fspath(folder))


def extract_image_folder(builder, split: str, workdir: Path) -> Path:
    """The split's stored JPEG bytes as class_name/N.jpg files, written once."""
    import tensorflow_datasets as tfds
    from tensorflow_datasets.proto import tf_example_pb2

    root = workdir / f"imagefolder-{builder.info.name}-{builder.info.config_name}-{split}"
    done = root / ".complete"
    if done.exists():
        return root
    print(f"Extracting the JPEGs to {root} for the ImageFolder row ...", flush=True)
    names = builder.info.features["label"].names
    for name in names:
        (root / name).mkdir(parents=True, exist_ok=True)
    records = builder.as_data_source(
        split=split,
        file_format="array_record",
        deserialize_method=tfds.decode.DeserializeMethod.RAW_BYTES,
    )
    for i in range(len(records)):
        feature = tf_example_pb2.Example.FromString(records[i]).features.feature
        label = names[feature["label"].int64_list.value[0]]
        (root / label / f"{i}.jpg").write_bytes(feature["image"].bytes_list.value[0])
    done.write_text(str(len(records)))
    return root


def image_folder_loader(root: Path):
    """(DataLoader, which ImageFolder) as a PyTorch user writes it: shuffled, uint8 CHW.

    With torchvision it is `torchvision.datasets.ImageFolder(root, PILToTensor())`.
    Where torchvision cannot be imported (its PyPI wheel is built against CUDA
    torch, and fails to load next to a CPU-only torch), the same work is done by
    `ImageFolderLike`, labelled as such in the results.
    """
    import torch

    try:
        import torchvision

        dataset = torchvision.datasets.ImageFolder(
            os.fspath(root), transform=torchvision.transforms.PILToTensor()
        )
        kind = f"torchvision {torchvision.__version__} ImageFolder"
    except Exception as err:  # ImportError, or torchvision's RuntimeError about its ops
        dataset = ImageFolderLike(root)
        kind = f"ImageFolder's work without torchvision ({type(err).__name__} importing it)"
    data = torch.utils.data.DataLoader(
        dataset, batch_size=BATCH, shuffle=True, num_workers=TORCH_WORKERS
    )
    return data, kind


class AsTuples:
    """A torch DataLoader's batches as (images, labels) tuples (its collate makes lists)."""

    def __init__(self, data):
        self.data = data

    def __iter__(self):
        return (tuple(batch) for batch in self.data)


class ImageFolderLike:
    """What `ImageFolder(root, transform=PILToTensor())` does per image: sorted class
    folders, `PIL.Image.open(path).convert("RGB")`, a uint8 [3, H, W] tensor."""

    def __init__(self, root: Path):
        classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        self.samples = [
            (os.path.join(root, name, file), label)
            for label, name in enumerate(classes)
            for file in sorted(os.listdir(os.path.join(root, name)))
        ]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        import PIL.Image
        import torch

        path, label = self.samples[index]
        with open(path, "rb") as f:
            image = PIL.Image.open(f).convert("RGB")
        pixels = torch.from_numpy(np.asarray(image, dtype=np.uint8).copy())
        return pixels.permute(2, 0, 1).contiguous(), label


def run(inputs: LoaderInputs, pipelines: list, rounds: int) -> dict:
    """{name: summary} of every pipeline, measured in interleaved rounds after a warm-up."""
    from benchmarks.memory import frozen_heap
    from benchmarks.stream import measure_once, summarize

    images = inputs.builders["224"].info.splits[inputs.split].num_examples
    inputs.inputs.jpegs("224")  # the ceiling's input, loaded before anything is timed
    for p in pipelines:  # warm-up: page cache, thread pools, the extraction, conversions
        iterator = iter(inputs.make(p))
        next(iterator)
        del iterator
    raw: dict[str, list[dict]] = {p.name: [] for p in pipelines}
    with frozen_heap():  # as in `stream.run`: each row's collections walk what it made
        for round_index in range(rounds):
            for p in pipelines:
                result = measure_once(p, functools.partial(inputs.make, p))
                raw[p.name].append(result)
                rates = "  ".join(f"{e['images_per_s']:8.0f}/s" for e in result["epochs"])
                print(f"  round {round_index + 1}  {p.name:<34} {rates}", flush=True)
    out = {}
    for p in pipelines:
        counts = {e["images"] for r in raw[p.name] for e in r["epochs"]}
        if counts != {images}:
            raise SystemExit(f"COUNT MISMATCH: {p.name} gave {sorted(counts)}, expected {images}")
        out[p.name] = {
            "label": p.label,
            "rounds": raw[p.name],
            "summary": summarize(p, raw[p.name], images),
        }
    return out


def table(results: dict, imagefolder_kind: str) -> tuple[str, dict]:
    """The printed rows (median epoch 1 and 2, ratio to the decode ceiling) and the ratios."""
    ceiling = results["ceiling_224_uint8"]["summary"]["epoch1"]["median"]
    lines = [
        f"{'pipeline':<36}{'epoch 1 img/s [min-max]':>26}{'epoch 2 img/s':>15}{'e1/ceiling':>12}"
    ]
    for name, row in results.items():
        s = row["summary"]
        e1 = s["epoch1"]
        e2 = f"{s['epoch2']['median']:.0f}" if "epoch2" in s else ""
        lines.append(
            f"{name:<36}{e1['median']:>10.0f} [{e1['min']:.0f}-{e1['max']:.0f}]"
            f"{e2:>15}{e1['median'] / ceiling:>11.2f}x"
        )
    ratios = {}

    def median(name, epoch="epoch1"):
        return results[name]["summary"][epoch]["median"] if name in results else None

    for epoch in ("epoch1", "epoch2"):
        grain, tf_data = median("grain_loader_224_uint8", epoch), median("fast_224_uint8", epoch)
        folder = median("torch_imagefolder_224_uint8", epoch)
        if grain and tf_data:
            ratios[f"loader_vs_tf_data_{epoch}"] = round(grain / tf_data, 2)
        if grain and folder:
            ratios[f"loader_vs_imagefolder_{epoch}"] = round(grain / folder, 2)
    lines.append("")
    lines += [f"{key}: {value:.2f}x" for key, value in ratios.items()]
    if imagefolder_kind:
        lines.append(f"ImageFolder row: {imagefolder_kind}")
    return "\n".join(lines), ratios


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.loaders",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data-dir", required=True, help="cats_vs_dogs_fast built (TFRecord), config 224"
    )
    p.add_argument("--dataset", default="cats_vs_dogs_fast")
    p.add_argument("--split", default="train")
    options.add_rounds(p, 3)
    p.add_argument("--workdir", default="fast_tfds_bench", help="where the JPEGs are extracted")
    p.add_argument("--json", help="write the rounds and summaries here")
    args = p.parse_args(argv)
    options.check_counts(p, args)
    import importlib

    from benchmarks.data import load_builders

    importlib.import_module(args.dataset)  # registers the dataset
    builders = load_builders(args.dataset, Path(args.data_dir), ("224",), args.split)
    inputs = LoaderInputs(builders, args.split, args.workdir)
    images = builders["224"].info.splits[args.split].num_examples
    print(f"{args.dataset}/224 {args.split}: {images} images, {args.rounds} interleaved rounds")
    results = run(inputs, [*comparison_pipelines(), *loader_pipelines()], args.rounds)
    text, ratios = table(results, inputs.imagefolder_kind)
    print(text)
    if args.json:
        from benchmarks.data import machine_info

        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps(
                {
                    "machine": machine_info(),
                    "images": images,
                    "rounds": args.rounds,
                    "imagefolder": inputs.imagefolder_kind,
                    "ratios": ratios,
                    "pipelines": results,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
