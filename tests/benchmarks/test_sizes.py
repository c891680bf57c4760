"""`python -m benchmarks sizes` on the tiny sample: every row runs and counts every
image of the split in every epoch, warm-up included; the disk cache rows find their
cache on disk. No timing assertions: speed is what the benchmark prints."""

import contextlib
import io
import json
import shutil

import pytest

from benchmarks import main as bench
from benchmarks import sizes
from tests.helpers import shared_folder


@pytest.fixture(scope="module")
def sizes_run_and_table(cats_every_config_both_formats_dir, tmp_path_factory):
    """(result, printed output) of one round of every row (after its warm-up epoch): what
    every row proves runs in one; `summarize` over several rounds is checked on its own."""

    def run(tmp):  # once for the whole test run, whichever workers the tests go to
        data_dir = tmp / "data"
        shutil.copytree(cats_every_config_both_formats_dir, data_dir)  # with the loader's files
        argv = ["sizes", "--data-dir", str(data_dir), "--rounds", "1"]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            bench.main([*argv, "--out", str(tmp / "sizes.json"), "--cache-dir", str(tmp)])
        (tmp / "printed.txt").write_text(printed.getvalue())

    tmp = shared_folder(tmp_path_factory, "sizes_run", run)
    return json.loads((tmp / "sizes.json").read_text()), (tmp / "printed.txt").read_text()


@pytest.fixture(scope="module")
def sizes_run(sizes_run_and_table):
    return sizes_run_and_table[0]


def test_every_row_counts_every_image_of_every_epoch(sizes_run, cats_builder):
    result = sizes_run
    expected = cats_builder.info.splits["train"].num_examples
    rows = result["epochs"]
    per_size = ("TF decode+plain resize", "TF decode+antialiased", "ours, no cache")
    per_size += ("tfds.load + TF decode+plain resize", "ours, cache fill", "ours, cache served")
    per_size += ("loader",)
    names = {f"original->{s} {row}" for s in sizes.SIZES for row in per_size}
    names |= {"224 TF decode", "224 ours, no cache", "224 ours, cache fill"}
    names |= {"224 ours, cache served", "original->224 ours, disk cache fill"}
    names |= {"original->224 ours, disk cache served"}
    assert set(rows) == set(result["warmup"]) == names
    for name, epochs in rows.items():
        assert [e["images"] for e in epochs] == [expected] * result["rounds"], name
        assert all(e["seconds"] > 0 and e["cpu_seconds"] >= 0 for e in epochs), name
        assert result["warmup"][name]["images"] == expected, name
    assert result["images_per_epoch"] == expected
    assert result["counts_consistent"] is True and result["errors"] == []


def test_the_disk_rows_had_their_cache_on_disk(sizes_run):
    # Each fill (warm-up and every round) left a filled cache file in the cache folder.
    arena_bytes = sizes_run["images_per_epoch"] * 224 * 224 * 3
    fills = sizes_run["disk_cache_bytes_after_fill"]
    assert len(fills) == 1 + sizes_run["rounds"]
    assert all(sum(files) >= arena_bytes for files in fills), fills


def test_ratios_are_taken_against_the_reference_rows(sizes_run):
    summary = sizes_run["summary"]
    for size in sizes.SIZES:
        plain = f"original->{size} TF decode+plain resize"
        antialiased = f"original->{size} TF decode+antialiased"
        records = f"original->{size} tfds.load + TF decode+plain resize"
        for row, references in (
            ("ours, no cache", [plain, antialiased, records]),
            ("loader", [plain, antialiased]),
        ):
            assert summary[f"original->{size} {row}"]["vs"] == plain
            assert list(summary[f"original->{size} {row}"]["ratios"]) == references
        assert summary[f"original->{size} ours, cache fill"]["vs"] == (
            f"original->{size} ours, no cache"
        )
    assert summary["original->224 ours, disk cache served"]["vs"] == (
        "original->224 ours, cache served"
    )
    epochs = sizes_run["epochs"]
    for name, s in summary.items():
        assert s["min"] <= s["median"] <= s["max"], name
        for reference, ratio in s.get("ratios", {}).items():
            # The run's one round: its ratio is that round's.
            ((e, r),) = zip(epochs[name], epochs[reference], strict=True)
            per_round = (e["images"] / e["seconds"]) / (r["images"] / r["seconds"])
            assert ratio["median"] == pytest.approx(per_round), (name, reference)


def test_ratios_are_the_median_of_the_per_round_ratios():
    # summarize over rounds, on epochs whose rates are known: the ratio of each round is
    # taken first (not the ratio of the median rates), then their median, min and max.
    def epochs(*rates):
        return [{"images": 40, "seconds": 40 / rate, "cpu_seconds": 0.5} for rate in rates]

    rows = {"reference": sizes.Row(lambda: {}), "row": sizes.Row(lambda: {}, ("reference",))}
    timed = {"reference": epochs(100, 200, 400), "row": epochs(300, 200, 200)}
    summary = sizes.summarize(rows, timed)
    assert summary["row"]["vs"] == "reference" and "vs" not in summary["reference"]
    assert summary["row"]["median"] == pytest.approx(200) and summary["row"]["max"] == 300
    ratio = summary["row"]["ratios"]["reference"]
    assert ratio == pytest.approx({"median": 1.0, "min": 0.5, "max": 3.0})
    assert summary["row"]["ratio"] == ratio
    # Two rounds: the median of their ratios is their mean.
    two = sizes.summarize(rows, {name: e[:2] for name, e in timed.items()})
    assert two["row"]["ratio"]["median"] == pytest.approx((3.0 + 1.0) / 2)


def test_the_printed_table_names_each_ratios_reference(sizes_run_and_table):
    lines = [line for line in sizes_run_and_table[1].splitlines() if "x [" in line]
    records = [line for line in lines if line.endswith(" tfds.load + TF decode+plain resize")]
    plain = [line for line in lines if line.endswith(" TF decode+plain resize")]
    antialiased = [line for line in lines if line.endswith(" TF decode+antialiased")]
    # Ours without a cache and the loader, at each size, against each in-memory
    # reference; ours without a cache also against tfds.load's records.
    assert len(plain) - len(records) == len(antialiased) == 2 * len(sizes.SIZES)
    assert len(records) == len(sizes.SIZES)


def test_bad_rounds_fail_with_one_line(capsys):
    with pytest.raises(SystemExit):
        bench.main(["sizes", "--rounds", "0"])
    assert "--rounds=0: must be at least 1" in capsys.readouterr().err
