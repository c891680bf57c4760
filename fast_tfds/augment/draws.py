"""Which counter columns of `counters.uniforms` each per-example draw of a recipe reads.

`counters.uniforms(seed, epoch, indices, draws)` hashes (seed, epoch, example, column),
so column j is the same number whatever `draws` is: the stronger recipes take columns
after the windows' own (0 .. windows.DRAWS - 1), each its own block, and adding one
never changes another's draws, nor today's windows.
"""

from __future__ import annotations

import numpy as np

from fast_tfds.augment import counters

# The windows' own columns (`windows.DRAWS`, which a test checks this against): not
# imported, since the windows read the spec, whose validation parses policies.
WINDOW_DRAWS = 27
ROTATE = WINDOW_DRAWS  # the angle of a uniform rotation
ERASE = ROTATE + 1
ERASE_TRIES = 10  # timm's RandomErasing: tries per box
# Erasing: whether, then per try: area, aspect, top, left; then the pixels' seed.
ERASE_DRAWS = 1 + 4 * ERASE_TRIES + 1
POLICY = ERASE + ERASE_DRAWS
POLICY_SLOT = 5  # per op of a policy: which op, magnitude (2: a gaussian's), sign, whether
MAX_OPS = 16
TOTAL = POLICY + POLICY_SLOT * MAX_OPS


def block(seed: int, epoch: int, indices, start: int, count: int) -> np.ndarray:
    """[len(indices), count] uniforms in [0, 1): columns start .. start + count - 1."""
    return counters.uniforms(seed, epoch, indices, start + count)[:, start:]
