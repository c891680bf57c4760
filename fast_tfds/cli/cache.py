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

import argparse
import os
import sys
from pathlib import Path

from fast_tfds.cache import disk_rows, persistent_listing
from fast_tfds.cache.housekeeping import (
    ARENA_IN_USE,
    ARENA_LEFT,
    ARENA_WHAT,
    age_text,
    arena_folders,
    describe_persistent,
    describe_state,
    mtime_age_text,
    size_text,
    why_remove,
    why_remove_persistent,
)


def list_command(args, out=None) -> int:
    from fast_tfds.cache import tf_file_listing

    out = out or sys.stdout

    def row(state: str, size: int, age: str, what: str, where) -> None:
        print(f"{state:<50} {size_text(size):>12} {age:>11}  {what}  {where}", file=out)

    def count(found: list, noun: str, where) -> str:
        return f"{len(found)} {noun}(s), {size_text(sum(f.size for f in found))} in {where}"

    folder = args.folder or "."
    caches = tf_file_listing.find(folder)
    for cache in caches:
        dataset = f"{cache.dataset or '?'} {cache.split or '?'}"
        row(describe_state(cache), cache.size, age_text(cache.age_s), dataset, cache.prefix)
    arena_lines = []
    for arena_folder in arena_folders(args.folder):
        arenas = disk_rows.find(arena_folder)
        for arena in arenas:
            state = ARENA_IN_USE if arena.in_use else ARENA_LEFT
            row(state, arena.size, mtime_age_text(arena.path), ARENA_WHAT, arena.path)
        # A default folder is always reported, so that the listing says where it is.
        if arenas or arena_folder != Path(folder):
            arena_lines.append(count(arenas, "memory-cache file", arena_folder))
        kept = persistent_listing.find(arena_folder)
        for found in kept:
            dataset = f"{found.dataset or '?'} {found.split or '?'}"
            row(describe_persistent(found), found.size, age_text(found.age_s), dataset, found.path)
        if kept or arena_folder != Path(folder):
            arena_lines.append(count(kept, "persistent cache", arena_folder))
    print(count(caches, "cache", folder), file=out)
    for line in arena_lines:
        print(line, file=out)
    return 0


def clean_command(args, out=None) -> int:
    from fast_tfds.cache import tf_file_listing

    out = out or sys.stdout
    older_than_s = tf_file_listing.parse_age(args.older_than) if args.older_than else None
    removed = freed = kept = 0
    for cache in tf_file_listing.find(args.folder or "."):
        reason = why_remove(cache, older_than_s=older_than_s, everything=args.all)
        if reason is None:
            kept += 1
            if cache.holder:
                print(f"kept     {cache.prefix} (in use by {cache.holder})", file=out)
            continue
        if not args.dry_run and not tf_file_listing.remove(cache):
            kept += 1  # Opened by a process since it was listed.
            print(f"kept     {cache.prefix} (in use)", file=out)
            continue
        removed += 1
        freed += cache.size
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb:<8} {cache.prefix} ({reason}, {size_text(cache.size)})", file=out)
    verb = "Would remove" if args.dry_run else "Removed"
    print(f"{verb} {removed} cache(s), {size_text(freed)}; kept {kept}.", file=out)
    for folder in arena_folders(args.folder):
        clean_arenas(folder, dry_run=args.dry_run, out=out)
        clean_persistent(
            folder, older_than_s=older_than_s, everything=args.all, dry_run=args.dry_run, out=out
        )
    return 0


def clean_persistent(folder: Path, *, older_than_s, everything: bool, dry_run: bool, out) -> None:
    """Removes the persistent caches in `folder` that `why_remove_persistent` names,
    never one that a running process maps or fills."""
    found = persistent_listing.find(folder)
    if not found:
        return
    removed = freed = kept = 0
    for cache in found:
        reason = why_remove_persistent(cache, older_than_s=older_than_s, everything=everything)
        if reason is None:
            kept += 1
            if cache.in_use:
                print(f"kept     {cache.path} ({ARENA_IN_USE})", file=out)
            continue
        if not dry_run and not persistent_listing.remove(cache.path):
            kept += 1  # Opened by a process since it was listed.
            print(f"kept     {cache.path} ({ARENA_IN_USE})", file=out)
            continue
        removed += 1
        freed += cache.size
        verb = "would remove" if dry_run else "removed"
        print(f"{verb:<8} {cache.path} ({reason}, {size_text(cache.size)})", file=out)
    verb = "Would remove" if dry_run else "Removed"
    print(
        f"{verb} {removed} persistent cache(s) in {folder}, {size_text(freed)}; kept {kept}.",
        file=out,
    )


def clean_arenas(folder: Path, *, dry_run: bool, out) -> None:
    """Removes the memory-cache files in `folder` that no running process holds.

    Nothing can read such a file again: each belongs to one process's cache, and
    its owner is gone. --older-than and --all change nothing here.
    """
    arenas = disk_rows.find(folder)
    if not arenas:
        return
    removed = freed = kept = 0
    for arena in arenas:
        if arena.in_use:
            kept += 1
            print(f"kept     {arena.path} ({ARENA_IN_USE})", file=out)
            continue
        if not dry_run:
            arena.path.unlink(missing_ok=True)
        removed += 1
        freed += arena.size
        verb = "would remove" if dry_run else "removed"
        print(f"{verb:<8} {arena.path} ({ARENA_LEFT}, {size_text(arena.size)})", file=out)
    verb = "Would remove" if dry_run else "Removed"
    print(
        f"{verb} {removed} memory-cache file(s) in {folder}, {size_text(freed)}; kept {kept}.",
        file=out,
    )


def add_command(commands) -> None:
    """Adds `cache list|clean` to the fast-tfds command-line parser."""
    p = commands.add_parser(
        "cache",
        help="list or clean the reader's caches on disk",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    if getattr(args, "older_than", None):
        from fast_tfds.cache import tf_file_listing

        try:
            tf_file_listing.parse_age(args.older_than)
        except ValueError as err:
            sys.exit(f"fast-tfds cache clean --older-than {err}")
    return args
