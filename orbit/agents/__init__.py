"""Orbit inside coding agents: the skills and hooks `orbit plugin` installs."""
