"""`python -m fast_tfds.cli ...` is `fast-tfds ...`."""

from fast_tfds.cli import main

main()
