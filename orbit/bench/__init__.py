"""orbit bench: benchmarks run as Orbit runs (docs/bench.md)."""
