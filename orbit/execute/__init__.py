"""Docker, code snapshots and the per-run shepherd."""
