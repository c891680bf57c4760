"""The issue's targets, computed from a run's medians (never from fixed numbers)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Target:
    text: str
    row: str
    metric: str  # 'epoch1', 'epoch2' (medians) or a summary figure such as 'cache_vs_uint8_bytes'
    versus: str | None = None  # divided by this row's epoch-1 median
    at_least: float | None = None
    at_most: float | None = None


def _targets() -> tuple[Target, ...]:
    """Issue 9's targets for the default path (cache=True: epoch 1 also fills the
    cache); every rate is compared with a row of the same output dtype."""
    targets = []
    for output in ("float32", "uint8"):
        same = " + the same conversion" if output == "float32" else ""
        targets.append(
            Target(
                f"epoch 1 (filling the cache), 224, {output}, vs decode of the same bytes{same}",
                f"fast_224_{output}_cache",
                "epoch1",
                f"ceiling_224_{output}",
                at_least=0.85,
            )
        )
    for versus, at_least in (("tfds_load_224", 1.1), ("seed_naive", 1.8)):
        targets.append(
            Target(
                f"default epoch 1 (224, float32, cache=True) vs {versus} (float32)",
                "fast_224_float32_cache",
                "epoch1",
                versus,
                at_least=at_least,
            )
        )
    for output, at_least in (("float32", 0.8), ("uint8", 0.9)):
        same = " + the same conversion" if output == "float32" else ""
        targets.append(
            Target(
                f"cached epoch (epoch 2, global shuffle), {output}, vs uint8 in memory{same}",
                f"fast_224_{output}_cache",
                "epoch2",
                f"in_memory_{output}",
                at_least=at_least,
            )
        )
    for output in ("float32", "uint8"):
        targets.append(
            Target(
                f"minor page faults per image while filling the cache, {output}",
                f"fast_224_{output}_cache",
                "epoch1_faults",
                at_most=4.0,
            )
        )
        targets.append(
            Target(
                f"cache memory held between epochs, {output} output, vs uint8 bytes",
                f"fast_224_{output}_cache",
                "cache_vs_uint8_bytes",
                at_most=1.05,
            )
        )
    targets.append(
        Target(
            "10 epochs end to end vs ideal (1 decode at the ceiling + 9 in-memory passes)",
            "fast_224_float32_cache_10_epochs",
            "ten_epochs_vs_ideal",
            at_least=0.85,
        )
    )
    return tuple(targets)


TARGETS = _targets()


def metric_value(summaries: dict[str, dict], row: str, metric: str):
    summary = summaries[row]
    if metric == "epoch1_faults":
        return summary["epoch1"].get("minor_faults_per_image")
    if metric == "ten_epochs_vs_ideal":
        ceiling, memory = summaries.get("ceiling_224_float32"), summaries.get("in_memory_float32")
        if ceiling is None or memory is None:
            return None
        images = summary["images"]
        ideal = images / ceiling["epoch1"]["median"] + 9 * images / memory["epoch1"]["median"]
        return ideal / summary["total_seconds"]
    return summary.get(metric)


def evaluate_targets(summaries: dict[str, dict]) -> list[dict]:
    """Each target whose rows ran: the ratio measured in this run and whether it is met."""
    out = []
    for t in TARGETS:
        if t.row not in summaries or (t.versus is not None and t.versus not in summaries):
            continue
        value = metric_value(summaries, t.row, t.metric)
        if isinstance(value, dict):
            value = value["median"]
        if value is None:
            continue
        if t.versus is not None:
            value = value / summaries[t.versus]["epoch1"]["median"]
        threshold = t.at_least if t.at_least is not None else t.at_most
        met = value >= t.at_least if t.at_least is not None else value <= t.at_most
        out.append(
            {
                "target": t.text,
                "row": t.row,
                "metric": t.metric,
                "versus": t.versus,
                "measured": round(value, 3),
                "comparison": ">=" if t.at_least is not None else "<=",
                "threshold": threshold,
                "met": bool(met),
            }
        )
    return out


def evaluate_boundaries(rows: list[dict]) -> list[dict]:
    """No end-of-epoch stall: the largest boundary gap is at most 2 median steps."""
    return [
        {
            "target": f"epoch boundary gap vs median step, Keras fit, {row['label']}",
            "row": "epoch_boundaries",
            "metric": "max_gap_ms / median_step_ms",
            "versus": None,
            "measured": round(row["max_gap_ms"] / row["median_step_ms"], 3),
            "comparison": "<=",
            "threshold": 2.0,
            "met": row["max_gap_ms"] <= 2.0 * row["median_step_ms"],
        }
        for row in rows
    ]
