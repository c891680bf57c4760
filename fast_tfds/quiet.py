"""Start TensorFlow without its start-up noise, for the command-line tools.

`TF_ENABLE_ONEDNN_OPTS=0` and `TF_CPP_MIN_LOG_LEVEL=2` silence most of it, but
the GPU wheel on a machine without CUDA still prints its driver probe before
logging is initialised. Those lines are written straight to file descriptor 2,
so they are caught there while TensorFlow starts; anything else is re-printed.

These functions change the process's environment and file descriptors: only a
program's entry point calls them (our CLI, the demo, the benchmark), never the
library, which leaves a user's process as it found it. A user's own program may
call `quiet_tensorflow()` before anything imports TensorFlow; the two variables
alone leave the GPU wheel's driver probe lines.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

NOISE = re.compile(
    r"absl::InitializeLog|cudart_stub|cuda_platform|cuda_dnn|cuda_fft|cuda_blas|"
    r"cpu_feature_guard|AVX2 AVX512|rebuild TensorFlow|port\.cc|Unable to register cu|"
    r"apitools not found"
)
# What TensorFlow reads when it starts: no oneDNN notice, C++ logs from errors up.
QUIET_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}


def quiet_environment() -> None:
    """Sets QUIET_ENV's variables that are not set already (a user's own choice wins).

    Only effective before TensorFlow is imported; for a program's entry point.
    """
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)


def quiet_tensorflow():
    """Imports TensorFlow with its start-up noise removed; returns the module."""
    quiet_environment()
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as caught:
        os.dup2(caught.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices("GPU")  # the CUDA probe happens here
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        for line in caught.read().decode(errors="replace").splitlines():
            if line.strip() and not NOISE.search(line):
                print(line, file=sys.stderr)
    return tf
