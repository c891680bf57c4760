#!/usr/bin/env bash
# Tests the wheel, not the tree (CI runs this after scripts/test.sh):
#  1. builds the wheel;
#  2. installs it with the [loader] extra into a fresh venv at the locked versions
#     (constraints/lock.txt) and runs scripts/smoke.py from a temporary folder, so the
#     source tree cannot shadow the install;
#  3. does the same at the lowest supported versions (constraints/lowest.txt), and runs
#     the smoke tests (pytest -m smoke: build, read, loader) there too;
#  4. installs as a user does, with no constraints file: TensorFlow and TFDS at their
#     lowest supported versions first, then the wheel, each with plain pip, and runs
#     scripts/smoke.py there. Only setup.py's declared requirements hold pip in place, so
#     a pairing that breaks over an older TensorFlow (a protobuf VersionError at
#     `import tensorflow_datasets`, docs/troubleshooting.md) fails here.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== building the wheel"
"$PYTHON" -m pip wheel -q --no-deps -w "$work/dist" . >"$work/wheel.log" 2>&1 ||
  { cat "$work/wheel.log" >&2; exit 1; }
wheel=$(ls "$work"/dist/*.whl)
if unzip -l "$wheel" | grep -q "benchmarks/"; then
  echo "the wheel contains the benchmark modules" >&2
  exit 1
fi

install() {  # install VENV CONSTRAINTS EXTRAS
  echo "== installing $(basename "$wheel")[$3] with $2 into $1"
  "$PYTHON" -m venv "$1"
  if ! { "$1/bin/python" -m pip install -q --upgrade pip &&
         "$1/bin/python" -m pip install -q -c "$2" "$wheel[$3]"; } >"$1/install.log" 2>&1; then
    cat "$1/install.log" >&2
    exit 1
  fi
  "$1/bin/python" -m pip list 2>/dev/null | grep -iE "^(tensorflow|tensorflow-datasets|protobuf|grain) "
}

smoke() {  # smoke VENV
  (cd "$(mktemp -d -p "$work")" && "$1/bin/python" "$REPO/scripts/smoke.py")
}

install "$work/lock" constraints/lock.txt loader
smoke "$work/lock"

install "$work/lowest" constraints/lowest.txt loader,test
smoke "$work/lowest"
echo "== smoke tests at the lowest versions, on the installed wheel"
# The tests run from a copy outside the repository, so that `import fast_tfds` is the
# wheel's (with its package data), not the source tree's.
tests_copy=$(mktemp -d -p "$work")
cp -r tests pytest.ini "$tests_copy"/
mapfile -t smoke_modules < <(sed -n '/^SMOKE_MODULES = (/,/^)/p' tests/conftest.py | grep -o 'tests/[^"]*')
(cd "$tests_copy" &&
  TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=2 "$work/lowest/bin/python" -m pytest -q \
    -p no:cacheprovider -m smoke -n 2 "${smoke_modules[@]}")

# What the lowest-versions step pins, read from constraints/lowest.txt.
lowest() { sed -n "s/^$1==//p" constraints/lowest.txt; }
tf=$(lowest tensorflow)
tfds=$(lowest tensorflow-datasets)
echo "== as a user installs: tensorflow==$tf tensorflow-datasets==$tfds, then the wheel; no -c"
user=$work/user
"$PYTHON" -m venv "$user"
if ! { "$user/bin/python" -m pip install -q --upgrade pip &&
       "$user/bin/python" -m pip install -q "tensorflow==$tf" "tensorflow-datasets==$tfds" &&
       "$user/bin/python" -m pip list 2>/dev/null |
         grep -iE "^(tensorflow-metadata|protobuf) " | sed "s/^/   before the wheel: /" &&
       "$user/bin/python" -m pip install -q "$wheel[loader]"; } >"$user/install.log" 2>&1; then
  cat "$user/install.log" >&2
  exit 1
fi
grep "before the wheel" "$user/install.log"
"$user/bin/python" -m pip list 2>/dev/null |
  grep -iE "^(tensorflow|tensorflow-datasets|tensorflow-metadata|protobuf|grain) "
smoke "$user"
