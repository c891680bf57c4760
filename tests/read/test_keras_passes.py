"""Keras (TensorFlow backend) with as_fast_dataset: Keras' epoch k trains on data epoch
k, and a resumed fit (`initial_epoch`, or `BackupAndRestore`) with
`fast_tfds.KerasEpochs(train)` trains on the batches an uninterrupted one would have.

The model records what it is given (it runs eagerly), so the batches are compared as
the model saw them; ProgressiveResize makes each data epoch's number visible as a size.
"""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest

import fast_tfds
from fast_tfds.augment.progressive import ProgressiveResize
from fast_tfds.augment.spec import Augment
from tests.pairs import digest
from tests.read.reading import read

SIZES = ProgressiveResize(start=32, end=96, start_epoch=0, end_epoch=2, step=32)


class Interrupted(Exception):
    """Stands for a run killed between two epochs."""


def train(data_dir, *, epochs, initial_epoch=0, callbacks=(), readers=True, **fit):
    """{Keras epoch: [(size, digest) of each batch the model saw]} of one fit."""
    ds = read(
        data_dir,
        image_size=SIZES,
        augment=Augment.train(),
        seed=7,
        dtype="float32",
        **fit.pop("options", {}),
    )
    seen: dict[int, list] = {}
    epoch = [initial_epoch]

    class Record(keras.layers.Layer):
        def call(self, images):
            if hasattr(images, "numpy"):  # Not Keras' symbolic build.
                seen.setdefault(epoch[0], []).append((images.shape[1], digest(np.asarray(images))))
            return images

    class Epoch(keras.callbacks.Callback):
        def on_epoch_begin(self, number, logs=None):
            epoch[0] = number

    model = keras.Sequential(
        [
            keras.Input((None, None, 3)),
            Record(),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ]
    )
    model.compile(
        "sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True), run_eagerly=True
    )
    keras_epochs = [fast_tfds.KerasEpochs(ds)] if readers else []
    model.fit(
        ds,
        epochs=epochs,
        initial_epoch=initial_epoch,
        callbacks=[Epoch(), *keras_epochs, *callbacks],
        verbose=0,
        shuffle=False,  # The dataset shuffles.
        **fit,
    )
    return seen


def test_keras_epoch_k_gets_data_epoch_k(cats_data_dir):
    seen = train(cats_data_dir, epochs=3, readers=False)  # A fresh fit needs no callback.
    assert [{size for size, _ in seen[k]} for k in range(3)] == [{32}, {64}, {96}]


def test_fit_resumed_at_initial_epoch_sees_the_uninterrupted_batches(cats_data_dir):
    whole = train(cats_data_dir, epochs=3)
    resumed = train(cats_data_dir, epochs=3, initial_epoch=2)
    assert resumed == {2: whole[2]}


def test_fit_resumed_by_backup_and_restore_sees_the_uninterrupted_batches(cats_data_dir, tmp_path):
    whole = train(cats_data_dir, epochs=3)

    class Stop(keras.callbacks.Callback):
        def on_epoch_begin(self, number, logs=None):
            if number == 1:
                raise Interrupted

    backup = keras.callbacks.BackupAndRestore(os.fspath(tmp_path / "backup"))
    with pytest.raises(Interrupted):
        train(cats_data_dir, epochs=3, callbacks=[backup, Stop()])
    backup = keras.callbacks.BackupAndRestore(os.fspath(tmp_path / "backup"))
    resumed = train(cats_data_dir, epochs=3, callbacks=[backup])
    assert resumed == {1: whole[1], 2: whole[2]}


def test_endless_reads_with_steps_per_epoch_resume_at_the_batch_position(cats_data_dir):
    fit = {"options": {"num_epochs": None}, "steps_per_epoch": 4}
    whole = train(cats_data_dir, epochs=3, **dict(fit))
    resumed = train(cats_data_dir, epochs=3, initial_epoch=1, **dict(fit))
    assert resumed == {1: whole[1], 2: whole[2]}
    # 4 steps per Keras epoch and 7 batches per data epoch: Keras' epoch 1 straddles
    # data epochs 0 and 1 (sizes 32 then 64).
    assert [size for size, _ in whole[1]] == [32, 32, 32, 64]


def test_keras_fit_makes_one_pass_per_epoch_and_an_endless_read_needs_steps(cats_data_dir):
    # num_epochs=1 (the default): fit(epochs=3) iterates the dataset three times.
    seen = train(cats_data_dir, epochs=3)
    assert sorted(seen) == [0, 1, 2] and len({len(batches) for batches in seen.values()}) == 1
    # num_epochs=None: one iterator for the whole fit, whose epochs Keras counts in steps.
    with pytest.raises(ValueError, match=r"^KerasEpochs: a reader with num_epochs=None"):
        train(cats_data_dir, epochs=3, options={"num_epochs": None})
