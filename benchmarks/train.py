"""Accelerator-wait mode: how long a training step waits for each pipeline's input.

A Keras MobileNetV2 (or, with `--model tiny`, one convolution) trains for `steps`
steps fed by each pipeline through ONE iterator over a repeated dataset (as
`model.fit(ds.repeat(), steps_per_epoch=N)` does; recreating iterators per epoch
can stall with autotune).
Every step times `next(iterator)` (the wait for input) apart from the train
step, which is forced to finish by fetching its loss. A compute-only row feeds
one batch held in memory, so `1 - compute_only / step` is a second, derived
estimate of the wait. Runs unchanged on a GPU: the default distribution
strategy, nothing placed by hand; the uint8 pipeline is rescaled by a
`Rescaling` layer inside the model, that is on the device.
"""

from __future__ import annotations

import dataclasses
import statistics
import time

import tensorflow as tf

import fast_tfds
from benchmarks import baselines


def build_model(
    image_size: int,
    num_classes: int,
    input_dtype: str,
    weights: str | None,
    model: str = "mobilenetv2",
):
    import keras

    inputs = keras.Input((image_size, image_size, 3), dtype=input_dtype)
    x = inputs
    if input_dtype == "uint8":
        x = keras.layers.Rescaling(1.0 / 255)(x)  # part of the model: runs on the accelerator
    if model == "tiny":
        # One strided convolution: the same loop, timing and summary at a fraction of
        # MobileNetV2's trace and step, for checking that the mode runs (the tests).
        x = keras.layers.Conv2D(8, 3, strides=2, activation="relu")(x)
        x = keras.layers.GlobalAveragePooling2D()(x)
        return keras.Model(inputs, keras.layers.Dense(num_classes)(x))
    try:
        base = keras.applications.MobileNetV2(
            input_shape=(image_size, image_size, 3),
            include_top=False,
            weights=weights,
            pooling="avg",
        )
    except Exception as err:  # offline 'imagenet' download, unsupported size
        raise SystemExit(f"--train: cannot create MobileNetV2 (weights={weights}): {err}") from None
    return keras.Model(inputs, keras.layers.Dense(num_classes)(base(x)))


def make_train_step(model, image_size: int, input_dtype: tf.DType):
    import keras

    optimizer = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
    # Its variables made here, not in the first step: a tf.function whose first call makes
    # variables is traced twice, and the trace is most of a short run's time.
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    signature = [
        tf.TensorSpec([None, image_size, image_size, 3], input_dtype),  # None: the last batch
        tf.TensorSpec([None], tf.int64),
    ]

    @tf.function(input_signature=signature)
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return train_step


def timed_steps(train_step, next_batch, steps: int, warmup: int) -> dict:
    """Per step: seconds in next_batch() and seconds in the train step, loss fetched."""
    for _ in range(warmup):
        float(train_step(*next_batch()))
    waits, computes = [], []
    for _ in range(steps):
        start = time.perf_counter()
        images, labels = next_batch()
        got = time.perf_counter()
        float(train_step(images, labels))  # fetching the loss waits for the step to finish
        done = time.perf_counter()
        waits.append(got - start)
        computes.append(done - got)
    return {"wait_s": [round(w, 5) for w in waits], "compute_s": [round(c, 5) for c in computes]}


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    label: str
    input: str  # the model's input dtype: 'float32' or 'uint8'
    config: str  # the stored config the pipeline reads


ROWS = (
    Row("compute_only_float32", "one float32 batch in memory, fed every step", "float32", "224"),
    Row("compute_only_uint8", "one uint8 batch in memory, fed every step", "uint8", "224"),
    Row("course_naive", "course notebook's naive pipeline (original), .repeat()", "float32",
        "original"),
    Row("course_parallel", "course notebook's parallel pipeline (original, float32 cache), "
        ".repeat()", "float32", "original"),
    Row("tfds_load_original", "tfds.load user (original), .repeat()", "float32", "original"),
    Row("fast_224_float32", "as_fast_dataset 224, float32, num_epochs=None", "float32", "224"),
    Row("fast_224_uint8", "as_fast_dataset 224, uint8 + Rescaling in the model", "uint8", "224"),
)  # fmt: skip
DTYPES = {"float32": tf.float32, "uint8": tf.uint8}


def make_dataset(row: Row, builders: dict, split: str, image_size: int, batch_size: int):
    """The row's pipeline, repeated forever: one iterator serves every step."""
    size = (image_size, image_size)
    sized = dict(size=size, batch_size=batch_size)
    builder = builders[row.config]
    if row.name == "course_naive":
        return baselines.naive_pipeline(baselines.shard_files(builder, split), **sized).repeat()
    if row.name == "course_parallel":
        files = baselines.shard_files(builder, split)
        return baselines.parallel_pipeline(files, **sized).repeat()
    if row.name == "tfds_load_original":
        return baselines.tfds_load_user(builder, split, **sized).repeat()
    return fast_tfds.read_split(
        builder,
        split,
        batch_size=batch_size,
        image_size=size,
        num_epochs=None,
        dtype=DTYPES[row.input],
    )


def run(
    builders: dict,
    split: str,
    *,
    steps: int,
    warmup: int,
    batch_size: int,
    image_size: int,
    weights: str | None,
    model: str = "mobilenetv2",
    only: list[str] | None = None,
) -> dict:
    """{name: {label, input, steps: raw times, summary}} for compute-only and each pipeline."""
    from tqdm import tqdm

    num_classes = builders["224"].info.features["label"].num_classes
    rows = [row for row in ROWS if only is None or row.name in only]
    strategy = tf.distribute.get_strategy()
    # One model per input dtype; the rows of that dtype share it (and its trace).
    train_steps = {}
    for dtype in sorted({row.input for row in rows}):
        with strategy.scope():
            model = build_model(image_size, num_classes, dtype, weights, model)
            train_steps[dtype] = make_train_step(model, image_size, DTYPES[dtype])
    held = (
        fast_tfds.read_split(
            builders["224"], split, batch_size=batch_size, image_size=(image_size,) * 2,
            cache=False, shuffle=False, dtype=tf.uint8,
        ).take(1).get_single_element()
    )  # fmt: skip
    results = {}
    bar = tqdm(rows, desc="Training", unit="pipeline")
    for row in bar:
        train_step = train_steps[row.input]
        if row.name.startswith("compute_only_"):
            images = held[0]
            if row.input == "float32":  # made on the host, like a pipeline's batches
                images = tf.convert_to_tensor(images.numpy().astype("float32") / 255.0)
            batch = (images, held[1])
            times = timed_steps(train_step, lambda batch=batch: batch, steps, warmup)
        else:
            iterator = iter(make_dataset(row, builders, split, image_size, batch_size))
            times = timed_steps(train_step, lambda it=iterator: next(it), steps, warmup)
            del iterator
        results[row.name] = {"label": row.label, "input": row.input, "steps": times}
        results[row.name]["summary"] = summary = summarize(times, batch_size)
        bar.write(
            f"  {row.name:<24} step {summary['step_ms']:8.1f} ms, waiting for input "
            f"{summary['input_ms']:7.1f} ms ({summary['wait_fraction']:.1%})"
        )
    for name, result in results.items():
        reference = results.get(f"compute_only_{result['input']}")
        if reference is not None and not name.startswith("compute_only_"):
            ratio = reference["summary"]["step_ms"] / result["summary"]["step_ms"]
            result["summary"]["derived_wait_fraction"] = round(max(0.0, 1.0 - ratio), 4)
    return results


def summarize(times: dict, batch_size: int) -> dict:
    waits, computes = times["wait_s"], times["compute_s"]
    total = sum(waits) + sum(computes)
    return {
        "step_ms": round(1000 * total / len(waits), 2),
        "median_step_ms": round(
            1000 * statistics.median(w + c for w, c in zip(waits, computes, strict=True)), 2
        ),
        "input_ms": round(1000 * statistics.mean(waits), 3),
        "compute_ms": round(1000 * statistics.mean(computes), 2),
        "wait_fraction": round(sum(waits) / total, 4) if total > 0 else 0.0,
        "images_per_s": round(batch_size * len(waits) / total, 1) if total > 0 else 0.0,
    }


def device_name() -> str:
    gpus = tf.config.list_logical_devices("GPU")
    return ", ".join(g.name for g in gpus) if gpus else "CPU"
