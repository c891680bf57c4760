"""The layers import downward only, and no project module takes part in an import cycle.

    datasets (cats_vs_dogs_fast, stanford_dogs_tfrecord)
        ─> fast_tfds.building ─> fast_tfds.read ─> fast_tfds.cache, fast_tfds.core
        ─> fast_tfds.loader ──────────────────> fast_tfds.cache, fast_tfds.core
    tooling (fast_tfds.cli, fast_tfds.samples) ─> any of the above
    (samples imports only the datasets' plain data modules, e.g. Stanford's breed folders)
    (the benchmark, benchmarks/ at the repository root, is not installed and not a layer)

`core` (TensorFlow-free: builder lookup, options, output sizes, the JPEG block
decoder, crop hooks) and `cache` (the picture store and its state, the fallback's
arena of examples, where rows live, persistence under one key, the file cache and its
housekeeping) are what both back ends share, with `augment` (the serving step, which
cuts batches from the store: it imports `cache`, never the other way); `core` imports
nothing else of ours, `cache` nothing but itself and `core` (for `core.platform`, the fallbacks of
Linux-only calls). In `cache`, only the `tf_*` modules (the file cache, which is
TensorFlow's own format) may import TensorFlow, and the loader never imports them.
`quiet` (TensorFlow's quiet start-up) is a leaf the tooling uses.

`loader` (the Grain reader for JAX and PyTorch, its own extra) is a back end
beside `read`: it imports only `core` and `cache`, and the datasets import it only
at call time.

`read` never imports `building`: it reads any built TFDS image dataset, a shared
folder without our builders included. `building` uses `read` in one place, the
`FastImageBuilder.as_fast_dataset` convenience method (a call-time import): a
one-way edge, which the cycle check keeps one-way. `building` uses `cache` in one
place too: publishing a build (`building.publishing`) writes through the one seam to
an object store (`cache.remote.object_stores`).

`samples` writes look-alike source archives; it may import the dataset packages for
the facts a source archive must match (Stanford Dogs' breed folder names), never
the library.

Two checks, for two kinds of mistakes:
- static: every import statement of every project module, function-level
  ones included (those run later, but they still tie the modules together),
  against the rule below, and the module graph checked for cycles;
- dynamic: each lower layer imported in a process of its own that has imported only
  TensorFlow and TFDS (a fork: `loaded_by`), then `sys.modules` looked at: this also
  catches an import made some other way (importlib, a package `__init__` re-export)
  that the static check cannot see.

Third-party packages that only an extra (`pip install .[loader]`, `[demo]`,
`[test]`) installs are read from setup.py: a library module that imports one
would fail on a plain `pip install .`.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fast_tfds
from tests import forks
from tests.helpers import DATASETS, REPO, child_env, project_modules

# layer -> the layers its modules may import. A dataset package may also import
# its own modules (never the other dataset's).
MAY_IMPORT = {
    "core": {"core"},
    "cache": {"cache", "core"},
    "augment": {"augment", "core", "cache"},  # TensorFlow-free, shared by both back ends
    "quiet": {"quiet"},
    "read": {"read", "augment", "core", "cache"},
    "loader": {"loader", "augment", "core", "cache"},
    "building": {"building", "read", "augment", "core", "cache"},
    "datasets": {"building", "read", "loader", "augment", "core"},
    # fast_tfds/__init__: the public API re-exported
    "api": {"building", "read", "loader", "augment", "core", "cache"},
    # The demo and the benchmark both use samples; it needs the datasets' own data (the
    # breed folders of Stanford's images.tar) and nothing else of ours.
    "samples": {"samples", "datasets"},
    "cli": {"cli", "building", "read", "augment", "core", "cache", "quiet", "samples", "datasets"},
}
# The only modules of the TensorFlow-free shared layers that may import TensorFlow.
TENSORFLOW_IN_SHARED_LAYERS = ("fast_tfds.cache.tf_",)
# `loader` is not here: it needs its extra ([loader]), and without it fails at
# import with a message that names the extra (tests/loader checks that).
LIBRARY = ("api", "core", "cache", "augment", "read", "building", "datasets")
TOOLING_PACKAGES = ("fast_tfds.cli", "fast_tfds.samples", "fast_tfds.quiet")


# -- the project's modules and their imports ------------------------------------


MODULES = project_modules()


def imported_names(module: str, path: Path) -> set[str]:
    """Every module `module` imports anywhere in its code (function bodies included)."""
    is_package = path.name == "__init__.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x, from ..read import y
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            for alias in node.names:
                # `from fast_tfds.building import beam` imports the module fast_tfds.building.beam;
                # `from fast_tfds.building import FastImageBuilder` the package fast_tfds.building.
                submodule = f"{base}.{alias.name}"
                names.add(submodule if submodule in MODULES else base)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)  # importlib.import_module("literal")
    return names


def import_graph() -> dict[str, set[str]]:
    """{module: the project modules it imports}."""
    graph = {m: {n for n in imported_names(m, p) if n in MODULES} for m, p in MODULES.items()}
    # The public API is re-exported lazily, by names in a table, not import statements.
    graph["fast_tfds"] |= set(fast_tfds._EXPORTS.values())
    return graph


def layer(module: str) -> str:
    top, *rest = module.split(".")
    if top in DATASETS:
        return "datasets"
    return rest[0] if rest else "api"


def extras_only_imports() -> dict[str, str]:
    """{import name: distribution} of the packages only setup.py's extras install."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    constants = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    (setup_call,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup"
    ]
    keywords = {k.arg: k.value for k in setup_call.keywords}

    def requirements(node) -> set[str]:
        if isinstance(node, ast.Name):
            return requirements(constants[node.id])
        if isinstance(node, ast.Starred):
            return requirements(node.value)
        if isinstance(node, ast.Constant):
            name = re.match(r"[A-Za-z0-9_.-]+", node.value).group(0)
            return {re.sub(r"[-_.]+", "-", name).lower()}
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return set().union(*(requirements(e) for e in node.elts))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "sorted":
            return requirements(node.args[0])
        raise AssertionError(f"setup.py: cannot read {ast.dump(node)[:80]}")

    required = requirements(keywords["install_requires"])
    extras = set().union(*(requirements(v) for v in keywords["extras_require"].values))
    extras_only = extras - required
    assert {"scikit-image", "psutil", "matplotlib"} <= extras_only, extras_only
    by_import = importlib.metadata.packages_distributions()
    return {
        name: dist
        for name, dists in by_import.items()
        for dist in dists
        if re.sub(r"[-_.]+", "-", dist).lower() in extras_only
    }


EXTRAS_ONLY = extras_only_imports()


# -- static checks ---------------------------------------------------------------


def test_the_module_list_covers_every_layer():
    layers = {layer(m) for m in MODULES}
    assert layers == set(MAY_IMPORT), f"a layer without a rule, or a rule for no layer: {layers}"


def test_layers_import_only_downward():
    graph = import_graph()
    wrong = []
    for module, imports in sorted(graph.items()):
        for imported in sorted(imports):
            same_dataset = imported.split(".")[0] == module.split(".")[0] in DATASETS
            if layer(imported) not in MAY_IMPORT[layer(module)] and not same_dataset:
                wrong.append(f"{module} ({layer(module)}) imports {imported} ({layer(imported)})")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_shared_layers_import_no_tensorflow():
    # core and cache are what the TensorFlow-free loader uses; the loader uses none of
    # the file cache's tf_* modules.
    wrong = []
    for module, path in sorted(MODULES.items()):
        if layer(module) not in ("core", "cache", "augment", "loader"):
            continue
        names = imported_names(module, path)
        if not module.startswith(TENSORFLOW_IN_SHARED_LAYERS):
            wrong += [f"{module} imports {n}" for n in sorted(names) if n.startswith("tensorflow.")]
            wrong += [f"{module} imports tensorflow" for n in names if n == "tensorflow"]
        if layer(module) == "loader":
            wrong += [
                f"{module} imports {n}"
                for n in sorted(names)
                if n.startswith(TENSORFLOW_IN_SHARED_LAYERS)
            ]
    assert not wrong, "\n".join(wrong)


def test_the_library_imports_nothing_that_only_an_extra_installs():
    wrong = []
    for module, path in sorted(MODULES.items()):
        if layer(module) not in LIBRARY:
            continue
        for name in sorted(imported_names(module, path)):
            top = name.split(".")[0]
            if top in EXTRAS_ONLY:
                wrong.append(f"{module} imports {name} ({EXTRAS_ONLY[top]}: only in an extra)")
    assert not wrong, "\n".join(wrong)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_project_modules():
    # A package's __init__ re-exporting its own modules is not a cycle: Python
    # runs the __init__ first, and no edge is drawn from a module to its package.
    found = cycles(import_graph())
    assert not found, "import cycles (function-level imports included): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_the_cycle_check_finds_a_cycle():
    # The check above passes on an empty result: make sure it can fail.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles(import_graph() | {"fast_tfds.read.options": {"fast_tfds.building.builder"}})


# -- dynamic checks: a process per layer -----------------------------------------

_LOADED = """
import importlib, json, sys
# What every layer needs; TensorFlow itself loads some extras' packages (matplotlib,
# psutil) when they are installed, so those count only if the layer adds them.
import tensorflow, tensorflow_datasets
before = set(sys.modules)
importlib.import_module(sys.argv[1])
print(json.dumps({"loaded": sorted(sys.modules), "added": sorted(set(sys.modules) - before)}))
"""


def loaded_by(module: str) -> dict[str, list[str]]:
    """What importing `module` loads, after TensorFlow and TFDS. In a fork of a server that
    has imported those two and a few standard modules, nothing of ours (`tests.forks`): it
    loads what a new interpreter loads after the same two imports, and counts as added what
    that one would (the server's standard modules are none of a layer's, an extra's or
    Beam's), without importing TensorFlow again for each layer."""
    done = forks.run(
        [sys.executable, "-c", _LOADED, module],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "module, forbidden_packages",
    [
        ("fast_tfds.read", (*TOOLING_PACKAGES, "fast_tfds.building", *DATASETS)),
        ("fast_tfds.building", (*TOOLING_PACKAGES, *DATASETS)),
        ("cats_vs_dogs_fast", (*TOOLING_PACKAGES, "stanford_dogs_tfrecord")),
        ("stanford_dogs_tfrecord", (*TOOLING_PACKAGES, "cats_vs_dogs_fast")),
    ],
)
def test_importing_a_lower_layer_loads_no_higher_one(module, forbidden_packages):
    loaded = loaded_by(module)
    higher = [
        m
        for m in loaded["loaded"]
        if any(m == p or m.startswith(p + ".") for p in forbidden_packages)
    ]
    assert not higher, f"import {module} loads {higher}"
    # Apache Beam only for Beam builds; an extra's package never (compared with
    # what TensorFlow and TFDS load by themselves, e.g. matplotlib when installed).
    tops = {m.split(".")[0] for m in loaded["added"]}
    assert "apache_beam" not in tops, f"import {module} loads Apache Beam"
    extras = sorted(tops & set(EXTRAS_ONLY))
    assert not extras, f"import {module} loads {extras}, which only an extra installs"
    assert "skimage" not in {m.split(".")[0] for m in loaded["loaded"]}


def test_importing_the_package_loads_no_tensorflow():
    # The API is re-exported lazily: `import fast_tfds` (or fast_tfds.samples, or a
    # dataset, which the Stanford Dogs sample writer imports) costs no TensorFlow start-up.
    code = (
        "import sys, fast_tfds, fast_tfds.samples, fast_tfds.samples.stanford_dogs, "
        "cats_vs_dogs_fast, stanford_dogs_tfrecord; print('tensorflow' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "False"


# -- names -----------------------------------------------------------------------


def _words(name: str) -> tuple[str, ...]:
    """A module's name as the set of its words, each without a plural s."""
    return tuple(sorted(word.removesuffix("s") for word in name.strip("_").split("_")))


def confusable_names(modules) -> list[list[str]]:
    """Groups of project modules whose names differ only in word order or number
    (`file_cache` / `cache_files`, `builder` / `builders`)."""
    by_words: dict[tuple[str, ...], set[str]] = {}
    for module in modules:
        name = module.rsplit(".", 1)[-1]
        by_words.setdefault(_words(name), set()).add(name)
    return sorted(sorted(names) for names in by_words.values() if len(names) > 1)


def test_no_two_module_names_differ_only_in_word_order_or_number():
    assert confusable_names(MODULES) == []


def test_the_name_check_finds_confusable_names():
    found = confusable_names(["a.file_cache", "b.cache_files", "a.builder", "c.builders", "a.x"])
    assert found == [["builder", "builders"], ["cache_files", "file_cache"]]
