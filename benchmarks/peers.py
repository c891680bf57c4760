"""The recipes benchmark's optional peers, each run in a Python process of its own.

A peer is a library the project does not depend on (NVIDIA DALI, TF Model Garden,
torchvision), installed in a virtual environment of its own and named by its Python
(`--dali-python`, `--tfm-python`, `--torch-python`). Each epoch of a peer's row is one
process: it loads the split's JPEG bytes (pickled by the main process), runs one untimed
epoch (imports, threads, workers, tracing), then times one epoch and prints it as
`EPOCH {"images", "seconds", "cpu_seconds"}`. Its CPU seconds are those of the process
and of its children that have ended (torch's DataLoader workers end with their epoch):
every core the peer kept busy, as our rows count every thread of theirs.

A peer that cannot be imported by its Python is not run: `peer()` says why in one line.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path

from benchmarks import data

# The timing both kinds of peer script share: one epoch, every process's CPU seconds.
_CLOCK = r"""
import json, resource, time

def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime

def timed(run_epoch):
    start, cpu = time.perf_counter(), cpu_seconds()
    images = run_epoch()
    return {"images": images, "seconds": time.perf_counter() - start,
            "cpu_seconds": cpu_seconds() - cpu}

def report(run_epoch):
    run_epoch()  # warm-up: imports, threads, workers, tracing
    print("EPOCH " + json.dumps(timed(run_epoch)), flush=True)
"""

# DALI's CPU pipeline: random-resized crop + resize + flip, and then (policy) one of its
# automatic augmentations, `nvidia.dali.auto_aug` (which need conditionals).
DALI = (
    _CLOCK
    + r"""
import pickle, sys
import numpy as np
from nvidia.dali import fn, pipeline_def, types

jpegs = pickle.load(open(sys.argv[1], "rb"))
batch, size, threads, policy = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
arrays = [np.frombuffer(j, np.uint8) for j in jpegs]

def source(iteration):
    start = iteration * batch
    if start >= len(arrays):
        raise StopIteration
    return arrays[start : start + batch]

@pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=0,
              enable_conditionals=policy != "rrc")
def rrc():
    data = fn.external_source(source=source, batch=True, dtype=types.UINT8)
    images = fn.decoders.image_random_crop(
        data, device="cpu", output_type=types.RGB,
        random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=10)
    images = fn.resize(images, resize_x=size, resize_y=size)
    images = fn.flip(images, horizontal=fn.random.coin_flip())
    if policy == "trivial_augment_wide":
        from nvidia.dali.auto_aug import trivial_augment
        images = trivial_augment.trivial_augment_wide(images)  # 31 magnitude bins
    elif policy == "rand_augment":
        from nvidia.dali.auto_aug import rand_augment
        images = rand_augment.rand_augment(images, n=2, m=9)  # torchvision's defaults
    return images

pipe = rrc()
pipe.build()

def epoch():
    images = 0
    while True:
        try:
            (out,) = pipe.run()
        except StopIteration:
            break
        images += len(out)
    pipe.reset()
    return images

report(epoch)
"""
)

# TF Model Garden's RandAugment (`official.vision.ops.augment`, 2 layers at magnitude 10
# of 10, its classification defaults), mapped per example after TF official's crop (the
# same crop as the `TF official RRC+flip` row), then batched, as its input pipeline runs it.
MODEL_GARDEN = (
    _CLOCK
    + r"""
import pickle, sys
sys.path.insert(0, sys.argv[4])  # the repository: the crop of benchmarks.recipes
import tensorflow as tf
from official.vision.ops import augment
from benchmarks.recipes import tf_official_crop

jpegs, labels = pickle.load(open(sys.argv[1], "rb"))
batch = int(sys.argv[2])
randaug = augment.RandAugment(num_layers=2, magnitude=10)
crop = tf_official_crop()

def one(jpeg, label):
    image, label = crop(jpeg, label)
    return randaug.distort(image), label

ds = tf.data.Dataset.from_tensor_slices((jpegs, labels))
ds = ds.map(one, num_parallel_calls=tf.data.AUTOTUNE).batch(batch).prefetch(tf.data.AUTOTUNE)

def epoch():
    return sum(int(images.shape[0]) for images, _ in ds)

report(epoch)
"""
)

# torchvision's recipe (`benchmarks.torch_peer`: RandomResizedCrop + flip +
# TrivialAugmentWide + RandomErasing on uint8 tensors) in a DataLoader of `workers` processes.
TORCHVISION = (
    _CLOCK
    + r"""
import pickle, sys
sys.path.insert(0, sys.argv[6])  # the repository: benchmarks.torch_peer
from torch.utils.data import DataLoader
from benchmarks.torch_peer import Jpegs

jpegs, labels = pickle.load(open(sys.argv[1], "rb"))
batch, size, workers = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
erase = float(sys.argv[5])

# Workers end with each epoch (DataLoader's default): their CPU seconds then count.
loader = DataLoader(Jpegs(list(zip(jpegs, labels)), size, erase), batch_size=batch,
                    num_workers=workers)

def epoch():
    return sum(len(images) for images, _ in loader)

report(epoch)
"""
)


def peer(python: str | None, module: str, how: str, script: str, args: list[str], work: Path):
    """(fn() -> one epoch of `script` in a process of its own, None), or (None, why)
    when `python` (default: this one) cannot import `module` or its first epoch fails;
    `how` says how to get it. The script runs from a file in `work`: DALI's conditionals
    read the pipeline's source, which `python -c` does not have."""
    python = python or sys.executable
    missing = _cannot_import(python, module)
    if missing is not None:
        return None, f"{module} cannot be imported by {python} ({missing}); {how}"
    path = work / f"peer_{zlib.crc32(script.encode()):08x}.py"
    path.write_text(script)

    def epoch():
        done = subprocess.run(
            [python, os.fspath(path), *args],
            capture_output=True,
            text=True,
            timeout=1800,
            env=_quiet_env(),
        )
        line = [x for x in done.stdout.splitlines() if x.startswith("EPOCH ")]
        if done.returncode != 0 or not line:
            raise RuntimeError(f"{module}: " + (done.stderr.strip().splitlines() or ["?"])[-1])
        return json.loads(line[-1].removeprefix("EPOCH "))

    try:  # Its first epoch here: a peer that fails says why in its row, not mid-run.
        epoch()
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        return None, f"{python} {module}: {err}"
    return epoch, None


@functools.cache
def _cannot_import(python: str, module: str) -> str | None:
    """None if `python` imports `module`, else the last line of its error: asked once per
    process (the three DALI rows share one answer)."""
    probe = subprocess.run(
        [python, "-c", f"import {module}"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_quiet_env(),
    )
    if probe.returncode == 0:
        return None
    return (probe.stderr.strip().splitlines() or ["?"])[-1]


def _quiet_env() -> dict:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONWARNINGS": "ignore"}


def pickled(work: Path, name: str, value) -> str:
    path = work / name
    if not path.exists():
        path.write_bytes(pickle.dumps(value))
    return os.fspath(path)


def repo_root() -> str:
    return os.fspath(data.REPO_ROOT)
