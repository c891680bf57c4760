#!/usr/bin/env bash
# The offline demo: generated sample archives -> `tfds build` -> as_fast_dataset(),
# timed next to the TFDS course notebook's naive pipeline. Arguments go to `fast-tfds demo`.
EXTRAS="demo" source "$(dirname "$0")/_venv.sh"
exec fast-tfds demo "$@"
