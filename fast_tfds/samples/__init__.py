"""Look-alike source archives with the real layouts, for offline builds, tests and benchmarks.

`cats_vs_dogs` and `stanford_dogs` write each dataset's archives; `photos` makes
their photo content. This module writes a dataset's sample once, and knows
whether it is complete.

The demo and the benchmark both reuse samples between runs. A marker file is
written after the archives, so a run killed while writing them (a truncated
zip or tar) is written again instead of being reused.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Stanford Dogs' classes: a full sample has photos of every breed.
STANFORD_BREEDS = 120


def is_complete(dataset: str, manual_dir: Path) -> bool:
    return _marker(dataset, manual_dir).exists()


def write(
    dataset: str, manual_dir: Path, images_per_class: int, *, breed_count: int = STANFORD_BREEDS
) -> dict[str, Any]:
    """Writes `dataset`'s archives into `manual_dir`; returns what they hold.

    `images_per_class`: photos per class for cats_vs_dogs_fast, per breed for
    stanford_dogs_tfrecord, whose sample holds the first `breed_count` of its 120
    classes.
    """
    from fast_tfds.samples import cats_vs_dogs, stanford_dogs

    manual_dir = Path(manual_dir)
    manual_dir.mkdir(parents=True, exist_ok=True)
    _marker(dataset, manual_dir).unlink(missing_ok=True)
    if dataset == "cats_vs_dogs_fast":
        what = f"{images_per_class} photos per class"
        work = functools.partial(
            cats_vs_dogs.write_cats_zip, manual_dir / cats_vs_dogs.CATS_ZIP_NAME, images_per_class
        )
    else:
        what = f"{breed_count} breeds x {images_per_class} photos"
        work = functools.partial(
            stanford_dogs.write_stanford_dogs_archives,
            manual_dir,
            images_per_class,
            breeds=range(breed_count),
        )
    counts = with_folder_progress(manual_dir, f"Writing the {dataset} sample ({what})", work)
    _marker(dataset, manual_dir).write_text("complete\n")
    return counts


def _marker(dataset: str, manual_dir: Path) -> Path:
    # One per dataset: the demo keeps both datasets' archives in one folder.
    return Path(manual_dir) / f".{dataset}.complete"


def with_folder_progress(folder: Path, description: str, work: Callable[[], Any]) -> Any:
    """Runs `work()` in a thread while a progress bar shows the bytes written into `folder`."""
    from tqdm import tqdm

    outcome: dict[str, Any] = {}

    def run():
        try:
            outcome["value"] = work()
        except BaseException as err:  # re-raised in the calling thread
            outcome["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    with tqdm(desc=description, unit="B", unit_scale=True) as bar:
        while thread.is_alive():
            thread.join(0.5)
            written = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
            bar.update(written - bar.n)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
