"""Helpers shared by the tests."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).parents[1]
# The real `tfds` command line, run as a user would (in a child process).
TFDS_CLI = [sys.executable, "-m", "tensorflow_datasets.scripts.cli.main"]
