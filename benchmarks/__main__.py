"""`python -m benchmarks ...`, from the root of a clone of the repository."""

import importlib.util
import sys

if sys.argv[1:2] == ["accelerator"]:
    # The GPU machine has no TensorFlow, no builders and no matplotlib: this run needs none.
    from benchmarks.accelerator import main as accelerator

    accelerator(sys.argv[2:])
    raise SystemExit(0)

# Run by an interpreter without the [bench] extra (a system python, .venv not activated),
# the benchmark would fail deep in an import; one line says what to run instead.
_NEEDS = {"tensorflow": "tensorflow", "tensorflow_datasets": "tensorflow-datasets"}
_NEEDS |= {"skimage": "scikit-image", "psutil": "psutil", "matplotlib": "matplotlib"}
_missing = [dist for module, dist in _NEEDS.items() if importlib.util.find_spec(module) is None]
if _missing:
    raise SystemExit(
        f"python -m benchmarks: {sys.executable} lacks {', '.join(_missing)} (the [bench] "
        "extra). Run `bash scripts/bench.sh ARGS`, which installs it into .venv, or activate "
        "that .venv first: `source .venv/bin/activate`."
    )

from benchmarks.main import main  # noqa: E402

main()
