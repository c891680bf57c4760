"""The options every benchmark shares (`benchmarks.options`): each benchmark's parser takes
--images-per-class and --rounds under those names, and a count below 1 is the same one-line
error whichever benchmark it was given to, before any work starts."""

import pytest

from benchmarks import accelerator_pack, against_commit, bucket, loaders, persist, recipes, sizes
from benchmarks import main as bench

# Each benchmark's entry point, with what it needs besides the counts to reach its check.
ENTRY_POINTS = {
    "main": (bench.main, []),
    "sizes": (lambda argv: bench.main(["sizes", *argv]), []),
    "recipes": (lambda argv: bench.main(["recipes", *argv]), []),
    "bucket": (lambda argv: bench.main(["bucket", *argv]), []),
    "against": (lambda argv: bench.main(["against", *argv]), ["--baseline", "HEAD"]),
    "persist": (persist.main, []),
    "accelerator_pack": (accelerator_pack.main, []),
}
ROUNDS = ("main", "sizes", "recipes", "bucket", "against", "persist")


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_images_per_class_below_one_is_a_one_line_error(name, capsys):
    run, needed = ENTRY_POINTS[name]
    with pytest.raises(SystemExit) as exit_info:
        run([*needed, "--images-per-class", "0"])
    assert exit_info.value.code == 2, name  # argparse's usage error, not a run that failed
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--images-per-class=0: must be at least 1"), err


@pytest.mark.parametrize("name", [*ROUNDS, "loaders"])
def test_rounds_below_one_is_a_one_line_error(name, capsys, tmp_path):
    run, needed = ENTRY_POINTS.get(name, (loaders.main, ["--data-dir", str(tmp_path)]))
    with pytest.raises(SystemExit) as exit_info:
        run([*needed, "--rounds", "0"])
    assert exit_info.value.code == 2, name
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--rounds=0: must be at least 1"), err


def test_each_benchmark_keeps_its_own_defaults():
    assert sizes.parse_args([], "sizes").images_per_class == sizes.DEFAULT_IMAGES_PER_CLASS
    assert sizes.parse_args([], "sizes").rounds == sizes.DEFAULT_ROUNDS
    assert recipes.parse_args([], "recipes").rounds == recipes.DEFAULT_ROUNDS
    assert recipes.parse_args(["--quick"], "recipes").images_per_class == 150
    pack = accelerator_pack.parse_args([], "pack")
    assert pack.images_per_class == accelerator_pack.DEFAULT_IMAGES_PER_CLASS


def test_bucket_latencies_below_zero_are_a_one_line_error(capsys):
    with pytest.raises(SystemExit):
        bucket.main(["--latencies", "0,-5"])
    assert "--latencies=0,-5: must be at least 0" in capsys.readouterr().err


def test_against_served_epochs_below_one_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit):
        against_commit.main(["--baseline", "HEAD", "--served-epochs", "0"])
    assert "--served-epochs=0: must be at least 1" in capsys.readouterr().err
