#!/usr/bin/env bash
# The test suite (what CI runs): lint, then pytest. Arguments go to pytest.
EXTRAS="test" source "$(dirname "$0")/_venv.sh"
ruff check .
ruff format --check .
exec python -m pytest -n auto "$@"
