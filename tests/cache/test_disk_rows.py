"""Cache rows in a file: same rows as memory, gone with the cache, a killed fill never kept."""

from __future__ import annotations

import gc
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fast_tfds.cache import disk_rows, housekeeping


def test_rows_round_trip_and_the_file_goes_with_them(tmp_path):
    rows = disk_rows.allocate(tmp_path, (5, 4, 4, 3), np.uint8)
    rows[...] = np.arange(rows.size, dtype=np.uint64).reshape(rows.shape) % 251
    (arena,) = housekeeping.find(tmp_path, disk_rows.ROWS)
    assert arena.in_use and arena.size == rows.nbytes
    # A live cache is never removed.
    assert housekeeping.remove_leftovers(tmp_path, disk_rows.ROWS) == []
    view = rows[2:4]
    del rows
    gc.collect()
    assert housekeeping.find(tmp_path, disk_rows.ROWS) == [arena]  # A view still holds it.
    assert view[0, 0, 0, 0] == (2 * 48) % 251
    del view
    gc.collect()
    assert housekeeping.find(tmp_path, disk_rows.ROWS) == []


def test_a_killed_fill_leaves_a_file_that_is_never_trusted_and_is_removed(tmp_path):
    script = textwrap.dedent(
        f"""
        import os, signal, numpy as np
        from pathlib import Path
        from fast_tfds.cache import disk_rows, housekeeping
        rows = disk_rows.allocate(Path({str(tmp_path)!r}), (100, 8, 8, 3), np.uint8)
        rows[:10] = 1  # half a fill
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    (left,) = housekeeping.find(tmp_path, disk_rows.ROWS)
    assert not left.in_use
    assert housekeeping.remove_leftovers(tmp_path, disk_rows.ROWS) == [left.where]
    assert not os.path.exists(left.where)


def test_check_room_names_the_need_and_the_folder(tmp_path):
    disk_rows.check_room(tmp_path / "new", 1)
    assert (tmp_path / "new").is_dir()  # Made if missing.
    with pytest.raises(disk_rows.NotEnoughRoom) as excinfo:
        disk_rows.check_room(tmp_path, 1 << 62)
    message = str(excinfo.value)
    need = f"{(1 << 62) / (1 << 30):.2f} GiB"
    folder = re.escape(str(tmp_path))
    said = re.fullmatch(
        rf"the cache needs {need} and {folder} has ([0-9.]+) (GiB|MiB) free", message
    )
    assert said, message
    free = float(said[1]) * (1 << (30 if said[2] == "GiB" else 20))
    # What is free moves as other processes write to the same disk.
    assert abs(free - shutil.disk_usage(tmp_path).free) < 1 << 30, message


def test_the_default_folder_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(disk_rows.CACHE_DIR_ENV, str(tmp_path / "x"))
    assert disk_rows.default_folder() == tmp_path / "x"
    monkeypatch.delenv(disk_rows.CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert disk_rows.default_folder() == tmp_path / "xdg" / "fast_tfds"
