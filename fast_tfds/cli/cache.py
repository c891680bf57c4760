"""`fast-tfds cache list|clean [DIR]`: the reader's caches on disk, and removing them.

DIR is the folder of the `cache=` path (`cache="/data/cache"` or
`cache="/data/cache/run1"` -> /data/cache); the current folder by default. The
memory cache (`cache=True`) of a split larger than the memory budget keeps its
rows in a file on disk (`arena-*.rows`, in $FAST_TFDS_CACHE_DIR, else
$XDG_CACHE_HOME/fast_tfds, else ~/.cache/fast_tfds, or the reader's `cache_dir`);
those files are listed and cleaned too: the ones in DIR, and without DIR also
those in that default folder. So are the persistent caches (`persist=True`,
`<dataset>.<split>.<digest>.arena`), which later runs serve from.

    fast-tfds cache list [DIR]
        one line per cache: state, size, last use, dataset, split, file prefix;
        one per memory-cache file: in use by a running process, or left by a stopped run;
        one per persistent cache: state, size on disk, last use, dataset, split, path
    fast-tfds cache clean [DIR] [--older-than AGE] [--all] [--dry-run]
        removes the caches that can never be read again: unfinished ones left by
        a stopped run, those of a dataset that was rebuilt or deleted since, damaged
        persistent caches, and memory-cache files left by a stopped run; with
        --older-than 30d (or 12h, 45m) also the file and persistent caches not used
        for that long; with --all every file and persistent cache.

A cache that a running process has open is never removed (its OS lock says
so), whatever the options.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fast_tfds.cache import disk_rows, housekeeping, persistent_format
from fast_tfds.cache.housekeeping import age_text, size_text
from fast_tfds.cli.parsers import documented_command


def looked_at(folder: str | None) -> list[tuple[housekeeping.Kind, str | Path, bool]]:
    """(kind, folder, always) of each place `list` and `clean` look, in their order: the
    file caches of DIR, then the memory-cache files and persistent caches of DIR, and
    without DIR (the current folder) also of the default folder, where the reader puts
    them unless told. `always`: its count is said even when there are none (the file
    caches of DIR, the first line of every `clean`)."""
    here = Path(folder or ".")
    folders = [here]
    if folder is None:
        default = disk_rows.default_folder()
        if not (default.is_dir() and default.resolve() == here.resolve()):
            folders.append(default)
    looked = [(housekeeping.FILE_CACHES, folder or ".", True)]
    for where in folders:
        looked += [(disk_rows.ROWS, where, False), (persistent_format.PERSISTENT, where, False)]
    return looked


def list_command(args) -> int:
    here = Path(args.folder or ".")
    found = [
        (kind, where, always, housekeeping.find(where, kind))
        for kind, where, always in looked_at(args.folder)
    ]
    for *_, entries in found:
        for e in entries:
            line = f"{e.state:<50} {size_text(e.size):>12} {age_text(e.age_s):>11}"
            print(f"{line}  {e.what}  {e.where}")
    for kind, where, always, entries in found:
        # A default folder is always reported, so that the listing says where it is.
        if entries or always or Path(where) != here:
            total = size_text(sum(e.size for e in entries))
            print(f"{len(entries)} {kind.noun}(s), {total} in {where}")
    return 0


def clean_command(args) -> int:
    """Removes, of every kind in every folder looked at, the caches `why_remove` names;
    never one that a running process holds."""
    older_than_s = housekeeping.parse_age(args.older_than) if args.older_than else None
    verb = "would remove" if args.dry_run else "removed"
    for kind, where, always in looked_at(args.folder):
        entries = housekeeping.find(where, kind)
        if not entries and not always:
            continue
        removed = freed = kept = 0
        for e in entries:
            reason = housekeeping.why_remove(e, older_than_s=older_than_s, everything=args.all)
            why_kept = f"in use by {e.holder}" if e.in_use else None
            if reason is not None and not args.dry_run:
                why_kept = e.remove()  # A process may have taken it since it was found.
            if reason is None or why_kept is not None:
                kept += 1
                if why_kept is not None:
                    print(f"kept     {e.where} ({why_kept})")
                continue
            removed += 1
            freed += e.size
            print(f"{verb:<8} {e.where} ({reason}, {size_text(e.size)})")
        place = "" if always else f" in {where}"
        print(
            f"{verb.capitalize()} {removed} {kind.noun}(s){place}, {size_text(freed)}; "
            f"kept {kept}.",
        )
    return 0


def add_command(commands) -> None:
    """Adds `cache list|clean` to the fast-tfds command-line parser."""
    p = documented_command(commands, "cache", __doc__, "list or clean the reader's caches on disk")
    actions = p.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="the caches in DIR")
    listing.add_argument("folder", nargs="?", metavar="DIR")
    listing.set_defaults(run=lambda args: sys.exit(list_command(_checked(args))))
    clean = actions.add_parser("clean", help="remove unfinished, stale or old caches in DIR")
    clean.add_argument("folder", nargs="?", metavar="DIR")
    clean.add_argument("--older-than", metavar="AGE", help="also those unused for AGE (30d, 12h)")
    clean.add_argument("--all", action="store_true", help="every cache not in use")
    clean.add_argument("--dry-run", action="store_true", help="say what would be removed")
    clean.set_defaults(run=lambda args: sys.exit(clean_command(_checked(args))))


def _checked(args):
    if args.folder is not None and not os.path.isdir(args.folder):
        sys.exit(f"fast-tfds cache: {args.folder}: no such folder")
    if args.action == "clean" and args.older_than:
        try:
            housekeeping.parse_age(args.older_than)
        except ValueError as err:
            sys.exit(f"fast-tfds cache clean --older-than {err}")
    return args
