"""Keras 3 on the torch backend with the Grain loader, where torch is installed (the test
suite's machines have none, so tests/loader/test_frameworks.py skips its torch rows there).

Runs those tests' torch rows, the resumed runs (BackupAndRestore, initial_epoch, an endless
loader with steps_per_epoch) on torch, and docs/jax-pytorch.md's Keras snippet on torch,
then `fit` on `DataLoader(loader.as_torch())`, against an ArrayRecord build of the tests'
Cats sample (tests/conftest.py's cats_sample: 20 per class, seed 3, 96 x 80, both configs):

    python scripts/device/keras_torch_check.py DATA_DIR   # from the repository root

It prints one line per check and a SUMMARY line; it exits 1 if a check failed.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, os.getcwd())
os.environ["KERAS_BACKEND"] = "torch"

import torch  # noqa: E402

from tests.loader import test_frameworks as frameworks  # noqa: E402
from tests.loader.new_process import run  # noqa: E402

DATA = Path(sys.argv[1]).resolve()
results = {}


def check(name, fn):
    start = time.time()
    try:
        fn()
        results[name] = "passed"
    except Exception:  # noqa: BLE001 (every failure is reported, then the next check runs)
        results[name] = "FAILED " + traceback.format_exc()[-2500:]
    print(name, results[name][:3000], f"{time.time() - start:.0f}s", flush=True)


def tmp() -> Path:
    return Path(tempfile.mkdtemp())


def fit():
    frameworks.test_keras_fits_one_pass_per_epoch_and_epoch_k_is_data_epoch_k(DATA, tmp(), "torch")


def predict():
    frameworks.test_keras_validates_predicts_and_evaluates_in_record_order(DATA, tmp(), "torch")


def resumed():
    folder = tmp()
    full = run("fit", DATA, folder / "full", "full", "torch")["batches"]
    per_epoch = len(full) // 3
    stopped = run("fit", DATA, folder / "backup", "stopped", "torch")
    assert stopped["batches"] == full[: 2 * per_epoch], "stopped"
    again = run("fit", DATA, folder / "backup", "backup", "torch")  # a new process
    assert again["epochs"] == [[2, 3, per_epoch]], again["epochs"]
    assert again["batches"] == full[2 * per_epoch :], "backup"
    initial = run("fit", DATA, folder / "initial", "initial", "torch")
    assert initial["batches"] == full[2 * per_epoch :], "initial"


def endless():
    folder = tmp()
    full = run("fit", DATA, folder, "endless-full", "torch")
    assert full["batches"] == full["plain"]
    per_epoch = len(full["plain"]) // 3
    initial = run("fit", DATA, folder, "endless-initial", "torch")
    assert initial["batches"] == full["batches"][2 * per_epoch :]


def doc_snippet():
    page = Path("docs/jax-pytorch.md").read_text(encoding="utf-8")
    block = re.search(r"## Keras on JAX and PyTorch.*?```python\n(.*?)```", page, re.S).group(1)
    code = block.replace('"jax"  #', '"torch"  #')
    code = code.replace("import jax  # noqa: F401  (the backend)\n", "")
    code += (
        "\nimport sys, torch\n"
        "data = torch.utils.data.DataLoader(train.as_torch(), batch_size=None)\n"
        "history = model.fit(data, epochs=2, shuffle=False, verbose=0)\n"
        "print('epochs', len(history.history['loss']), 'next', train.pass_clock.start())\n"
        "print('tensorflow imported:', 'tensorflow' in sys.modules)\n"
    )
    env = {**os.environ, "TFDS_DATA_DIR": str(DATA), "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-c", code]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp())
    print(done.stdout[-2000:], done.stderr[-2500:] if done.returncode else "")
    assert done.returncode == 0


print("torch", torch.__version__, "cuda", torch.cuda.is_available(), flush=True)
check("fit torch", fit)
check("predict torch", predict)
check("resume torch (BackupAndRestore, initial_epoch)", resumed)
check("endless resume torch", endless)
check("docs snippet on torch + DataLoader(as_torch()) fit", doc_snippet)
print("SUMMARY", json.dumps({k: v.split()[0] for k, v in results.items()}))
sys.exit(0 if all(v == "passed" for v in results.values()) else 1)
