"""`fast-tfds cache list|clean` and the memory cache's rows on disk (`disk_rows` files):
those of a killed run are listed as such and removed, those of a live process are kept.

Real processes: one allocates rows and is SIGKILLed, another holds its rows until told.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from fast_tfds.cache import disk_rows, housekeeping
from tests.children import Child
from tests.helpers import child_env, fast_tfds_cache, listed_line

# Allocates rows in a file in argv[1], writes some, prints the file's path; then
# kills itself ("kill") or holds the rows until a line comes on stdin ("hold").
_OWNER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    import numpy as np
    from fast_tfds.cache import disk_rows, housekeeping
    folder, then = Path(sys.argv[1]), sys.argv[2]
    rows = disk_rows.allocate(folder, (64, 32, 32, 3), np.uint8)
    rows[:8] = 1
    mine = f"arena-{os.getpid()}-"
    found = housekeeping.find(folder, disk_rows.ROWS)
    (arena,) = [a for a in found if Path(a.where).name.startswith(mine)]
    print(arena.where, flush=True)
    if then == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.readline()
    """
)


def leftover(folder: Path) -> Path:
    """The rows file of a process killed while it held it."""
    done = subprocess.run(
        [sys.executable, "-c", _OWNER, os.fspath(folder), "kill"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    path = Path(done.stdout.strip())
    assert path.exists() and housekeeping.holder(path, recorded=False) is None
    return path


def start_holder(folder: Path) -> tuple[Child, Path]:
    """A live process holding its rows file; stopped by a line on its stdin."""
    child = Child(
        [sys.executable, "-c", _OWNER, os.fspath(folder), "hold"],
        stdin=subprocess.PIPE,
        env=child_env(),
    )
    line = child.line().strip()
    assert line, child.stderr_text()[-3000:]
    return child, Path(line)


def test_clean_removes_a_killed_runs_rows_and_keeps_a_live_ones(tmp_path):
    folder = tmp_path / "caches"
    # Where the reader would put rows by default: never looked at when DIR is given.
    elsewhere = {disk_rows.CACHE_DIR_ENV: os.fspath(tmp_path / "default")}
    killed = leftover(folder)
    other = leftover(tmp_path / "default")
    holder, live = start_holder(folder)
    try:
        listed = fast_tfds_cache("list", folder, cwd=tmp_path, **elsewhere)
        assert listed_line(listed, killed).startswith("left by a stopped run ")
        assert listed_line(listed, live).startswith("in use by a running process ")
        assert " MiB " in listed_line(listed, killed) and " ago " in listed_line(listed, killed)
        assert f"2 memory-cache file(s), 0.4 MiB in {folder}" in listed  # 2 x 192 KiB
        assert os.fspath(other) not in listed

        dry = fast_tfds_cache("clean", folder, "--dry-run", cwd=tmp_path, **elsewhere)
        assert f"would remove {killed} (left by a stopped run, " in dry, dry
        assert killed.exists() and live.exists()

        cleaned = fast_tfds_cache("clean", folder, cwd=tmp_path, **elsewhere)
        assert f"removed  {killed} (left by a stopped run, " in cleaned, cleaned
        assert f"kept     {live} (in use by a running process)" in cleaned
        assert f"Removed 1 memory-cache file(s) in {folder}, " in cleaned and "kept 1." in cleaned
        assert live.exists() and not killed.exists() and other.exists()
        cleaned = fast_tfds_cache("clean", folder, "--all", cwd=tmp_path, **elsewhere)
        assert "Removed 0 memory-cache file(s) in " in cleaned and live.exists(), cleaned
        listed = fast_tfds_cache("list", folder, cwd=tmp_path, **elsewhere)
        assert listed_line(listed, live).startswith("in use by a running process ")
        assert os.fspath(killed) not in listed
    finally:
        holder.kill()
        holder.communicate(timeout=60)
    # Its owner killed too, the last file is a leftover like the first.
    cleaned = fast_tfds_cache("clean", folder, cwd=tmp_path, **elsewhere)
    assert "Removed 1 memory-cache file(s)" in cleaned and not live.exists(), cleaned


def test_without_dir_the_default_folder_is_listed_and_cleaned(tmp_path):
    work, default = tmp_path / "work", tmp_path / "default"
    work.mkdir()
    env = {disk_rows.CACHE_DIR_ENV: os.fspath(default)}
    listed = fast_tfds_cache("list", cwd=work, **env)
    assert f"0 memory-cache file(s), 0.0 MiB in {default}" in listed  # says where it looks
    in_default, in_work = leftover(default), leftover(work)
    listed = fast_tfds_cache("list", cwd=work, **env)
    assert listed_line(listed, in_default).startswith("left by a stopped run ")
    assert listed_line(listed, Path(".") / in_work.name).startswith("left by a stopped run ")
    cleaned = fast_tfds_cache("clean", cwd=work, **env)
    assert f"removed  {in_default} (left by a stopped run, " in cleaned, cleaned
    assert not in_default.exists() and not in_work.exists()
    assert f"0 memory-cache file(s), 0.0 MiB in {default}" in fast_tfds_cache(
        "list", cwd=work, **env
    )
