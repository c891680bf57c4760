"""`python -m benchmarks recipes` on the tiny sample: every row that runs counts every
image of the split in every epoch, each ratio names a row that ran, and a row that
cannot run (DALI where it is not installed) says why. No timing assertions."""

import json
import shutil

import pytest

from benchmarks import main as bench
from benchmarks import recipes
from tests.helpers import shared_folder


@pytest.fixture(scope="module")
def recipes_run(cats_every_config_both_formats_dir, tmp_path_factory):
    """One run of the benchmark for the whole test run: xdist hands this module's tests to
    both workers, and each would otherwise run it (`shared_folder`)."""

    def run(tmp):
        data_dir = tmp / "data"
        shutil.copytree(cats_every_config_both_formats_dir, data_dir)  # with the loader's files
        out = tmp / "recipes.json"
        bench.main(["recipes", "--data-dir", str(data_dir), "--rounds", "1", "--out", str(out)])

    return json.loads(
        (shared_folder(tmp_path_factory, "recipes_run", run) / "recipes.json").read_text()
    )


def test_every_row_that_ran_counts_every_image(recipes_run, cats_builder):
    expected = cats_builder.info.splits["train"].num_examples
    assert recipes_run["images_per_epoch"] == expected
    assert recipes_run["errors"] == [] and recipes_run["counts_consistent"] is True
    for name, epochs in recipes_run["epochs"].items():
        assert [e["images"] for e in epochs] == [expected], name
        assert recipes_run["warmup"][name]["images"] == expected, name
    references = {
        recipes.TF_RRC,
        recipes.TF_RRC_RECORDS,
        "TF center crop (eval)",
        "course notes per-example aug (224)",
        "Keras layers on cached batches (224)",
    }
    assert references <= set(recipes_run["epochs"])
    assert recipes_run["tf_data_autotune"] is True  # TensorFlow's rows at their defaults


def test_no_autotune_is_an_option():
    assert recipes.parse_args(["--no-autotune"], "recipes").no_autotune is True
    assert recipes.parse_args([], "recipes").no_autotune is False


def test_each_ratio_names_a_row_of_the_run(recipes_run):
    for name, summary in recipes_run["summary"].items():
        if "vs" in summary:
            assert summary["vs"] in recipes_run["epochs"], name
            assert summary["ratio"]["min"] <= summary["ratio"]["median"] <= summary["ratio"]["max"]
    assert recipes_run["summary"]["Keras layers on cached batches (224)"]["vs"] == (
        "course notes per-example aug (224)"
    )
    # Ours that read records are also taken against TF official's RRC of tfds.load's records.
    for name in ("ours RRC+flip, no cache", "ours RRC+flip, cache fill"):
        ratios = recipes_run["summary"][name]["ratios"]
        assert list(ratios) == [recipes.TF_RRC, recipes.TF_RRC_RECORDS], name


def test_a_row_that_cannot_run_says_why(recipes_run):
    ran = set(recipes_run["epochs"])
    assert ("DALI CPU RRC+flip" in ran) != ("DALI CPU RRC+flip" in recipes_run["unavailable"])
    for name, why in recipes_run["unavailable"].items():
        assert name not in ran and why, name


def test_the_strong_recipes_run_ours_cached_uncached_and_the_loader(recipes_run):
    ran = set(recipes_run["epochs"])
    for recipe in recipes.STRONG:
        for kind in ("cached", "cache fill", "no cache"):
            assert f"ours {recipe}, {kind}" in ran, recipe
            assert f"loader {recipe}, {kind}" in ran, recipe
        summary = recipes_run["summary"]
        assert summary[f"loader {recipe}, cached"]["vs"] == f"ours {recipe}, cached"
    assert recipes.KERAS_RA in ran  # TensorFlow and Keras are ours too: it always runs
    ratios = recipes_run["summary"][f"ours {recipes.TA_ERASE}, cached"]["ratios"]
    assert list(ratios)[:2] == ["ours RRC+flip, cached", recipes.KERAS_RA]
    # mix= reads shuffled: its reference is the same recipe read shuffled, unmixed.
    mixed = recipes_run["summary"][f"ours {recipes.MIXED}, cached"]
    assert mixed["vs"] == f"ours {recipes.TA_ERASE_SHUFFLED}, cached"


def test_each_peer_runs_or_says_why_and_every_target_has_a_line(recipes_run):
    ran, unavailable = set(recipes_run["epochs"]), recipes_run["unavailable"]
    for peer in (*recipes.PEERS, recipes.DALI_RRC):
        assert (peer in ran) != (peer in unavailable), peer
        if peer in unavailable:
            assert "\n" not in unavailable[peer] and "--" in unavailable[peer], peer
    # A peer that did not run is left out of the ratios of the rows that name it.
    for name, summary in recipes_run["summary"].items():
        assert set(summary.get("ratios", {})) <= ran, name
        assert set(recipes_run["per_core"].get(name, {})) <= ran, name
    assert len(recipes_run["strong_targets"]) == len(recipes.STRONG_TARGETS)
