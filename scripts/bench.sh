#!/usr/bin/env bash
# The benchmark, from this clone: makes .venv with the [bench] extra, then runs
# `python -m benchmarks` from the repository root. Arguments go to it (--help).
EXTRAS="bench" source "$(dirname "$0")/_venv.sh"
exec python -m benchmarks "$@"
