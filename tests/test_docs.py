"""Every python and bash block of the README, CONTRIBUTING.md and docs/*.md runs, so the
documentation cannot drift from the code.

The blocks run as a user runs them after the README's first steps: in a fresh home folder
whose `~/archives` holds a small look-alike sample of the source archives, built with the
real `tfds build` into `~/tensorflow_datasets` (TFDS's default data dir), with ArrayRecord
files next to the TFRecords for the loader. Python blocks run in a child interpreter from an
empty folder; bash blocks run with `bash -e` from the repository root, as in a clone.

A block that cannot run here (a download, a cluster, the test suite itself) is marked right
above it with `<!-- snippet: skip REASON -->`. A block that imports a framework this
environment lacks (torch, jax) is skipped with that reason at run time.

The README's first steps (`SETUP`: make the sample archives, build both datasets, add the
ArrayRecord files) are the blocks that make that home folder: they run once per test run, in
the home they make, rather than a second time in each worker's copy of it.

Each python block runs alone in a process of its own, with its own namespace and folder. Most
are forks of a server that has imported TensorFlow and TFDS (`tests.forks`), so that the
import is paid once per xdist worker rather than once per block; the blocks that need an
interpreter of their own, or touch the environment or the interpreter's state (`FRESH`), run
in a fresh interpreter, as a user's script does.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forks
from tests.helpers import REPO, TFDS_CLI, child_env, run_ok, shared_folder

PAGES = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", *(REPO / "docs").glob("*.md")])
RUN_LANGUAGES = ("python", "bash")
FENCE = re.compile(r"^```(\S*)\s*$")
SKIP = re.compile(r"^<!--\s*snippet:\s*skip\b(.*?)-->\s*$")
LINK = re.compile(r"\]\(([^)\s]+)\)")
TIMEOUT_S = 300
# What makes a python block need an interpreter of its own rather than a fork: what makes any
# child need one (`forks.OWN_INTERPRETER`), and, as a user's script is shown, any reading or
# setting of the environment or the interpreter's state, or threads of its own.
FRESH = re.compile(rf"{forks.OWN_INTERPRETER.pattern}|\bos\.environ|\bsys\.|\bthreading\b")


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    skip: str | None  # the reason given by a skip marker right above the block

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO).as_posix()}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with the skip marker above each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        assert end is not None, f"{page.name}:{i + 1}: a code block that is never closed"
        above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = SKIP.match(above.strip())
        code = "\n".join(lines[i + 1 : end]) + "\n"
        blocks.append(Block(page, i + 1, opening.group(1), code, marker and marker.group(1)))
        i = end + 1
    return blocks


BLOCKS = [b for page in PAGES for b in blocks_of(page) if b.language in RUN_LANGUAGES]


def _is_setup(block: Block) -> bool:
    """One of the README's first steps, which make the home folder the other blocks run in:
    the block that makes the sample archives and builds, and the one that adds ArrayRecord
    files."""
    return block.page.name == "README.md" and any(
        command in block.code for command in ("fast-tfds sample ~/archives", "tfds convert_format")
    )


SETUP = [b for b in BLOCKS if _is_setup(b)]


def test_every_skip_marker_gives_a_reason_and_sits_on_a_runnable_block():
    runnable_lines = {(b.page, b.line) for b in BLOCKS}
    problems = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            marker = SKIP.match(line.strip())
            if not marker:
                continue
            where = f"{page.relative_to(REPO)}:{number}"
            if not marker.group(1).strip():
                problems.append(f"{where}: a skip marker without a reason")
            following = next((n for n in range(number, len(lines)) if lines[n].strip()), None)
            if following is None or (page, following + 1) not in runnable_lines:
                problems.append(f"{where}: a skip marker not right above a python or bash block")
    assert not problems, "\n".join(problems)


def test_every_relative_link_points_to_a_file_and_heading_that_exist():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and anchor not in _anchors(file):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_fits_on_a_few_screens():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def test_the_readme_setup_blocks_are_found():
    # The blocks `docs_home` runs: the sample and builds, then the ArrayRecord files.
    assert [b.language for b in SETUP] == ["bash", "bash"], [b.id for b in SETUP]
    assert "fast-tfds sample ~/archives" in SETUP[0].code, SETUP[0].id
    assert "tfds convert_format" in SETUP[1].code, SETUP[1].id


@pytest.fixture(scope="session")
def docs_home(tmp_path_factory) -> Path:
    """A home folder as the README leaves it: the README's first steps (`SETUP`) run in it,
    so sample archives, both datasets built, ArrayRecord files next to their 224 builds'
    TFRecords. Made once per run; each xdist worker's snippets get a copy of their own, as
    they write into it (caches, downloads)."""

    def build(made: Path) -> None:
        env = _env(made)
        for block in SETUP:
            _run(block, env, made)
        # Stanford Dogs' ArrayRecord files too (the README converts only Cats vs Dogs'):
        # the loader's snippets read both. Not a README step, so a fork of the worker's
        # server (`tests.forks`, with the run's environment: the folder is named, so HOME
        # plays no part) rather than an interpreter that imports TensorFlow again.
        version_dir = made / "tensorflow_datasets" / "stanford_dogs_tfrecord" / "224" / "1.0.0"
        run_ok(
            [*TFDS_CLI, "convert_format", "--dataset_version_dir", str(version_dir)]
            + ["--out_file_format", "array_record", "--num_workers", "1"],
            cwd=made,
            fork=True,
        )

    home = tmp_path_factory.mktemp("home")
    shutil.copytree(shared_folder(tmp_path_factory, "docs_home", build), home, dirs_exist_ok=True)
    (home / "cache").mkdir()  # the folder the file-cache examples name
    return home


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in BLOCKS])
def test_snippet_runs(block: Block, docs_home: Path, tmp_path: Path):
    if block.skip is not None:
        pytest.skip(f"marked in the page: {block.skip.strip()}")
    if block in SETUP:
        return  # run, and checked by `_run`, in the home folder it made (`docs_home`)
    if block.language == "python":
        missing = _missing_modules(block.code)
        if missing:
            pytest.skip(f"needs {', '.join(missing)}, which is not installed here")
    _run(block, _env(docs_home), tmp_path)


def _run(block: Block, env: dict[str, str], folder: Path) -> None:
    """Runs `block` as a user would (python blocks from `folder`, bash blocks from the
    repository root), asserting that it succeeded without Keras' shuffle warning."""
    if block.language == "python":
        command, cwd = [sys.executable, "-c", block.code], folder
    else:
        command, cwd = ["bash", "-e", "-c", block.code], REPO
    run = (
        forks.run if block.language == "python" and not FRESH.search(block.code) else subprocess.run
    )
    done = run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, (
        f"{block.id} failed (exit {done.returncode}):\n{block.code}\n"
        f"--- output ---\n{(done.stdout + done.stderr)[-4000:]}"
    )
    # Keras's warning that its default shuffle=True is ignored for a tf.data dataset:
    # our datasets shuffle themselves, and a snippet shows fit(..., shuffle=False).
    assert "`shuffle=True` was passed" not in done.stderr, f"{block.id}: {done.stderr[-2000:]}"


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _env(home: Path) -> dict[str, str]:
    """This environment with `home` as HOME and the interpreter's scripts first on PATH."""
    env = child_env(HOME=str(home))
    env.pop("TFDS_DATA_DIR", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _missing_modules(code: str) -> list[str]:
    """Top-level packages the block imports that cannot be found in this environment."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return sorted(n for n in names if importlib.util.find_spec(n) is None)
