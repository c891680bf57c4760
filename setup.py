"""Fast TFDS builders for Cats vs Dogs and Stanford Dogs."""

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).parent

# The sample archives (`fast-tfds demo`, `fast-tfds sample`): real photographs
# shipped inside scikit-image, and a progress bar.
DEMO = ["scikit-image>=0.22", "tqdm>=4.60"]
# The benchmark (`python -m benchmarks`, from a clone): the samples, memory figures and the
# chart. Its PyTorch rows run where torch is installed; it is no extra, so that a CPU
# machine is never handed PyPI's CUDA build of torch (see README: install).
BENCH = [*DEMO, "psutil>=5.9", "matplotlib>=3.8"]
# The loader for JAX and PyTorch users (fast_tfds.loader): ArrayRecord files read
# with Grain, JPEGs decoded by the core's block decoder; no TensorFlow.
LOADER = [
    "grain>=0.2.18",
    # 0.8.3 is the first that reads gs:// (its own GCS client; earlier ones read local
    # files only).
    "array_record>=0.8.3",
    # Grain's generated protobuf code needs the protobuf 5.26+ runtime.
    "protobuf>=5.28.3",
]
# Shards in a bucket (gs://): both readers copy whole shard objects through gcsfs, and
# persist=True's key holds each object's size and generation, listed through it
# (fast_tfds/cache/remote/).
GCS = ["gcsfs>=2026.10.1"]
# Shards in S3 (or an S3-compatible store) and Azure Blob Storage: the same, through s3fs
# (key: size and ETag) and adlfs (size and ETag). TensorFlow reads neither store, so each
# is needed for any read from it.
S3 = ["s3fs>=2026.9.0"]
AZURE = ["adlfs>=2026.8.0"]
# Keras on JAX with the loader, and Orbax checkpoints of its iterator beside a model
# (docs/jax-pytorch.md): the CPU build of jax; a GPU machine installs "jax[cuda12]" itself.
JAX = ["jax>=0.4.35", "orbax-checkpoint>=0.11.0"]
TEST = [
    "pytest>=8.0",
    "pytest-xdist>=3.5",
    "dill>=0.3.1.1",  # tfds.testing imports it; apache-beam 2.61 caps it below 0.3.2
    "ruff>=0.6",
    "hypothesis>=6.100",  # fuzzing of image normalization
    # tests/bucket: an emulated GCS bucket (gcsfs, in [gcs], is also gs:// for TFDS where
    # TensorFlow is not installed: etils' gs:// back end then).
    "gcp-storage-emulator>=2026.7.19",
    # ... and S3 on loopback (moto's server; Azurite, for Azure, is npm's: scripts/test.sh).
    "moto[server]>=5.1",
]

setup(
    name="fast-image-tfds",
    version="1.1.0",
    description=(
        "TFDS builders for Cats vs Dogs and Stanford Dogs with a fast tf.data reader "
        "(interleave, parallel decode, uint8 cache, prefetch)."
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    # What the code needs; TensorFlow decides the rest (2.18-2.19: Python <= 3.12, 2.20 and
    # newer: 3.13 too). Tested on Python 3.11.
    python_requires=">=3.11",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    packages=[
        "fast_tfds",
        "fast_tfds.core",
        "fast_tfds.cache",
        "fast_tfds.cache.remote",
        "fast_tfds.augment",
        "fast_tfds.augment.ops",
        "fast_tfds.augment.policies",
        "fast_tfds.building",
        "fast_tfds.read",
        "fast_tfds.samples",
        "fast_tfds.cli",
        "fast_tfds.loader",
        "fast_tfds.checksums",
        "cats_vs_dogs_fast",
        "stanford_dogs_tfrecord",
    ],
    # The registered checksums live in the top-level checksums/ folder of the
    # repository and install as fast_tfds.checksums.
    package_dir={"fast_tfds.checksums": "checksums"},
    package_data={
        "cats_vs_dogs_fast": ["*.md", "*.bib", "*.txt", "dummy_data/*"],
        "stanford_dogs_tfrecord": ["*.md", "*.bib", "*.txt", "dummy_data/*"],
        "fast_tfds.checksums": ["*.tsv"],
    },
    install_requires=[
        # Ranges, tested at both ends: CI runs the whole suite on constraints/lock.txt
        # and the smoke checks on constraints/lowest.txt, and once more with plain pip over the
        # lowest TensorFlow and TFDS, as a user installs (scripts/check_install.sh). GPU
        # machines add "tensorflow[and-cuda]" in the same range (see README).
        "tensorflow>=2.18,<3",
        "tensorflow-datasets>=4.9.8,<5",
        # TFDS needs tensorflow-metadata and names no version. From 1.18 on, its generated
        # protobuf code refuses a protobuf runtime below 6, and TensorFlow below 2.20 holds
        # protobuf below 6: over TensorFlow 2.18 or 2.19, pip would pick the newest and
        # `import tensorflow_datasets` would fail with a protobuf VersionError. 1.17.2 and
        # 1.17.3 are built for protobuf 4.25 without that check and accept protobuf 5 and 6,
        # so one bound serves every TensorFlow in the range (see docs/troubleshooting.md).
        "tensorflow-metadata>=1.17.2,<1.18",
        "numpy>=1.26",
        "pillow>=10.0",
        # Blocks of same-size JPEGs decode straight into the reader's rows
        # (fast_tfds/core/jpeg_blocks.py).
        "simplejpeg>=1.8,<2",
        # ... and resized there, at any output size (area average, SIMD).
        "opencv-python-headless>=4.8.0.76",
        # TFDS imports importlib_resources without declaring it.
        "importlib_resources>=6.0",
        # The `tfds` CLI (4.9.8 to 4.9.10) fails at import without these two.
        "apache-beam>=2.61",
        "mlcroissant>=1.0",
        # Stanford Dogs' train/test lists are MATLAB .mat files.
        "scipy>=1.10",
        # The quick look at a source URL before TFDS downloads it (TFDS uses them too).
        "requests>=2.31",
        "urllib3>=1.26",
    ],
    extras_require={
        "demo": DEMO,
        "loader": LOADER,
        "gcs": GCS,
        "s3": S3,
        "azure": AZURE,
        "bench": sorted({*BENCH, *LOADER}),
        "jax": sorted({*LOADER, *JAX}),
        # The tests cover the samples, the benchmark, the loader and its JAX recipes too
        # (not torch).
        "test": sorted({*DEMO, *BENCH, *LOADER, *JAX, *GCS, *S3, *AZURE, *TEST}),
    },
    entry_points={
        "console_scripts": ["fast-tfds=fast_tfds.cli:main"],
    },
)
