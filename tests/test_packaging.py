"""What users install: version ranges tested at both ends, and a wheel that holds the library.

CI installs the wheel at the versions of constraints/lowest.txt and constraints/lock.txt
(scripts/check_install.sh); these checks keep those files honest against setup.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.conftest import SMOKE_MODULES
from tests.helpers import REPO

RANGED = ("tensorflow", "tensorflow-datasets")


def _metadata_requirements(metadata: str) -> list[Requirement]:
    return [
        Requirement(line.split(":", 1)[1].strip())
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    ]


def _pins(path) -> dict[str, str]:
    """{name: version} of the `name==version` lines of a constraints file."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==")
            pins[_canonical(name)] = version.strip()
    return pins


def _canonical(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def _not_sources(folder: str, names: list[str]) -> set[str]:
    ignored = {n for n in names if n in (".git", "__pycache__") or n.startswith(".venv")}
    if folder == str(REPO):  # setuptools' build/ and dist/ are at the root only.
        ignored |= {n for n in names if n in ("build", "dist") or n.endswith(".egg-info")}
    return ignored


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    # From a copy of the tree: setuptools keeps build/ between builds, and a module
    # deleted since the last build would still be in a wheel built in place.
    source = tmp_path_factory.mktemp("source") / "tree"
    shutil.copytree(REPO, source, ignore=_not_sources)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (path,) = out.glob("*.whl")
    return zipfile.ZipFile(path)


@pytest.fixture(scope="module")
def requirements(wheel) -> list[Requirement]:
    (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return [r for r in _metadata_requirements(wheel.read(metadata).decode()) if not r.marker]


def test_tensorflow_and_tfds_are_ranges_with_lower_bounds(requirements):
    by_name = {_canonical(r.name): r for r in requirements}
    for name in RANGED:
        spec = by_name[name].specifier
        assert not any(s.operator == "==" for s in spec), f"{name} is pinned: {spec}"
        assert any(s.operator == ">=" for s in spec), f"{name} has no lower bound: {spec}"
        assert any(s.operator == "<" for s in spec), f"{name} has no upper bound: {spec}"


def test_the_lowest_constraints_are_the_lower_bounds(requirements):
    """constraints/lowest.txt pins every core dependency at exactly its lower bound."""
    pins = _pins(REPO / "constraints" / "lowest.txt")
    for requirement in requirements:
        lower = [s.version for s in requirement.specifier if s.operator == ">="]
        assert lower, f"{requirement} has no lower bound"
        pinned = pins.get(_canonical(requirement.name))
        assert pinned is not None, f"constraints/lowest.txt does not pin {requirement.name}"
        assert Version(pinned) == Version(lower[0]), (
            f"{requirement.name}: lowest.txt has {pinned}, setup.py's lower bound is {lower[0]}"
        )


def test_the_lock_is_inside_the_ranges(requirements):
    pins = _pins(REPO / "constraints" / "lock.txt")
    for requirement in requirements:
        version = pins.get(_canonical(requirement.name))
        assert version is not None, f"constraints/lock.txt does not pin {requirement.name}"
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{requirement.name}=={version} in the lock is outside {requirement.specifier}"
        )


def test_the_wheel_holds_the_library_and_its_data_not_the_benchmark(wheel):
    names = set(wheel.namelist())
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"fast_tfds", "cats_vs_dogs_fast", "stanford_dogs_tfrecord"}, tops
    assert not [n for n in names if n.startswith(("benchmarks/", "fast_tfds/bench/"))]
    for data in (
        "fast_tfds/checksums/cats_vs_dogs_fast.tsv",
        "fast_tfds/checksums/stanford_dogs_tfrecord.tsv",
        "stanford_dogs_tfrecord/label_names.txt",
        "stanford_dogs_tfrecord/folder_names.txt",
        "cats_vs_dogs_fast/dummy_data/kagglecatsanddogs_5340.zip",
        "stanford_dogs_tfrecord/dummy_data/images.tar",
        "cats_vs_dogs_fast/CITATIONS.bib",
    ):
        assert data in names, f"{data} is missing from the wheel"
    modules = {n for n in names if n.endswith(".py")}
    in_tree = {
        p.relative_to(REPO).as_posix()
        for package in ("fast_tfds", "cats_vs_dogs_fast", "stanford_dogs_tfrecord")
        for p in (REPO / package).rglob("*.py")
    }
    in_tree |= {f"fast_tfds/checksums/{p.name}" for p in (REPO / "checksums").glob("*.py")}
    assert in_tree - modules == set(), "modules of the tree missing from the wheel"


def test_the_smoke_subset_names_real_files():
    """A renamed test file would silently drop out of the lowest-versions run."""
    missing = [m for m in SMOKE_MODULES if not (REPO / m).is_file()]
    assert not missing, f"tests/conftest.py SMOKE_MODULES names missing files: {missing}"
