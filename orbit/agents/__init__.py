"""Coding agents and Orbit: the session hooks (orbit/agents/hooks.py) and reading an agent's
transcript (orbit/agents/transcript.py). Sits above execute/ and service/: it reads and writes
run records and the lessons digest, never prints."""
