"""`fast-tfds bench`: every pipeline over the same data, in one process (see `main`).

`stream` times epochs of each pipeline (`baselines` has the seeds' pipelines and
the decode ceilings), `train` times a Keras model's wait for input, `memory`
measures what caches hold, `targets` checks the measured ratios, `report`
prints, saves and compares results, and `data` writes and builds the sample.
"""
