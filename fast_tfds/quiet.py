"""Start TensorFlow without its start-up noise, for the command-line tools.

`TF_ENABLE_ONEDNN_OPTS=0` and `TF_CPP_MIN_LOG_LEVEL=2` silence most of it, but
the GPU wheel on a machine without CUDA still prints its driver probe before
logging is initialised. Those lines are written straight to file descriptor 2,
so they are caught there while TensorFlow starts; anything else is re-printed.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

NOISE = re.compile(
    r"absl::InitializeLog|cudart_stub|cuda_platform|cuda_dnn|cuda_fft|cuda_blas|"
    r"cpu_feature_guard|AVX2 AVX512|rebuild TensorFlow|port\.cc|Unable to register cu"
)


def quiet_tensorflow():
    """Imports TensorFlow with its start-up noise removed; returns the module."""
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
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
