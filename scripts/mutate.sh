#!/usr/bin/env bash
# Mutation testing of one module with the tests that cover it, using mutmut
# (CONTRIBUTING.md, "Mutation testing"):
#
#   scripts/mutate.sh fast_tfds/core/jpeg_blocks.py tests/read/test_jpeg_blocks.py ...
#
# mutmut runs the tests inside its own process, so it runs under the project's
# Python (.venv, made as scripts/test.sh makes it; or $PROJECT_PYTHON) with mutmut
# itself installed in a venv of its own ($MUTMUT_VENV) and put at the end of sys.path.
# The run happens in a copy of this tree (mutmut writes mutants/ next to the code):
# its folder is printed at the end, for `mutmut show NAME` there. MUTANTS="NAME ..."
# runs only those mutants (an earlier run's survivors, after tests were added).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 MODULE.py TEST [TEST ...]  (paths from the repository root)" >&2
  exit 2
fi
module=$1
shift
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ ! -f "$repo/$module" ]; then
  echo "$0: no module $module in $repo" >&2
  exit 2
fi
if [ -z "${PROJECT_PYTHON:-}" ]; then
  EXTRAS="test" source "$repo/scripts/_venv.sh"
  PROJECT_PYTHON=$repo/.venv/bin/python
fi
tool_venv=${MUTMUT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/fast_tfds/mutmut-venv}
if [ ! -x "$tool_venv/bin/python" ]; then
  echo "Installing mutmut into $tool_venv"
  "$("$PROJECT_PYTHON" -c 'import sys; print(sys._base_executable)')" -m venv "$tool_venv"
  "$tool_venv/bin/python" -m pip install -q "mutmut==3.8.1"
fi
tool_site=$("$tool_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

work=$(mktemp -d "${TMPDIR:-/tmp}/fast_tfds-mutate-XXXXXX")
(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$work")
package=${module%%/*}
{
  echo "[mutmut]"
  echo "source_paths = $package"
  echo "only_mutate = $module"
  # Each mutant's tests run in a process forked from a server that has only collected
  # them: forked from a process that has run TensorFlow ops, a test would wait forever
  # on TensorFlow's thread pools (threads do not survive a fork).
  echo "process_isolation = forkserver"
  # mutmut limits each mutant's CPU time to a multiple of the tests' measured time;
  # a fresh process's first TensorFlow op costs more (its thread pools start).
  echo "timeout_constant = ${MUTMUT_TIMEOUT_S:-30}"
  # Every other top-level file and folder (the datasets, pytest.ini, ...) goes with the tests.
  echo "also_copy ="
  (cd "$work" && ls -A | grep -v -x -e "$package" -e mutants -e setup.cfg | sed 's/^/    /')
  echo "pytest_add_cli_args_test_selection ="
  printf '    %s\n' "$@"
} >"$work/setup.cfg"

cd "$work"
export TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=2
mutmut() {
  "$PROJECT_PYTHON" -c \
    'import sys; sys.path.append(sys.argv.pop(1)); sys.argv[0] = "mutmut"
from mutmut.__main__ import cli; cli()' "$tool_site" "$@"
}
# MUTANTS="name ...": only these (the survivors of an earlier run, once tests are added).
# shellcheck disable=SC2086
mutmut run --max-children "${MUTMUT_CHILDREN:-1}" ${MUTANTS:-} || true
mutmut results --all true >results.txt || true
echo
echo "Surviving mutants (mutmut show NAME, in $work):"
grep -E ': (survived|no tests)$' results.txt || echo "  none"
echo "Counts:"
sed -E 's/.*: //' results.txt | sort | uniq -c
