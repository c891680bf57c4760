"""`python -m fast_tfds.bench ...` is `fast-tfds bench ...`."""

from fast_tfds.bench.main import main

main()
