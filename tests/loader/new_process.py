"""Runs of the loader each in a fresh interpreter (a resumed run is a new process):
`run(KIND, DATA_DIR, FOLDER, MODE)` starts `python -m tests.loader.new_process ...`,
which prints `RESULT <json>` last. Keras' backend is KERAS_BACKEND.

Each batch is recorded as a digest of its images (and labels, where the run sees
them), as the framework received it: Keras' model runs eagerly, so that a layer sees
every batch it trains on."""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np


def run(kind: str, data_dir, folder, mode: str, backend: str = "jax") -> dict:
    """One run in a new process (Keras on `backend`); its RESULT."""
    from tests.children import Child
    from tests.helpers import REPO, child_env

    child = Child(
        [sys.executable, "-m", "tests.loader.new_process", kind, str(data_dir), str(folder), mode],
        env=child_env(KERAS_BACKEND=backend, PYTHONPATH=os.fspath(REPO)),
        cwd=REPO,
    )
    line, _ = child.line_starting("RESULT ")
    child.communicate()
    assert child.returncode == 0, child.stderr_text()[-3000:]
    return json.loads(line.removeprefix("RESULT "))


SIZES = dict(start=32, end=96, start_epoch=0, end_epoch=2, step=32)  # 32, 64, 96


def batch_digest(images, labels) -> str:
    images, labels = np.asarray(images), np.asarray(labels)
    return hashlib.sha1(images.tobytes() + labels.astype(np.int64).tobytes()).hexdigest()[:12]


def train_loader(data_dir, progressive: bool = True, **options):
    """Random crops from (seed, epoch, example): every epoch's batches differ; with
    `progressive`, in size too (32, 64, 96 px)."""
    import cats_vs_dogs_fast
    from fast_tfds import Augment, ProgressiveResize

    return cats_vs_dogs_fast.as_fast_loader(
        "train",
        data_dir=data_dir,
        download_and_prepare=False,
        batch_size=8,
        seed=1,
        num_threads=2,
        augment=Augment(),
        image_size=ProgressiveResize(**SIZES) if progressive else 32,
        **options,
    )


def orbax(data_dir: str, folder: str, mode: str) -> dict:
    """mode 'save': 1 epoch and 2 batches, then a checkpoint of the parameters and the
    iterator, then 5 more batches; 'restore': a new loader restored, then 5 batches."""
    import grain
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    loader = train_loader(data_dir, num_epochs=None)
    iterator = iter(loader)
    params = {"w": jnp.zeros(3)}
    manager = ocp.CheckpointManager(folder)
    if mode == "save":
        for _ in range(len(loader) + 2):
            next(iterator)
        params = {"w": jnp.arange(3.0)}
        args = ocp.args.Composite(
            params=ocp.args.StandardSave(params), data=grain.checkpoint.CheckpointSave(iterator)
        )
        manager.save(1, args=args)
        manager.wait_until_finished()
    else:
        args = ocp.args.Composite(
            params=ocp.args.StandardRestore(params),
            data=grain.checkpoint.CheckpointRestore(iterator),
        )
        restored = manager.restore(1, args=args)
        params = restored.params
    batches = [batch_digest(*next(iterator)) for _ in range(5)]
    return {"batches": batches, "params": np.asarray(params["w"]).tolist()}


def keras_model(recorded: list):
    import keras

    class Record(keras.layers.Layer):
        """Records each batch the model is given (eagerly: concrete values)."""

        def call(self, images):
            try:  # the values of a batch, not of the symbolic tensor of a shape read
                values = keras.ops.convert_to_numpy(images)
            except Exception:  # noqa: BLE001 (each backend raises its own)
                return images
            # Keras gives the model float32 pixels: the same integers as the uint8 batch.
            recorded.append(f"{values.shape[1]}:{batch_digest(values.astype(np.uint8), [])}")
            return images

    images = keras.Input((None, None, 3))
    x = Record()(images)
    x = keras.layers.Rescaling(1 / 255)(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(2)(x)
    model = keras.Model(images, outputs)
    model.compile(
        "sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True), run_eagerly=True
    )
    return model


def keras_fit(data_dir: str, folder: str, mode: str) -> dict:
    """mode 'full': 3 epochs; 'stopped': stopped after epoch 1 with BackupAndRestore in
    `folder`; 'backup': a new process resuming it; 'initial': fit(initial_epoch=2).
    'endless-full', 'endless-initial': the same with num_epochs=None and steps_per_epoch
    (one iterator for the whole run); 'endless-nosteps': without steps_per_epoch, which
    KerasEpochs refuses (its error)."""
    import keras

    import fast_tfds

    # Keras' TensorFlow backend fixes the shapes from the first batches it reads.
    progressive = keras.backend.backend() != "tensorflow"
    endless = mode.startswith("endless-")
    mode = mode.removeprefix("endless-")
    loader = train_loader(data_dir, progressive, num_epochs=None if endless else 1)
    recorded: list = []
    epochs: list = []
    streams: set = set()
    model = keras_model(recorded)

    class Epochs(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            epochs.append([epoch, loader.pass_clock.start().epoch, len(recorded)])
            streams.add(id(loader._stream))  # noqa: SLF001 (the decode threads' stream)
            if mode == "stopped" and epoch == 1:
                raise KeyboardInterrupt  # the run dies after its backup of epoch 1

    callbacks = [fast_tfds.KerasEpochs(loader)]
    if mode in ("stopped", "backup"):
        callbacks.append(keras.callbacks.BackupAndRestore(folder))
    callbacks.append(Epochs())
    try:
        model.fit(
            loader,
            epochs=3,
            initial_epoch=2 if mode == "initial" else 0,
            steps_per_epoch=len(loader) if endless and mode != "nosteps" else None,
            callbacks=callbacks,
            verbose=0,
            shuffle=False,
        )
    except KeyboardInterrupt:
        pass
    except ValueError as error:
        if mode != "nosteps":
            raise
        return {"error": str(error)}
    # What three passes of the loader are, read plainly: what an uninterrupted run's
    # batches are compared with (the other modes' are compared with an uninterrupted run's).
    plain = (
        [
            f"{i.shape[1]}:{batch_digest(i, [])}"
            for i, _ in train_loader(data_dir, progressive, num_epochs=3)
        ]
        if mode == "full"
        else None
    )
    return {"batches": recorded, "epochs": epochs, "plain": plain, "streams": len(streams)}


def keras_predict(data_dir: str, folder: str, mode: str) -> dict:
    """fit(train, validation_data=val), predict(val) and evaluate(val), on a loader
    without the recorder: the predictions' rows and the passes each made."""
    import keras

    import cats_vs_dogs_fast

    def loader(**options):
        return cats_vs_dogs_fast.as_fast_loader(
            "train",
            data_dir=data_dir,
            download_and_prepare=False,
            batch_size=8,
            image_size=32,
            num_threads=2,
            **options,
        )

    train, val = loader(seed=1), loader(shuffle=False)
    model = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Flatten(),
            keras.layers.Dense(2),
        ]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(train, epochs=2, validation_data=val, verbose=0, shuffle=False)
    passes = [train.pass_clock.start().epoch, val.pass_clock.start().epoch]
    predicted = model.predict(val, verbose=0)
    passes.append(val.pass_clock.start().epoch)
    loss = model.evaluate(val, verbose=0)
    passes.append(val.pass_clock.start().epoch)
    # The same rows, in order, from the batches themselves.
    images = np.concatenate([images for images, _ in val])
    direct = np.asarray(model.predict_on_batch(images))
    return {
        "passes": passes,
        "rows": len(predicted),
        "max_difference": float(np.abs(np.asarray(predicted) - direct).max()),
        "loss": float(loss),
        "modules": sorted(m for m in ("torch", "tensorflow") if m in sys.modules),
    }


def order(data_dir: str, folder: str, mode: str) -> dict:
    """Two passes of shuffle=False: each example's (pixels digest, label), in order;
    mode 'persist': served from the persistent file in `folder`."""
    import cats_vs_dogs_fast

    persist = {"cache": True, "persist": True, "cache_dir": folder} if mode == "persist" else {}
    loader = cats_vs_dogs_fast.as_fast_loader(
        "train",
        data_dir=data_dir,
        download_and_prepare=False,
        batch_size=6,
        shuffle=False,
        num_threads=2,
        **persist,
    )
    passes = [
        [
            [hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest(), int(label)]
            for images, labels in loader
            for image, label in zip(images, labels, strict=True)
        ]
        for _ in range(2)
    ]
    return {"passes": passes}


if __name__ == "__main__":
    kind, data_dir, folder, mode = sys.argv[1:5]
    run = {"orbax": orbax, "fit": keras_fit, "predict": keras_predict, "order": order}[kind]
    print("RESULT " + json.dumps(run(data_dir, folder, mode)), flush=True)
