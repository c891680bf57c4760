"""The loader in the frameworks, each run in a fresh interpreter (tests/loader/
new_process.py): Keras 3 takes it as it is on every backend (fit with validation,
predict in record order, evaluate; Keras' epoch k is data epoch k, a new pass each),
a resumed Keras run (BackupAndRestore, initial_epoch) gets the batches an uninterrupted
one had, and Orbax saves the iterator beside the parameters and resumes it mid-epoch
in a new process. Backends that are not installed are skipped (torch is not, here)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.helpers import shared_folder
from tests.loader.new_process import run


def installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


BACKENDS = [
    pytest.param(
        backend,
        marks=pytest.mark.skipif(
            not installed(module), reason=f"needs {module}, which is not installed"
        ),
    )
    for backend, module in (("jax", "jax"), ("tensorflow", "tensorflow"), ("torch", "torch"))
]
needs_jax = pytest.mark.skipif(not installed("jax"), reason="needs jax, which is not installed")


def full_fit(backend: str, cats_array_record_dir, tmp_path_factory) -> dict:
    """The RESULT of an uninterrupted 3-epoch fit on `backend`, run once per test run: the
    first test here checks it, and the resumed runs' test compares their batches with the
    jax one's (the same run, which would otherwise start a second interpreter)."""

    def make(folder):
        result = run("fit", cats_array_record_dir, folder, "full", backend)
        (folder / "result.json").write_text(json.dumps(result))

    folder = shared_folder(tmp_path_factory, f"keras_full_fit_{backend}", make)
    return json.loads((folder / "result.json").read_text())


@pytest.mark.parametrize("backend", BACKENDS)
def test_keras_fits_one_pass_per_epoch_and_epoch_k_is_data_epoch_k(
    cats_array_record_dir, tmp_path_factory, backend
):
    result = full_fit(backend, cats_array_record_dir, tmp_path_factory)
    per_epoch = len(result["plain"]) // 3
    # After Keras' epoch k, the loader had completed k + 1 passes, and the model had
    # trained on exactly those batches: the shape reads replayed nothing, skipped nothing.
    assert result["epochs"] == [[k, k + 1, (k + 1) * per_epoch] for k in range(3)]
    assert result["batches"] == result["plain"]
    assert result["streams"] == 1  # one run of the decode threads: no restart per epoch
    if backend != "tensorflow":  # progressive sizes, visible in each batch
        sizes = [int(b.split(":")[0]) for b in result["batches"]]
        assert sizes == [32] * per_epoch + [64] * per_epoch + [96] * per_epoch


@pytest.mark.parametrize("backend", BACKENDS)
def test_keras_validates_predicts_and_evaluates_in_record_order(
    cats_array_record_dir, tmp_path, backend
):
    result = run("predict", cats_array_record_dir, tmp_path, "-", backend)
    # fit(epochs=2, validation_data=val): 2 passes each; predict and evaluate one more.
    assert result["passes"] == [2, 2, 3, 4]
    assert result["rows"] == 56  # every example of the sample once
    assert result["max_difference"] < 1e-5  # row i is the i-th example in record order
    if backend == "jax":
        assert result["modules"] == []  # neither torch nor TensorFlow for a JAX user


@needs_jax
def test_a_resumed_keras_run_gets_the_batches_of_an_uninterrupted_one(
    cats_array_record_dir, tmp_path, tmp_path_factory
):
    full = full_fit("jax", cats_array_record_dir, tmp_path_factory)["batches"]
    per_epoch = len(full) // 3
    stopped = run("fit", cats_array_record_dir, tmp_path / "backup", "stopped")
    assert stopped["batches"] == full[: 2 * per_epoch]
    resumed = run("fit", cats_array_record_dir, tmp_path / "backup", "backup")  # a new process
    assert resumed["epochs"] == [[2, 3, per_epoch]]
    assert resumed["batches"] == full[2 * per_epoch :]
    initial = run("fit", cats_array_record_dir, tmp_path / "initial", "initial")
    assert initial["batches"] == full[2 * per_epoch :]


@needs_jax
def test_an_endless_loader_with_steps_per_epoch_resumes_at_its_batch_position(
    cats_array_record_dir, tmp_path
):
    # num_epochs=None and fit(steps_per_epoch=len(loader)): Keras keeps one iterator for
    # the whole run; KerasEpochs places it once, at epoch * steps_per_epoch.
    full = run("fit", cats_array_record_dir, tmp_path, "endless-full")
    assert full["batches"] == full["plain"]
    per_epoch = len(full["plain"]) // 3
    initial = run("fit", cats_array_record_dir, tmp_path, "endless-initial")
    assert initial["batches"] == full["batches"][2 * per_epoch :]


@needs_jax
def test_an_endless_loader_without_steps_per_epoch_is_refused_by_keras_epochs(
    cats_array_record_dir, tmp_path
):
    # num_epochs=1 (the default) makes one pass per fit epoch (the first test here); an
    # endless loader's epoch is a number of steps, which Keras must be given.
    error = run("fit", cats_array_record_dir, tmp_path, "endless-nosteps")["error"]
    assert error.startswith("KerasEpochs: a reader with num_epochs=None (endless) needs fit(")


@pytest.mark.skipif(
    not installed("jax", "orbax.checkpoint"), reason="needs jax and orbax-checkpoint"
)
def test_orbax_restores_the_loader_mid_epoch_in_a_new_process(cats_array_record_dir, tmp_path):
    saved = run("orbax", cats_array_record_dir, tmp_path, "save")
    restored = run("orbax", cats_array_record_dir, tmp_path, "restore")
    assert restored["params"] == saved["params"] == [0.0, 1.0, 2.0]
    # The batches after the checkpoint (epoch 1, batch 2 on), as the first run read them.
    assert restored["batches"] == saved["batches"] and len(set(saved["batches"])) == 5
