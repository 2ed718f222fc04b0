"""Review of finished runs: metric summaries, comparisons, the best settings, failure
signatures. Reads run records only (above store/, below sched/); never talks to Docker."""
