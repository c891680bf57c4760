"""How long Keras `fit` waits at each epoch boundary, with and without `repeat`.

A small model trains for a few epochs on a slice of the split; a callback
stamps the end of every step. The gap from an epoch's last step to the next
epoch's first is compared with the median step: with autotune on, deleting an
iterator can stall for a long time there, and Keras makes a new iterator every
epoch unless the dataset repeats and `steps_per_epoch` is given.
"""

from __future__ import annotations

import math
import statistics
import time

import tensorflow as tf

import fast_tfds

IMAGE_SIZE = 64
BATCH = 32


class _StepTimes(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs: list[list[float]] = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append([])

    def on_train_batch_end(self, batch, logs=None):
        self.epochs[-1].append(time.perf_counter())


def measure(builder, split: str = "train[:10%]", epochs: int = 4) -> list[dict]:
    """One row per mode: the largest boundary gap and the median step, in ms."""
    rows = []
    # At least 8 steps an epoch, also on a tiny sample.
    batch = max(1, min(BATCH, builder.info.splits[split].num_examples // 8))
    for repeat in (False, True):
        ds = fast_tfds.read_split(
            builder,
            split,
            batch_size=batch,
            image_size=IMAGE_SIZE,
            num_epochs=None if repeat else 1,
        )
        steps = None
        if repeat:  # Every batch of the split once, the last one partial.
            steps = math.ceil(builder.info.splits[split].num_examples / batch)
        model = tf.keras.Sequential(
            [
                tf.keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3)),
                tf.keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
                tf.keras.layers.GlobalAveragePooling2D(),
                tf.keras.layers.Dense(builder.info.features["label"].num_classes),
            ]
        )
        model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        times = _StepTimes()
        # shuffle=False: the dataset shuffles itself (Keras warns otherwise).
        model.fit(
            ds, epochs=epochs, steps_per_epoch=steps, verbose=0, callbacks=[times], shuffle=False
        )
        # Epoch 1 fills the cache; its boundary with epoch 2 counts like the others.
        steps_ms = [
            1000 * (b - a)
            for stamps in times.epochs
            for a, b in zip(stamps, stamps[1:], strict=False)
        ]
        gaps_ms = [
            1000 * (nxt[0] - prev[-1])
            for prev, nxt in zip(times.epochs, times.epochs[1:], strict=False)
        ]
        rows.append(
            {
                "label": "as_fast_dataset, fit(epochs=N)"
                + (", num_epochs=None + steps_per_epoch" if repeat else ", one pass"),
                "repeat": repeat,
                "gaps_ms": [round(g, 2) for g in gaps_ms],
                "max_gap_ms": round(max(gaps_ms), 2),
                "median_step_ms": round(statistics.median(steps_ms), 2),
            }
        )
    return rows
