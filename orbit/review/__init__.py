"""Review of finished runs, for people and agents: metric summaries, compare, best, failure
signatures, the lessons digest. Reads run records only (never Docker); the CLI and the web
render what it returns."""
