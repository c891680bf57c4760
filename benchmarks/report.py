"""The benchmark's outputs: the printed table, the JSON file, the PNG chart, and
`--compare A.json B.json`. Works on the result dicts only (no TensorFlow)."""

from __future__ import annotations

import json
import math
from pathlib import Path

GROUP_TITLES = {
    "ceiling": "Ceilings: the same JPEG bytes decoded from memory on all cores",
    "reference": "Reference for cached epochs: decoded uint8 images already in memory",
    "baseline": "What users write today",
    "ours": "as_fast_dataset (float32 by default; uint8 to rescale on the accelerator)",
    "train": "Training steps",
}


def _rate(stats: dict | None) -> str:
    if not stats:
        return "-"
    return f"{stats['median']:7.0f} [{stats['min']:.0f}-{stats['max']:.0f}]"


def _num(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


# -- streaming ---------------------------------------------------------------------


def stream_table(result: dict) -> str:
    header = (
        f"{'pipeline':<35}{'output':<8}"
        f"{'epoch 1 img/s [min-max]':>25}{'epoch 2 img/s [min-max]':>25}"
        f"{'e1/ceil':>8}{'e2/mem':>8}{'1st batch':>10}{'peak RSS':>10}{'cache':>9}"
        f"{'MiB/1k':>8}{'x uint8':>8}{'flt/img':>14}"
    )
    lines = [
        _title(result),
        "Medians over rounds; e1/ceil: epoch 1 / the ceiling with the same work and output;",
        "e2/mem: epoch 2 / the in-memory reference with the same output; 1st batch: epoch 1;",
        "peak RSS: growth while it ran, MiB (low when it reuses memory an earlier row freed);",
        "cache: memory the dataset holds between epochs (resident anonymous memory), MiB;",
        "x uint8: cache / (n*224*224*3); flt/img: minor page faults per image, epoch 1/epoch 2.",
        "",
        header,
    ]
    pipelines = result["pipelines"]
    medians = {name: p["summary"] for name, p in pipelines.items()}
    group = None
    for name, p in pipelines.items():
        if p["group"] != group:
            group = p["group"]
            lines.append(GROUP_TITLES.get(group, group))
        s = p["summary"]
        vs_ceiling = _ratio(s, "epoch1", medians.get(p.get("ceiling")))
        vs_memory = None
        if p.get("cached"):
            vs_memory = _ratio(s, "epoch2", medians.get(f"in_memory_{p['output']}"))
        lines.append(
            f"  {name:<33}{p['output']:<8}{_rate(s.get('epoch1')):>25}{_rate(s.get('epoch2')):>25}"
            f"{_num(vs_ceiling, '.2f', 'x'):>8}{_num(vs_memory, '.2f', 'x'):>8}"
            f"{_num(s.get('first_batch_s'), '.2f', 's'):>10}"
            f"{_num(s.get('peak_rss_growth_mib'), '.0f'):>10}{_num(s.get('cache_mib'), '.0f'):>9}"
            f"{_num(s.get('cache_mib_per_1000_images'), '.0f'):>8}"
            f"{_num(s.get('cache_vs_uint8_bytes'), '.2f', 'x'):>8}"
            f"{_faults(s):>14}"
        )
    lines += ["", "Rows:"]
    lines += [f"  {name:<33}{p['label']}" for name, p in pipelines.items()]
    if result.get("epoch_boundaries"):
        lines += ["", "Keras fit, time from an epoch's last step to the next one's first:"]
        for row in result["epoch_boundaries"]:
            ratio = row["max_gap_ms"] / row["median_step_ms"]
            lines.append(
                f"  {row['label']:<52} gap {row['max_gap_ms']:7.1f} ms, median step "
                f"{row['median_step_ms']:6.1f} ms: {ratio:5.1f}x"
            )
    if not result["counts_consistent"]:
        lines += ["", "COUNT MISMATCH: " + "; ".join(result["count_errors"])]
    return "\n".join(lines)


def _faults(summary: dict) -> str:
    values = [summary.get(e, {}).get("minor_faults_per_image") for e in ("epoch1", "epoch2")]
    return "/".join(_num(v, ".1f") for v in values if v is not None) or "-"


def _ratio(summary: dict, epoch: str, versus: dict | None) -> float | None:
    if versus is None or not summary.get(epoch) or not versus.get("epoch1"):
        return None
    return summary[epoch]["median"] / versus["epoch1"]["median"]


def _title(result: dict) -> str:
    m, d = result["machine"], result["dataset"]
    gpus = f", {', '.join(m['gpus'])}" if m.get("gpus") else ""
    rounds = result.get("rounds", 1)
    runs = f"{rounds} round{'s' * (rounds != 1)}"
    if result["mode"] == "train":
        runs = f"{_model(result)} training, batch {result['batch_size']}, on {result['device']}"
    return (
        f"{d['name']}/{d['split']}: {d['images']} images, {runs} | "
        f"{m['cpu_model']}, {m['cpu_count']} CPUs, {m['ram_gib']:.0f} GiB{gpus} | "
        f"TF {m['tensorflow']} | {m['date'][:16]}"
    )


# -- training ----------------------------------------------------------------------


def _model(result: dict) -> str:
    """The trained model's name; results written before `--model` existed trained MobileNetV2."""
    return {"tiny": "one-convolution model"}.get(result.get("model"), "MobileNetV2")


def train_table(result: dict) -> str:
    lines = [
        _title(result),
        f"{_model(result)} {result['image_size']}px, batch {result['batch_size']}, "
        f"{result['steps']} steps after {result['warmup_steps']} warm-up steps, "
        f"weights={result['weights']}, on {result['device']}.",
        "wait: time in next(iterator) / step time (measured); derived: "
        "1 - compute-only step / step.",
        "",
        f"{'pipeline':<32}{'step ms':>9}{'input ms':>10}{'compute ms':>12}"
        f"{'wait':>8}{'derived':>9}{'img/s':>9}",
    ]
    for name, p in result["pipelines"].items():
        s = p["summary"]
        lines.append(
            f"  {name:<30}{s['step_ms']:9.0f}{s['input_ms']:10.1f}{s['compute_ms']:12.0f}"
            f"{s['wait_fraction']:8.1%}{_num(s.get('derived_wait_fraction'), '.1%'):>9}"
            f"{s['images_per_s']:9.0f}"
        )
    lines += ["", "Rows:"]
    lines += [f"  {name:<30}{p['label']}" for name, p in result["pipelines"].items()]
    return "\n".join(lines)


# -- files -------------------------------------------------------------------------


def write_json(result: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return path


def load_json(path: str | Path) -> dict:
    try:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SystemExit(f"--compare: cannot read {path}: {err}") from None
    if not isinstance(result, dict) or "pipelines" not in result or "mode" not in result:
        raise SystemExit(f"--compare: {path} is not a JSON file written by the benchmark")
    return result


def write_chart(result: dict, path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(result["pipelines"])[::-1]  # barh draws bottom-up
    summaries = [result["pipelines"][n]["summary"] for n in names]
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.42 * len(names)))
    y = list(range(len(names)))
    if result["mode"] == "stream":
        height = 0.4
        for offset, epoch, label in ((height / 2, "epoch1", "epoch 1"), (-height / 2, "epoch2",
                                     "epoch 2 (same dataset again: caches count)")):  # fmt: skip
            medians, low, high = [], [], []
            for s in summaries:
                stats = s.get(epoch)
                medians.append(stats["median"] if stats else math.nan)
                low.append(stats["median"] - stats["min"] if stats else 0)
                high.append(stats["max"] - stats["median"] if stats else 0)
            bars = ax.barh(
                [v + offset for v in y], medians, height, xerr=[low, high], capsize=2, label=label
            )
            labels = ["" if math.isnan(m) else f" {m:,.0f}" for m in medians]
            ax.bar_label(bars, labels, fontsize=7, padding=8)
        ax.set_xscale("log")  # rates span 300 to 70,000 images/s
        ax.set_xlabel(
            f"images/s (log scale): median of {result['rounds']} rounds, whiskers min-max"
        )
    else:
        compute = [s["compute_ms"] for s in summaries]
        wait = [s["input_ms"] for s in summaries]
        ax.barh(y, compute, 0.6, label="train step (compute)")
        ax.barh(y, wait, 0.6, left=compute, label="waiting for input")
        ax.set_xlabel(f"ms per step (mean of {result['steps']} steps)")
    ax.set_yticks(y, names)
    fig.legend(loc="lower center", ncol=2, fontsize=8, frameon=False)
    ax.set_title(_title(result).replace(" | ", "\n", 1), fontsize=9)
    fig.tight_layout(rect=(0, 0.03, 1, 1))  # room for the legend below
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- comparing two runs ------------------------------------------------------------


def compare(path_a: str | Path, path_b: str | Path) -> str:
    a, b = load_json(path_a), load_json(path_b)
    if a["mode"] != b["mode"]:
        raise SystemExit(
            f"--compare: {path_a} is a {a['mode']} run and {path_b} a {b['mode']} run; "
            "compare runs of the same mode"
        )
    metrics = (
        [("epoch1", "epoch 1 img/s"), ("epoch2", "epoch 2 img/s")]
        if a["mode"] == "stream"
        else [("images_per_s", "img/s"), ("wait_fraction", "wait")]
    )
    lines = [f"A: {path_a}\n   {_title(a)}", f"B: {path_b}\n   {_title(b)}"]
    if (a["dataset"]["name"], a["dataset"]["images"]) != (
        b["dataset"]["name"],
        b["dataset"]["images"],
    ):
        lines.append("Note: A and B measured different data; compare rates with care.")
    lines.append("")
    header = f"{'pipeline':<35}"
    for _key, title in metrics:
        header += f"{title + ' A':>16}{'B':>9}{'B/A':>8}"
    lines.append(header)
    names = list(a["pipelines"]) + [n for n in b["pipelines"] if n not in a["pipelines"]]
    for name in names:
        row = f"  {name:<33}"
        for key, _title_text in metrics:
            va = _metric(a, name, key)
            vb = _metric(b, name, key)
            ratio = vb / va if va and vb is not None else None
            spec = ".1%" if key == "wait_fraction" else ".0f"
            row += f"{_num(va, spec):>16}{_num(vb, spec):>9}{_num(ratio, '.2f', 'x'):>8}"
        lines.append(row)
    return "\n".join(lines)


def _metric(result: dict, name: str, key: str) -> float | None:
    p = result["pipelines"].get(name)
    if p is None:
        return None
    value = p["summary"].get(key)
    return value["median"] if isinstance(value, dict) else value
