#!/usr/bin/env bash
# The test suite (what CI runs): lint, then pytest. Arguments go to pytest.
EXTRAS="test" source "$(dirname "$0")/_venv.sh"
# Keeps TensorFlow's start-up lines out of the test log; the tests that check our own
# start-up is quiet remove these from their child processes' environment.
export TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=2
ruff check .
ruff format --check .
# --durations=25: the slowest tests at the end of every run, so the next slow one is seen.
exec python -m pytest -n auto --durations=25 "$@"
