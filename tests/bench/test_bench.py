"""`fast-tfds bench` end to end on the tiny built sample: what it writes, not how fast.

No timing assertions: speed is what the benchmark prints. The checks here are
that every pipeline ran and counted every image of the split in every epoch
(a real correctness check of all the pipelines), that the figures and targets
in the JSON are consistent with each other, and that the chart and --compare work.
"""

import json

import pytest
from PIL import Image

from fast_tfds.bench import main as bench
from fast_tfds.bench import memory as bench_memory
from fast_tfds.bench import stream as bench_stream
from fast_tfds.bench import targets as bench_targets
from fast_tfds.bench import train as bench_train


@pytest.fixture(scope="module")
def stream_run(cats_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    paths = out / "a.json", out / "a.png"
    bench.main(
        ["--data-dir", str(cats_data_dir), "--rounds", "1", "--workdir", str(out)]
        + ["--json", str(paths[0]), "--chart", str(paths[1])]
    )
    return json.loads(paths[0].read_text()), *paths


def test_every_pipeline_counts_every_image_in_every_epoch(stream_run, cats_builder):
    result, _, _ = stream_run
    expected = cats_builder.info.splits["train"].num_examples
    pipelines = {p.name: p for p in bench_stream.all_pipelines()}
    assert set(result["pipelines"]) == set(pipelines)
    for name, p in result["pipelines"].items():
        (one_round,) = p["rounds"]
        assert len(one_round["epochs"]) == pipelines[name].epochs
        for i, epoch in enumerate(one_round["epochs"]):
            assert epoch["images"] == expected, name
            assert epoch["images_per_s"] > 0 and epoch["first_batch_s"] >= 0, name
            assert epoch["minor_faults_per_image"] >= 0, name
            # One round: the summary is that round's figure.
            stats = p["summary"][f"epoch{i + 1}"]
            assert stats["min"] == stats["max"] == epoch["images_per_s"], name
            assert stats["median"] == pytest.approx(epoch["images_per_s"], abs=0.05), name
    assert result["images_per_epoch"] == expected
    assert result["counts_consistent"] is True and result["count_errors"] == []
    assert result["machine"]["cpu_count"] > 0 and result["machine"]["tensorflow"]


def test_targets_are_this_runs_ratios(stream_run):
    result, _, _ = stream_run
    summaries = {name: p["summary"] for name, p in result["pipelines"].items()}
    boundaries = result["epoch_boundaries"]
    assert len(boundaries) == 2  # without and with repeat
    assert len(result["targets"]) == len(bench_targets.TARGETS) + len(boundaries)
    for t in result["targets"]:
        if t["row"] == "epoch_boundaries":
            (row,) = [b for b in boundaries if b["label"] in t["target"]]
            value = row["max_gap_ms"] / row["median_step_ms"]
        else:
            value = bench_targets.metric_value(summaries, t["row"], t["metric"])
            value = value["median"] if isinstance(value, dict) else value
            if t["versus"]:
                value /= summaries[t["versus"]]["epoch1"]["median"]
        assert t["measured"] == pytest.approx(value, rel=1e-2, abs=1e-3), t["target"]
        met = value >= t["threshold"] if t["comparison"] == ">=" else value <= t["threshold"]
        assert t["met"] == met, t["target"]


def test_cache_memory_is_measured(stream_run):
    result, _, _ = stream_run
    if bench_memory.heap_in_use() is None:
        pytest.skip("needs glibc's mallinfo2 for an exact figure")
    ours = result["pipelines"]["fast_224_uint8_cache"]["summary"]
    seeds = result["pipelines"]["seed_parallel"]["summary"]
    # uint8 224x224 images: ~1x their bytes; the seeds' float32 cache: ~4x.
    assert 0.8 <= ours["cache_vs_uint8_bytes"] <= 1.5
    assert seeds["cache_vs_uint8_bytes"] >= 3 * ours["cache_vs_uint8_bytes"]


def test_chart_is_a_png(stream_run):
    _, _, chart = stream_run
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(chart) as image:
        image.verify()
        assert image.size[0] > 100 and image.size[1] > 100


def test_compare_prints_the_ratio_of_two_runs(stream_run, tmp_path, capsys):
    result, a_json, _ = stream_run
    faster = json.loads(json.dumps(result))
    for p in faster["pipelines"].values():
        for epoch in ("epoch1", "epoch2"):
            if epoch in p["summary"]:
                p["summary"][epoch]["median"] *= 2
    b_json = tmp_path / "b.json"
    b_json.write_text(json.dumps(faster))
    capsys.readouterr()
    bench.main(["--compare", str(a_json), str(b_json)])
    lines = capsys.readouterr().out.splitlines()
    for name in result["pipelines"]:
        (row,) = [line for line in lines if line.split()[:1] == [name]]
        assert "2.00x" in row, row


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--split", "train[:50%]"], "use a whole split"),
        (["--rounds", "0"], "--rounds=0: must be at least 1"),
        (["--train", "--image-size", "16"], "MobileNetV2 needs at least 32"),
        (["--only", "no_such_pipeline"], "match no pipeline"),
    ],
)
def test_bad_options_fail_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    error = str(exit_info.value.code) + capsys.readouterr().err
    assert message in error


def test_data_dir_without_the_dataset_says_how_to_build_it(tmp_path):
    with pytest.raises(SystemExit, match="is not built in .*tfds build cats_vs_dogs_fast"):
        bench.main(["--data-dir", str(tmp_path), "--only", "fast_224_uint8"])


def test_train_mode_wait_fractions(cats_data_dir, tmp_path):
    json_path = tmp_path / "train.json"
    bench.main(
        ["--train", "--data-dir", str(cats_data_dir), "--steps", "2", "--warmup-steps", "1"]
        + ["--batch-size", "4", "--image-size", "32", "--json", str(json_path)]
    )
    result = json.loads(json_path.read_text())
    assert set(result["pipelines"]) == {row.name for row in bench_train.ROWS}
    for name, p in result["pipelines"].items():
        assert len(p["steps"]["wait_s"]) == len(p["steps"]["compute_s"]) == 2, name
        summary = p["summary"]
        assert 0.0 <= summary["wait_fraction"] <= 1.0, name
        if name.startswith("compute_only_"):
            assert summary["wait_fraction"] == 0.0  # the batch is already held
        else:
            assert 0.0 <= summary["derived_wait_fraction"] <= 1.0, name
        assert summary["step_ms"] > 0 and summary["images_per_s"] > 0, name
    assert (tmp_path / "train.png").read_bytes()[:4] == b"\x89PNG"
