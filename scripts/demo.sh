#!/usr/bin/env bash
# The offline main job: sample archives -> `tfds build` -> as_fast_dataset(),
# next to the seed notebooks' pipeline. Arguments go to `fast-tfds demo`.
EXTRAS="demo" source "$(dirname "$0")/_venv.sh"
exec fast-tfds demo "$@"
