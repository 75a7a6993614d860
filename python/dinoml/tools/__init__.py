"""Developer tools built on the public API (benchmarks); `python -m dinoml.cli` exposes them."""
