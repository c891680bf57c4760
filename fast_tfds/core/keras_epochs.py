"""A Keras callback that keeps the readers' epochs in step with Keras' epochs.

A fresh `fit` needs nothing: each Keras epoch is a pass, and passes are counted as
they complete (`fast_tfds.core.passes`). A resumed one does: a new process starts its
readers at epoch 0, while Keras continues at `initial_epoch` (given, or restored by
`BackupAndRestore`). This callback tells the readers, before Keras makes the epoch's
iterator, which epoch that is; with `num_epochs=None` and `steps_per_epoch`, where Keras
keeps one iterator for the whole run, the batch position `epoch * steps_per_epoch`.

Keras is imported when the callback is made, so this module loads no TensorFlow.
"""

from __future__ import annotations

from fast_tfds.core.passes import find_clock


def KerasEpochs(*readers):  # noqa: N802 (used as a class: callbacks=[KerasEpochs(train)])
    """A `keras.callbacks.Callback` that starts each reader's pass at Keras' epoch.

    `readers`: datasets from `as_fast_dataset()` or loaders from `as_fast_loader()`
    that `fit` trains on (evaluation readers with `shuffle=False` and no `augment`
    need none: their epochs are all alike).

        model.fit(train, epochs=10, callbacks=[fast_tfds.KerasEpochs(train),
                                               keras.callbacks.BackupAndRestore(path)])
    """
    import keras

    clocks = [find_clock(reader) for reader in readers]
    if not clocks:
        raise ValueError("KerasEpochs(): give the readers fit trains on, e.g. KerasEpochs(train)")

    class _KerasEpochs(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self._positioned = False

        def on_epoch_begin(self, epoch, logs=None):
            steps = (self.params or {}).get("steps")
            for clock in clocks:
                if not clock.endless:
                    clock.set_epoch(epoch)
                elif not getattr(self, "_positioned", False):
                    # Keras makes one iterator for the whole run: place it once.
                    if steps is None:
                        raise ValueError(
                            "KerasEpochs: a reader with num_epochs=None (endless) "
                            "needs fit(steps_per_epoch=...), so that an epoch is a number "
                            "of batches"
                        )
                    clock.set_position(epoch * steps)
            self._positioned = True

    return _KerasEpochs()
