"""Orbit: experiment infrastructure for coding agents.

Runs experiments in Docker with fair CPU/memory (and GPU) leases and keeps a complete,
crash-safe record of each run as plain files under ORBIT_HOME (see docs/run-directory.md).
"""

__version__ = "0.1.0"
