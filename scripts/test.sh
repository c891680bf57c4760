#!/usr/bin/env bash
# The test suite (what CI runs): lint, then pytest. Arguments go to pytest.
EXTRAS="test" source "$(dirname "$0")/_venv.sh"
# Keeps TensorFlow's start-up lines out of the test log; the tests that check our own
# start-up is quiet remove these from their child processes' environment.
export TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=2
# Azurite (Azure Blob Storage on loopback, for tests/bucket) is an npm package: installed
# once into .azurite/ of the clone, at this version. Without node/npm its tests skip, and
# with CI=true they fail (tests/bucket/stores.py).
AZURITE_VERSION=3.35.0
if [ ! -x .azurite/node_modules/.bin/azurite-blob ] && command -v npm >/dev/null; then
  echo "Installing Azurite $AZURITE_VERSION into .azurite/ (first run)"
  timeout 600 npm install -q --prefix .azurite --no-audit --no-fund "azurite@$AZURITE_VERSION" \
    >/dev/null 2>&1 || echo "Installing Azurite failed: the Azure tests will skip" >&2
fi
ruff check .
ruff format --check .
# --durations=25: the slowest tests at the end of every run, so the next slow one is seen.
# --dist worksteal: each worker starts on a contiguous half of the tests (a module's tests
# stay together, so a folder that `tests.helpers.shared_folder` makes is rarely waited for
# by the other worker meanwhile), and a worker that runs out takes half of what the other
# has left, so neither idles while the other works through its queue.
exec python -m pytest -n auto --dist worksteal --durations=25 "$@"
