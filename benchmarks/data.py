"""The benchmark's data: a generated sample built once into a reusable workdir, or
a dataset the user built; and the facts about the machine a result was measured on.

The sample is built in a child process (`python -m benchmarks.data ...`)
so that the memory the build allocates and frees is not reused by the
pipelines measured afterwards, which would hide part of their RSS growth.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

from fast_tfds import samples

DATASETS = ("cats_vs_dogs_fast", "stanford_dogs_tfrecord")
CONFIGS = ("224", "original")
DEFAULT_WORKDIR = Path("fast_tfds_bench")
REPO_ROOT = Path(__file__).resolve().parents[1]
# ~15,000 images: epochs long enough to time (seconds, even on a 2-core machine)
# while the course notebook's float32 cache (0.6 MB an image) still fits in
# memory. Stanford Dogs: 200 a breed, of which 60% (14,400) are train.
DEFAULT_IMAGES_PER_CLASS = {"cats_vs_dogs_fast": 7500, "stanford_dogs_tfrecord": 200}


def sample_data_dir(dataset: str, workdir: Path, images_per_class: int) -> Path:
    """The TFDS data dir holding both configs of the sample; generates and builds it if needed."""
    root = Path(workdir) / f"{dataset}-{images_per_class}"
    manual_dir, data_dir = root / "manual", root / "tensorflow_datasets"
    if all(is_built(dataset, config, data_dir) for config in CONFIGS):
        print(f"Reusing the built sample in {data_dir}")
        return data_dir
    if not samples.is_complete(dataset, manual_dir):
        samples.write(dataset, manual_dir, images_per_class)
    print(f"Building {dataset} (configs {', '.join(CONFIGS)}) into {data_dir} ...", flush=True)
    command = [
        sys.executable,
        "-m",
        "benchmarks.data",
        dataset,
        str(data_dir),
        str(manual_dir),
    ]
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    # The child imports this package by name, from wherever the benchmark was started.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(command, env=env)
    if done.returncode != 0:
        raise SystemExit(
            f"building the {dataset} sample failed (exit code {done.returncode}); "
            f"see the messages above, or delete {root} and retry"
        )
    return data_dir


def is_built(dataset: str, config: str, data_dir: Path) -> bool:
    # What tfds.builder(...).is_prepared() checks, without its warning about a missing folder.
    return any((Path(data_dir) / dataset / config).glob("*/dataset_info.json"))


def build(dataset: str, data_dir: str, manual_dir: str) -> None:
    """Builds both configs in this process; TFDS shows its own progress bars."""
    from fast_tfds.quiet import quiet_tensorflow

    quiet_tensorflow()
    import importlib

    import tensorflow_datasets as tfds

    importlib.import_module(dataset)  # registers the dataset
    download_config = tfds.download.DownloadConfig(manual_dir=manual_dir)
    for config in CONFIGS:
        builder = tfds.builder(dataset, config=config, data_dir=data_dir)
        builder.download_and_prepare(download_config=download_config)


def load_builders(dataset: str, data_dir: Path, configs, split: str) -> dict:
    import tensorflow_datasets as tfds

    builders = {}
    for config in configs:
        builder = tfds.builder(dataset, config=config, data_dir=data_dir)
        if not builder.is_prepared():
            raise SystemExit(
                f"benchmark: {dataset}/{config} is not built in {data_dir}; build it with "
                f"`tfds build {dataset} --imports {dataset} --data_dir {data_dir} "
                "--manual_dir DIR` (both configs), or leave out the rows that need it with --only"
            )
        if split not in builder.info.splits:
            raise SystemExit(
                f"--split={split}: {dataset} has the splits {', '.join(builder.info.splits)}"
            )
        builders[config] = builder
    return builders


# -- the machine -----------------------------------------------------------------


def machine_info() -> dict:
    import psutil
    import tensorflow as tf
    import tensorflow_datasets as tfds

    gpus = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        gpus.append(details.get("device_name", gpu.name))
    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "gpus": gpus,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "tensorflow": tf.__version__,
        "tensorflow_datasets": tfds.__version__,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    build(*sys.argv[1:4])
