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

Each python block runs alone in a process of its own, with its own namespace and folder. Most
are forked from a server that each xdist worker starts once, which has imported TensorFlow
and TFDS, so that the import is paid once rather than once per block; the blocks that touch
the environment, the interpreter, processes or another framework (`FRESH`) run in a fresh
interpreter, as a user's script does.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import os
import re
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, TFDS_CLI, child_env, run_ok, shared_folder

PAGES = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", *(REPO / "docs").glob("*.md")])
RUN_LANGUAGES = ("python", "bash")
FENCE = re.compile(r"^```(\S*)\s*$")
SKIP = re.compile(r"^<!--\s*snippet:\s*skip\b(.*?)-->\s*$")
LINK = re.compile(r"\]\(([^)\s]+)\)")
TIMEOUT_S = 300
# What makes a python block need an interpreter of its own rather than a fork of the server's:
# it reads or sets the environment or the interpreter's state, starts processes (a fork of a
# process that has run TensorFlow is not one a user has), or imports a framework that is not
# to meet TensorFlow in one process.
FRESH = re.compile(
    r"\bos\.environ|\bsys\.|\bsubprocess\b|\bmultiprocessing\b|\bnum_workers\b|"
    r"\bthreading\b|\batexit\b|\bsignal\b|\btorch|\bjax\b|\bflax\b"
)


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


@pytest.fixture(scope="session")
def docs_home(tmp_path_factory) -> Path:
    """A home folder as the README leaves it: sample archives, both datasets built. The
    builds are made once per run; each xdist worker's snippets get a copy of their own, as
    they write into it (caches, downloads)."""

    def build(made: Path) -> None:
        env = _env(made)
        archives = made / "archives"
        run_ok(
            [sys.executable, "-m", "fast_tfds.cli", "sample", str(archives)]
            + ["--images-per-class", "20", "--dogs-per-breed", "2", "--breeds", "4"],
            env=env,
        )
        for dataset in ("cats_vs_dogs_fast", "stanford_dogs_tfrecord"):
            run_ok(
                [*TFDS_CLI, "build", dataset, "--imports", dataset, "--manual_dir", str(archives)],
                env=env,
                cwd=made,
            )
            version_dir = made / "tensorflow_datasets" / dataset / "224" / "1.0.0"
            run_ok(
                [*TFDS_CLI, "convert_format", "--dataset_version_dir", str(version_dir)]
                + ["--out_file_format", "array_record"],
                env=env,
                cwd=made,
            )

    home = tmp_path_factory.mktemp("home")
    shutil.copytree(shared_folder(tmp_path_factory, "docs_home", build), home, dirs_exist_ok=True)
    (home / "cache").mkdir()  # the folder the file-cache examples name
    return home


# The server: imports what most blocks import, then for each request (a JSON line: code,
# folder, environment, output files) forks a child that runs the block as `python -c` would
# and answers the child's exit status, or "timeout". The child ends as an interpreter does
# (it waits for the block's threads, runs its atexit functions, exits 1 after printing an
# uncaught exception, and with SystemExit's code) but leaves out the teardown of every
# module: in a fork, that teardown writes to every page the server holds, for seconds. The
# blocks that run fresh, and tests/reliability/test_exit.py, see a whole interpreter's exit.
SERVER = """
import atexit, gc, json, os, sys, threading, time
import tensorflow, tensorflow_datasets
gc.freeze()  # what the imports made: not scanned (and so not copied) by a child's collector

def run(code):
    try:
        exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    return 0

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        status = run(request["code"])
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    deadline = time.monotonic() + request["timeout"]
    while not (ended := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
        time.sleep(0.02)
    if not ended[0]:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    print(json.dumps(os.waitstatus_to_exitcode(ended[1]) if ended[0] else "timeout"), flush=True)
os._exit(0)
"""


class SnippetServer:
    """One worker's server (see SERVER), started at its first block: `run` gives what
    `subprocess.run` would."""

    def __init__(self, env: dict[str, str], folder: Path):
        self.env, self.folder, self.count = env, folder, 0
        self.process: subprocess.Popen | None = None

    def run(self, code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
        if self.process is None:
            with open(self.folder / "server.err", "w") as log:
                self.process = subprocess.Popen(
                    [sys.executable, "-c", SERVER],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=self.env,
                    cwd=self.folder,
                    text=True,
                )
        self.count += 1
        out, err = self.folder / f"{self.count}.out", self.folder / f"{self.count}.err"
        request = {"code": code, "cwd": os.fspath(cwd), "env": env, "timeout": TIMEOUT_S}
        request |= {"stdout": os.fspath(out), "stderr": os.fspath(err)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        # The server answers within the block's timeout; its start (importing TensorFlow)
        # is given as long again.
        if not select.select([self.process.stdout], [], [], 2 * TIMEOUT_S)[0]:
            self.process.kill()
            raise subprocess.TimeoutExpired(["<snippet server>"], 2 * TIMEOUT_S)
        answer = self.process.stdout.readline()
        if not answer:
            log = (self.folder / "server.err").read_text(errors="replace")[-3000:]
            raise AssertionError(f"the snippet server ended (exit {self.process.wait()}):\n{log}")
        status = json.loads(answer)
        if status == "timeout":
            raise subprocess.TimeoutExpired(["<snippet>"], TIMEOUT_S)
        return subprocess.CompletedProcess(
            ["<snippet>"], status, out.read_text(errors="replace"), err.read_text(errors="replace")
        )

    def close(self) -> None:
        if self.process is not None:
            self.process.stdin.close()
            self.process.wait(timeout=60)


@pytest.fixture(scope="session")
def snippet_server(docs_home: Path, tmp_path_factory):
    server = SnippetServer(_env(docs_home), tmp_path_factory.mktemp("snippet_server"))
    yield server
    server.close()


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in BLOCKS])
def test_snippet_runs(block: Block, docs_home: Path, snippet_server, tmp_path: Path):
    if block.skip is not None:
        pytest.skip(f"marked in the page: {block.skip.strip()}")
    env = _env(docs_home)
    if block.language == "python":
        missing = _missing_modules(block.code)
        if missing:
            pytest.skip(f"needs {', '.join(missing)}, which is not installed here")
        command, cwd = [sys.executable, "-c", block.code], tmp_path
    else:
        command, cwd = ["bash", "-e", "-c", block.code], REPO
    if block.language == "python" and not FRESH.search(block.code):
        done = snippet_server.run(block.code, cwd, env)
    else:
        done = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
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
