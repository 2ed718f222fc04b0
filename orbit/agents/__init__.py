"""Orbit inside coding agents: the skills and hooks `orbit plugin` installs (plugin code),
the session hooks (hooks.py) and reading an agent's transcript (transcript.py). Sits above
execute/ and service/: it reads and writes run records and the lessons digest, never prints."""
