"""The accelerator benchmark: `python -m benchmarks accelerator`, on a GPU machine.

Does the input pipeline keep a GPU busy? One prepared run (about 4 minutes on a GPU with
16 cores) that prints one table and writes a JSON file:

- the model's own rate: torchvision's ResNet-50, bf16 autocast, channels-last, SGD, on a
  batch already on the GPU (images/s): the rate the input must hold;
- training rows, each after warm-up steps and then at least `--seconds` of timed steps:
  - ours, served: `as_fast_loader` over the 224 config's ArrayRecord build, the strongest
    recipe (TrivialAugmentWide + erasing, `mix=` MixUp / CutMix), `cache=True`;
  - ours, decoding: the same recipe with `cache=False`, over the `original` photos;
  - the peer: torchvision's recipe in `DataLoader(num_workers=16, pin_memory=True)` over
    the same `original` records (`benchmarks.torch_peer`), timm's `Mixup` on the GPU;
  each with its training images/s and the accelerator's wait: the share of the GPU's
  timeline, from the first timed step's start to the last one's end, in which it idled
  between the end of one step and the start of the next (CUDA events on the compute
  stream; the start waits for the batch's host-to-device copy, so a copy that does not
  overlap the previous step counts as wait). Where the time went, per step: the host's
  wait for the next batch, its copy into pinned memory, the copy to the GPU, the GPU's
  normalisation (and the peer's Mixup), the step;
- scaling, no model, at 1, 2, 4, 8 and 16 threads (the peer: worker processes), on the 224
  config: ours served, ours decoding, the peer; images/s and images per CPU-second of the
  process and its children (`benchmarks.sizes.cpu_seconds`).

Ours: uint8 batches, copied one batch ahead (pinned buffers, a copy stream, non-blocking)
and normalised on the GPU. `--cpu` runs the same loop, wait timing and table on the CPU
with a small stand-in model and a few steps: the test suite's check of this module.

It imports neither TensorFlow, the datasets' builders nor matplotlib: the GPU machine has
none of them. It reads the data that `bash scripts/device/pack.sh` built here
(`--data`, default fast_tfds_device/tensorflow_datasets); scripts/device/README.md says
how to carry it there and run this.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import json
import os
import platform
import sys
import time
from pathlib import Path

from benchmarks import options, recipes
from benchmarks.sizes import Clock, default_out

DATASET = "cats_vs_dogs_fast"
SIZE = 224
DEFAULT_DATA = Path("fast_tfds_device") / "tensorflow_datasets"
THREADS = (1, 2, 4, 8, 16)
PEER_WORKERS = 16
# ImageNet's mean and standard deviation, in uint8 units: the GPU's normalisation.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)
MODEL = "model alone (batch on the device)"
SERVED = "ours served (cache=True, 224)"
DECODING = "ours decoding (cache=False, original)"
PEER = "torchvision DataLoader + timm Mixup (original)"
# The run issue's targets, printed next to what was measured (facts, not pass/fail).
TARGETS = (
    f"{SERVED}: the accelerator waits under 2% of wall time at the model's rate",
    f"{DECODING}: the accelerator waits under 10% of wall time",
    "ours >= 3x the peer's images per CPU-second, same recipe (scaling rows)",
    "ours served at 16 threads >= 5x its 2-thread rate (scaling rows)",
)


class HostEvent:
    """`torch.cuda.Event`'s two calls on the host's clock, for `--cpu`: there a step's
    work is done when its call returns, so the time of the call is the time of the work."""

    def record(self, stream=None) -> None:
        self.time = time.perf_counter()

    def elapsed_time(self, end: HostEvent) -> float:
        return (end.time - self.time) * 1000.0


class Accelerator:
    """Where the steps run: CUDA (events on the GPU's timeline, a copy stream beside the
    compute stream, pinned host buffers) or, with `--cpu`, the host."""

    def __init__(self, cpu: bool):
        import torch

        self.torch, self.cpu = torch, cpu
        if cpu:
            self.device, self.copy_stream = torch.device("cpu"), None
            return
        if not torch.cuda.is_available():
            raise SystemExit(
                "python -m benchmarks accelerator: torch sees no GPU "
                "(torch.cuda.is_available() is False); run it on the GPU machine, or add --cpu"
            )
        self.device = torch.device("cuda")
        torch.backends.cudnn.benchmark = True
        self.copy_stream = torch.cuda.Stream()

    def event(self):
        return HostEvent() if self.cpu else self.torch.cuda.Event(enable_timing=True)

    def copying(self):
        """The context in which a batch's copy to the device is issued."""
        return contextlib.nullcontext() if self.cpu else self.torch.cuda.stream(self.copy_stream)

    def compute_waits_for(self, event) -> None:
        if not self.cpu:
            self.torch.cuda.current_stream().wait_event(event)

    def copy_waits_for(self, event) -> None:
        if not self.cpu:
            self.copy_stream.wait_event(event)

    def synchronize(self) -> None:
        if not self.cpu:
            self.torch.cuda.synchronize()

    def name(self) -> str:
        return "cpu" if self.cpu else self.torch.cuda.get_device_name()


def model_step(acc: Accelerator, classes: int, cpu: bool):
    """fn(images, targets): one SGD step of ResNet-50 (a small stand-in with --cpu) on
    normalised channels-last images and soft targets [B, classes], in bf16 autocast."""
    torch = acc.torch
    if cpu:
        nn = torch.nn
        net = nn.Sequential(
            nn.Conv2d(3, 4, 3, stride=8),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(4, classes),
        )
    else:
        import torchvision

        net = torchvision.models.resnet50(num_classes=classes)
    net = net.to(acc.device, memory_format=torch.channels_last).train()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)

    def step(images, targets) -> None:
        with torch.autocast(acc.device.type, dtype=torch.bfloat16):
            logits = net(images)
        loss = torch.sum(-targets * torch.log_softmax(logits.float(), -1), -1).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def normaliser(acc: Accelerator):
    """fn(uint8 images on the device, NHWC or NCHW) -> float32, NCHW in channels-last
    memory, (x - mean) / std: the GPU's share of the input's work."""
    torch = acc.torch
    mean = torch.tensor(MEAN, device=acc.device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=acc.device).view(1, 3, 1, 1)

    def normalise(images):
        if images.shape[-1] == 3:  # NHWC, ours: the NCHW view is channels-last already.
            images = images.permute(0, 3, 1, 2)
        images = images.float().contiguous(memory_format=torch.channels_last)
        return images.sub_(mean).div_(std)

    return normalise


class Feed:
    """Batches on the device, one ahead: while the device runs step k, the host takes batch
    k+1 from `batches` (numpy or torch, pinned or not), copies it into a pinned buffer
    unless it is pinned already, and issues its copy to the device on the copy stream,
    non-blocking. Two pinned and two device buffers take turns; a buffer is written again
    only once the step that read it has normalised it (`release`)."""

    def __init__(self, acc: Accelerator, batches):
        self.acc, self.batches = acc, batches
        self.host_buffers: list = [None, None]
        self.device_buffers: list = [None, None]
        self.copied = [None, None]  # the copy into each device buffer
        self.released = [None, None]  # the step that last read each device buffer
        self.turn = 0
        self.wait_s = self.pin_s = 0.0  # host seconds: waiting for batches, pinning them

    def next(self):
        """(images, labels, copied event, start event of the copy) of the next batch."""
        torch, acc, turn = self.acc.torch, self.acc, self.turn
        self.turn ^= 1
        start = time.perf_counter()
        images, labels = next(self.batches)
        got = time.perf_counter()
        self.wait_s += got - start
        images = torch.as_tensor(images)
        labels = torch.as_tensor(labels)
        if images.device.type == acc.device.type:  # On the device already: no copy.
            copy_start, copied = acc.event(), acc.event()
            copy_start.record()
            copied.record()
            return images, labels, copied, copy_start
        if not images.is_pinned():
            buffer = self.host_buffers[turn]
            if buffer is None or buffer.shape != images.shape:
                buffer = self.host_buffers[turn] = torch.empty_like(images).pin_memory()
            elif self.copied[turn] is not None:
                self.copied[turn].synchronize()  # its last copy has read it
            buffer.copy_(images)
            images = buffer
        self.pin_s += time.perf_counter() - got
        copy_start, copied = acc.event(), acc.event()
        with acc.copying():
            if self.released[turn] is not None:
                acc.copy_waits_for(self.released[turn])
            target = self.device_buffers[turn]
            if target is None or target.shape != images.shape:
                target = self.device_buffers[turn] = torch.empty(
                    images.shape, dtype=images.dtype, device=acc.device
                )
            copy_start.record()
            target.copy_(images, non_blocking=True)
            labels = labels.to(acc.device, non_blocking=True)
            copied.record()
        # Made on the copy stream, read and freed on the compute stream: the allocator must
        # not hand its memory to the next copy before the step has read it.
        labels.record_stream(torch.cuda.current_stream())
        self.copied[turn] = copied
        return target, labels, copied, copy_start

    def release(self, event) -> None:
        """The step that read the last batch handed out recorded `event` once done with it."""
        self.released[self.turn ^ 1] = event


def train(acc, step, batches, *, warmup: int, seconds: float, min_steps: int, prep):
    """`warmup` untimed steps, then timed steps until both `seconds` and `min_steps` are
    reached. `prep(images, labels) -> (images, targets)` is the device's input work after
    the copy (normalisation; the peer's Mixup). Returns the row: images/s, the wait, and
    the time per step of each part."""
    feed = Feed(acc, batches)
    marks = []  # per step: copy start, copied, start, prepared, end
    count, started = 0, time.perf_counter()
    pending = feed.next()
    for index in itertools.count():
        if index == warmup:  # The timed steps start on an idle device, counts at zero.
            acc.synchronize()
            marks.clear()
            count, started = 0, time.perf_counter()
            feed.wait_s = feed.pin_s = 0.0
        images, labels, copied, copy_start = pending
        acc.compute_waits_for(copied)
        start, prepared, end = acc.event(), acc.event(), acc.event()
        start.record()
        x, y = prep(images, labels)
        prepared.record()
        feed.release(prepared)
        step(x, y)
        end.record()
        marks.append((copy_start, copied, start, prepared, end))
        count += int(x.shape[0])
        if index >= warmup and len(marks) >= min_steps:
            if time.perf_counter() - started >= seconds:
                break
        pending = feed.next()  # while the device runs this step
    acc.synchronize()
    wall_ms = marks[0][2].elapsed_time(marks[-1][4])
    gaps = [a[4].elapsed_time(b[2]) for a, b in zip(marks, marks[1:], strict=False)]
    steps = len(marks)

    def per_step(values) -> float:
        values = list(values)
        return sum(values) / len(values) if values else 0.0

    return {
        "steps": steps,
        "images": count,
        "seconds": wall_ms / 1000.0,
        "images_per_s": count / (wall_ms / 1000.0),
        "wait_share": sum(gaps) / wall_ms if wall_ms > 0 else 0.0,
        "ms_per_step": {
            "gap": per_step(gaps),
            "host_wait_for_batch": 1000.0 * feed.wait_s / steps,
            "host_pin_copy": 1000.0 * feed.pin_s / steps,
            "copy_to_device": per_step(m[0].elapsed_time(m[1]) for m in marks),
            "device_prep": per_step(m[2].elapsed_time(m[3]) for m in marks),
            "step": per_step(m[3].elapsed_time(m[4]) for m in marks),
        },
    }


def model_rate(acc, step, normalise, batch: int, classes: int, args) -> dict:
    """The model's own rate: the same loop over one batch already on the device, normalised
    once (no copy, no preparation: the time between steps is the loop's own)."""
    torch = acc.torch
    shape = (batch, SIZE, SIZE, 3)
    images = torch.randint(0, 256, shape, dtype=torch.uint8, device=acc.device)
    targets = torch.full((batch, classes), 1.0 / classes, device=acc.device)
    batches = itertools.repeat((normalise(images), targets))
    timing = {"warmup": args.warmup_steps, "seconds": args.model_seconds}
    return train(acc, step, batches, **timing, min_steps=args.min_steps, prep=_as_is)


def _as_is(images, labels):
    return images, labels


class Data:
    """The ArrayRecord builds of both configs in `--data`: their version folders, records
    and sizes, or one line saying how to make them."""

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        self.folders = {config: self._folder(config) for config in ("224", "original")}

    def _folder(self, config: str) -> Path:
        found = sorted(
            p.parent
            for p in (self.data_dir / DATASET / config).glob("*/dataset_info.json")
            if any(p.parent.glob("*.array_record-*"))
        )
        if not found:
            raise SystemExit(
                f"--data={self.data_dir}: no ArrayRecord build of {DATASET}/{config} there; "
                "make it with `bash scripts/device/pack.sh` from the repository root"
            )
        return found[-1]

    def files(self, config: str) -> list[Path]:
        return sorted(self.folders[config].glob("*-train.array_record-*"))

    def bytes(self, config: str) -> int:
        return sum(f.stat().st_size for f in self.files(config))


def parse_args(argv: list[str] | None, prog: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", default=os.fspath(DEFAULT_DATA), help="(default: %(default)s)")
    p.add_argument(
        "--cpu",
        action="store_true",
        help="the same loop on the CPU: a small stand-in model, batches of 16, a few steps, "
        "threads 1 and 2 (the test suite's check; its figures mean nothing)",
    )
    p.add_argument("--batch-size", type=int, help="(default 256; 16 with --cpu)")
    p.add_argument("--seconds", type=float, help="timed seconds per training row (default 30)")
    p.add_argument("--model-seconds", type=float, help="timed seconds of the model alone (10)")
    p.add_argument("--scaling-seconds", type=float, help="timed seconds per scaling point (3)")
    p.add_argument("--warmup-steps", type=int, help="untimed steps per row first (default 10)")
    p.add_argument("--threads", help="the scaling rows' thread counts (default 1,2,4,8,16)")
    p.add_argument("--workers", type=int, help=f"the peer's workers (default {PEER_WORKERS})")
    p.add_argument("--json", help="(default: benchmarks/results/bench-accelerator-DATE.json)")
    args = p.parse_args(argv)
    # (GPU, --cpu) defaults: --cpu checks the loop in seconds, not the rates.
    defaults = {
        "batch_size": (256, 16),
        "seconds": (30.0, 0.0),
        "model_seconds": (10.0, 0.0),
        "scaling_seconds": (3.0, 0.0),
        "warmup_steps": (10, 1),
        "threads": (",".join(map(str, THREADS)), "1,2"),
        "workers": (PEER_WORKERS, 2),
    }
    for name, pair in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, pair[args.cpu])
    args.min_steps = 3  # the wait needs gaps between steps, whatever --seconds says
    try:
        args.threads = tuple(int(n) for n in args.threads.split(","))
    except ValueError:
        p.error(f"--threads={args.threads}: give counts such as 1,2,4,8,16")
    counts = {"--batch-size": args.batch_size, "--workers": args.workers}
    options.check_counts(p, args, counts | {f"--threads {n}": n for n in args.threads})
    if args.batch_size % 2:
        p.error(f"--batch-size={args.batch_size}: must be even (timm's Mixup pairs images)")
    return args


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks accelerator") -> None:
    args = parse_args(argv, prog)
    began = time.perf_counter()
    data = Data(Path(args.data))
    acc = Accelerator(args.cpu)
    print(f"{acc.name()}, torch {acc.torch.__version__}, {os.cpu_count()} CPUs", flush=True)
    preflight(acc)
    rows, notes = training_rows(acc, data, args)
    scaling = scaling_rows(acc, data, args, notes)
    result = {
        "schema": 1,
        "mode": "accelerator-cpu" if args.cpu else "accelerator",
        "command": " ".join([prog, *(sys.argv[1:] if argv is None else argv)]),
        "machine": machine(acc),
        "data": {
            config: {"folder": os.fspath(data.folders[config]), "bytes": data.bytes(config)}
            for config in data.folders
        },
        "settings": {
            k: getattr(args, k)
            for k in ("batch_size", "seconds", "model_seconds", "scaling_seconds")
        }
        | {"warmup_steps": args.warmup_steps, "threads": args.threads, "workers": args.workers},
        "recipe": {"augment": "trivial_augment_wide", "erase": recipes.ERASE, "mix": recipes.MIX},
        "rows": rows,
        "scaling": scaling,
        "notes": notes,
        "targets": list(TARGETS),
        "seconds": time.perf_counter() - began,
    }
    print("\n" + table(result))
    out = Path(args.json) if args.json else default_out("accelerator")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"Wrote {out} ({result['seconds']:.0f} s)")


def preflight(acc: Accelerator) -> None:
    """Every module the rows need, imported before anything is timed: a machine without one
    says so in seconds, not after the first rows."""
    import importlib

    needed = ["fast_tfds.loader", "torchvision", "tensorflow_datasets"]
    needed += [] if acc.cpu else ["timm.data"]  # --cpu runs without timm's Mixup (a note)
    for module in needed:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise SystemExit(
                f"python -m benchmarks accelerator: {module} cannot be imported ({err}); on the "
                "GPU machine, install the carried wheels first (scripts/device/README.md)"
            ) from err


def _loader(data: Data, config: str, batch: int, **options):
    """The strongest recipe through `as_fast_loader`, endless, shuffled (mix= needs it)."""
    from fast_tfds import Mix, as_fast_loader

    return as_fast_loader(
        DATASET,
        builder_dir=data.folders[config],
        download_and_prepare=False,
        image_size=SIZE,
        batch_size=batch,
        shuffle=True,
        seed=0,
        num_epochs=None,
        drop_remainder=True,
        augment=recipes.strongest(),
        mix=Mix(**recipes.MIX),
        **options,
    )


def _peer_batches(data: Data, config: str, batch: int, workers: int, pin: bool):
    """(endless batches, DataLoader) of the torchvision peer over `config`'s records,
    persistent workers (timm's loader keeps them), an epoch at least 8 batches per worker."""
    from torch.utils.data import DataLoader

    from benchmarks.torch_peer import Jpegs, records

    source = records(data.files(config))
    repeat = max(1, -(-8 * batch * workers // len(source)))
    dataset = Jpegs(source, SIZE, recipes.ERASE, repeat=repeat)
    loader = DataLoader(
        dataset,
        batch_size=batch,
        num_workers=workers,
        shuffle=True,
        drop_last=True,
        pin_memory=pin,
        persistent_workers=True,
    )
    return itertools.chain.from_iterable(itertools.repeat(loader)), loader


def _mixup(acc: Accelerator, classes: int, notes: dict):
    """timm's Mixup, as its users run it on the GPU; with --cpu where timm is missing,
    one-hot targets (said in the notes)."""
    try:
        from timm.data import Mixup
    except ImportError as err:
        if not acc.cpu:
            raise SystemExit(f"the peer needs timm's Mixup: {err}") from err
        notes[PEER] = f"timm not importable ({err}): no Mixup, one-hot targets"
        torch = acc.torch
        return lambda x, y: (x, torch.nn.functional.one_hot(y, classes).float())
    return Mixup(**recipes.MIX, num_classes=classes)


def training_rows(acc: Accelerator, data: Data, args) -> tuple[dict, dict]:
    classes = 2
    notes: dict[str, str] = {}
    step = model_step(acc, classes, args.cpu)
    normalise = normaliser(acc)
    rows = {}
    timing = {
        "warmup": args.warmup_steps,
        "seconds": args.seconds,
        "min_steps": args.min_steps,
    }

    def ours(images, labels):
        return normalise(images), labels

    print(f"Timing {MODEL} ...", flush=True)
    rows[MODEL] = model_rate(acc, step, normalise, args.batch_size, classes, args)
    for name, config, cache in ((SERVED, "224", True), (DECODING, "original", False)):
        print(f"Timing {name} ...", flush=True)
        loader = _loader(data, config, args.batch_size, cache=cache)
        batches = iter(loader)
        if cache:  # The epoch that fills the cache is warm-up, not a served epoch.
            for _ in range(len(loader)):
                next(batches)
        rows[name] = train(acc, step, batches, **timing, prep=ours)
        loader.close()
    print(f"Timing {PEER} ...", flush=True)
    mixup = _mixup(acc, classes, notes)

    def peer(images, labels):
        return mixup(normalise(images), labels)

    batches, loader = _peer_batches(data, "original", args.batch_size, args.workers, not acc.cpu)
    rows[PEER] = train(acc, step, batches, **timing, prep=peer)
    del batches, loader
    for name in (SERVED, DECODING, PEER):
        rows[name]["of_model_rate"] = rows[name]["images_per_s"] / rows[MODEL]["images_per_s"]
    return rows, notes


def _timed(batches, warmup: int, seconds: float, min_batches: int) -> dict:
    """`warmup` batches, then a `Clock` over batches until `seconds` and `min_batches`."""
    for _ in range(warmup):
        next(batches)
    with Clock() as clock:
        started, count = time.perf_counter(), 0
        while count < min_batches or time.perf_counter() - started < seconds:
            images, _ = next(batches)
            clock.images += len(images)
            count += 1
    epoch = clock.epoch()
    epoch["images_per_s"] = epoch["images"] / epoch["seconds"]
    epoch["images_per_cpu_s"] = epoch["images"] / max(epoch["cpu_seconds"], 1e-9)
    return epoch


def scaling_rows(acc: Accelerator, data: Data, args, notes: dict) -> dict:
    """{row: {threads: epoch}}: no model; ours served and decoding, and the peer, on 224."""
    batch, seconds = args.batch_size, args.scaling_seconds
    out: dict[str, dict[int, dict]] = {"ours served": {}, "ours decoding": {}, "peer": {}}
    for n in args.threads:
        print(f"Scaling at {n} threads ...", flush=True)
        for name, cache in (("ours served", True), ("ours decoding", False)):
            loader = _loader(data, "224", batch, cache=cache, num_threads=n)
            warmup = len(loader) + 1 if cache else 2
            out[name][n] = _timed(iter(loader), warmup, seconds, args.min_steps)
            loader.close()
        batches, loader = _peer_batches(data, "224", batch, n, pin=False)
        out["peer"][n] = _timed(batches, 2, seconds, args.min_steps)
        del batches, loader
    return out


def machine(acc: Accelerator) -> dict:
    from benchmarks.data import cpu_model

    info = {
        "accelerator": acc.name(),
        "torch": acc.torch.__version__,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    if not acc.cpu:
        info["cuda"] = acc.torch.version.cuda
    return info


def table(result: dict) -> str:
    """The training rows (rate, share of the model's rate, wait, where the time went per
    step), then the scaling rows (images/s and images per CPU-second per thread count)."""
    rows, scaling = result["rows"], result["scaling"]
    parts = ("host_wait_for_batch", "host_pin_copy", "copy_to_device", "device_prep", "step")
    head = f"{'row':<48}{'images/s':>10}{'of model':>9}{'wait':>7}"
    head += "".join(f"{h:>9}" for h in ("gap", "batch", "pin", "copy", "prep", "step"))
    lines = [head + "  (ms per step)"]
    for name, r in rows.items():
        ms = r["ms_per_step"]
        of_model = f"{r['of_model_rate']:.2f}x" if "of_model_rate" in r else ""
        wait = f"{100 * r['wait_share']:.1f}%" if name != MODEL else ""
        line = f"{name:<48}{r['images_per_s']:>10,.0f}{of_model:>9}{wait:>7}"
        line += "".join(f"{ms[k]:>9.1f}" for k in ("gap", *parts))
        lines.append(line)
    threads = sorted({int(n) for points in scaling.values() for n in points})
    lines.append("")
    lines.append(f"{'scaling, no model (224)':<48}" + "".join(f"{f'{n} thr':>12}" for n in threads))
    for name, points in scaling.items():
        for key, label in (("images_per_s", "images/s"), ("images_per_cpu_s", "per CPU-s")):
            cells = "".join(
                f"{points[n][key]:>12,.0f}" if n in points else f"{'':>12}" for n in threads
            )
            lines.append(f"{name + ' ' + label:<48}{cells}")
    peer = scaling.get("peer", {})
    for name in ("ours served", "ours decoding"):
        ratios = "".join(
            f"{scaling[name][n]['images_per_cpu_s'] / peer[n]['images_per_cpu_s']:>11.2f}x"
            if n in peer and n in scaling[name]
            else f"{'':>12}"
            for n in threads
        )
        lines.append(f"{name + ' per CPU-s / peer':<48}{ratios}")
    served = scaling.get("ours served", {})
    if 2 in served and 16 in served:
        ratio = served[16]["images_per_s"] / served[2]["images_per_s"]
        lines.append(f"{'ours served, 16 threads / 2 threads':<48}{ratio:>11.2f}x")
    for name, note in result["notes"].items():
        lines.append(f"{name}: {note}")
    lines.append("")
    lines.append("Targets (the run issue):")
    lines += [f"  {t}" for t in result["targets"]]
    return "\n".join(lines)


if __name__ == "__main__":
    main(prog="python -m benchmarks.accelerator")
