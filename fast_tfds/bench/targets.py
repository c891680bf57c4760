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
    """Epoch-1 targets for the default cache=True (epoch 1 also fills the cache) and for
    cache=False; every rate is compared with a row of the same output dtype."""
    targets = []
    for suffix, mode in (("_cache", "cache=True"), ("", "cache=False")):
        for config, work in (("224", "decode"), ("original", "decode+resize")):
            shown = "original->224" if config == "original" else config
            for output in ("uint8", "float32"):
                same = " + the same conversion" if output == "float32" else ""
                targets.append(
                    Target(
                        f"epoch 1, {shown}, {output}, {mode} vs {work} of the same bytes{same}",
                        f"fast_{config}_{output}{suffix}",
                        "epoch1",
                        f"ceiling_{config}_{output}",
                        at_least=0.9,
                    )
                )
        for seed, at_least in (("seed_naive", 2.0), ("seed_parallel", 3.0)):
            targets.append(
                Target(
                    f"epoch 1, 224, float32, {mode} vs {seed} (float32)",
                    f"fast_224_float32{suffix}",
                    "epoch1",
                    seed,
                    at_least=at_least,
                )
            )
    for output in ("uint8", "float32"):
        same = " + the same conversion" if output == "float32" else ""
        targets.append(
            Target(
                f"cached epoch (epoch 2), {output}, vs uint8 images in memory{same}",
                f"fast_224_{output}_cache",
                "epoch2",
                f"in_memory_{output}",
                at_least=0.8,
            )
        )
    for output in ("uint8", "float32"):
        targets.append(
            Target(
                f"cache memory (C heap held between epochs), {output} output, vs uint8 bytes",
                f"fast_224_{output}_cache",
                "cache_vs_uint8_bytes",
                at_most=1.2,
            )
        )
    return tuple(targets)


TARGETS = _targets()


def evaluate_targets(summaries: dict[str, dict]) -> list[dict]:
    """Each target whose rows ran: the ratio measured in this run and whether it is met."""
    out = []
    for t in TARGETS:
        if t.row not in summaries or (t.versus is not None and t.versus not in summaries):
            continue
        value = summaries[t.row].get(t.metric)
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
