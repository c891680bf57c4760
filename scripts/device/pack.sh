#!/usr/bin/env bash
# Packs what `python -m benchmarks accelerator` needs on the GPU machine into fast_tfds_device/
# (git ignores it): the sample's ArrayRecord builds and the wheels that machine lacks, then
# prints their size with the working tree's. Makes .venv with the [bench] extra first;
# arguments go to it (--help). scripts/device/README.md says how to carry and run it.
EXTRAS="bench" source "$(dirname "$0")/../_venv.sh"
exec python -m benchmarks.accelerator_pack "$@"
