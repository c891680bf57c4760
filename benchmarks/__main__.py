"""`python -m benchmarks ...`, from the root of a clone of the repository."""

from benchmarks.main import main

main()
