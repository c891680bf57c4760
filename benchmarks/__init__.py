"""The benchmark: every pipeline over the same data, in one process (see `main`).

It lives in the repository, not in the installed package: run `python -m benchmarks`
from the root of a clone (or `bash scripts/bench.sh`, which installs the `[bench]`
extra first). It uses the library's public API only.

`stream` times epochs of each pipeline (`baselines` has the pipelines users
write and the decode ceilings), `train` times a Keras model's wait for input,
`loaders` adds the non-TensorFlow rows, `sizes` the output sizes and the disk
cache (`python -m benchmarks sizes`), `epoch_boundaries` times Keras `fit`
between epochs, `memory` measures what caches hold, `report` prints, saves and
compares results, `data` writes and builds the sample, and `options` holds the
flags every benchmark spells alike (--images-per-class, --rounds) and their check.
`accelerator` times a GPU's wait for input (no TensorFlow; `accelerator_pack`
packs what it reads).
`results/` keeps earlier runs; `experiments/` the scripts behind one-off
measurements.
"""
