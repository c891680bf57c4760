# Sourced by the other scripts: makes .venv with Python 3.11 and installs the package
# into it (editable) with the extras named in $EXTRAS, at the exact versions of
# constraints/lock.txt (the development environment; setup.py itself declares ranges).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
if [ ! -x .venv/bin/python ]; then
  echo "Creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
  why="first run: a few minutes"
else
  # .venv is there: it lacks these extras, or setup.py or lock.txt changed since.
  why="updating it: extras [${EXTRAS:-none}], or setup.py or constraints/lock.txt changed"
fi
stamp=.venv/.installed-$(cat setup.py constraints/lock.txt | sha1sum | cut -c1-12)-${EXTRAS:-none}
if [ ! -f "$stamp" ]; then
  echo "Installing the package and its locked dependencies into .venv ($why)"
  if ! { .venv/bin/python -m pip install -q --upgrade pip &&
         .venv/bin/python -m pip install -q -c constraints/lock.txt \
           -e ".${EXTRAS:+[$EXTRAS]}"; } >.venv/install.log 2>&1; then
    cat .venv/install.log >&2
    echo "Installing failed; the log above is also in .venv/install.log" >&2
    exit 1
  fi
  touch "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
