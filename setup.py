"""Fast TFDS builders for Cats vs Dogs and Stanford Dogs."""

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).parent

# The sample archives (`fast-tfds demo`, `fast-tfds sample`): real photographs
# shipped inside scikit-image, and a progress bar.
DEMO = ["scikit-image>=0.22", "tqdm>=4.60"]
# `fast-tfds bench`: the samples, memory figures and the chart.
BENCH = [*DEMO, "psutil>=5.9", "matplotlib>=3.8"]
# The loader for JAX and PyTorch users (fast_tfds.loader): ArrayRecord files read
# with Grain, JPEGs decoded with simplejpeg (a core dependency) and resized with
# OpenCV; no TensorFlow.
LOADER = [
    "grain>=0.2.18",
    "array_record>=0.8",
    "opencv-python-headless>=4.8",
]
# The benchmark's PyTorch rows (ImageFolder + DataLoader, the torch adapter). PyPI's
# Linux wheels bundle CUDA (several GB); for CPU-only wheels install torch and
# torchvision from PyTorch's CPU index first. Not part of the test extra: CI skips
# the tests that need torch.
TORCH = ["torch>=2.4", "torchvision>=0.19"]
TEST = [
    "pytest>=8.0",
    "pytest-xdist>=3.5",
    "dill>=0.3.8",  # tfds.testing needs it
    "ruff>=0.6",
    "hypothesis>=6.100",  # fuzzing of image normalization
]

setup(
    name="fast-image-tfds",
    version="1.0.0",
    description=(
        "TFDS builders for Cats vs Dogs and Stanford Dogs with a fast tf.data reader "
        "(interleave, parallel decode, uint8 cache, prefetch)."
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.11,<3.13",
    packages=[
        "fast_tfds",
        "fast_tfds.core",
        "fast_tfds.build",
        "fast_tfds.read",
        "fast_tfds.samples",
        "fast_tfds.cli",
        "fast_tfds.bench",
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
        # CPU wheels are enough for building and for CI; GPU users install
        # "tensorflow[and-cuda]==2.21.*" on top (see README).
        "tensorflow==2.21.*",
        "tensorflow-datasets==4.9.10",
        "pillow>=10.0",
        # The arena cache decodes JPEGs straight into its rows (fast_tfds/read/jpeg_blocks.py).
        "simplejpeg>=1.8,<2",
        # TFDS 4.9.10 imports importlib_resources without declaring it.
        "importlib_resources>=6.0",
        # The `tfds` CLI fails at import without these two.
        "apache-beam>=2.60",
        "mlcroissant>=1.0",
        # TF 2.21 needs protobuf >= 6.31.1; older pins from beam would break it.
        "protobuf>=6.31.1",
        # Stanford Dogs' train/test lists are MATLAB .mat files.
        "scipy>=1.10",
        # The quick look at a source URL before TFDS downloads it (TFDS uses them too).
        "requests>=2.31",
        "urllib3>=1.26",
    ],
    extras_require={
        "demo": DEMO,
        "loader": LOADER,
        "bench": sorted({*BENCH, *LOADER, *TORCH}),
        # The tests cover the samples, the benchmark and the loader too (not torch).
        "test": sorted({*DEMO, *BENCH, *LOADER, *TEST}),
    },
    entry_points={
        "console_scripts": ["fast-tfds=fast_tfds.cli:main"],
    },
)
