"""The environment of every process Orbit starts: shepherds, supervised ticks, the web server.

One rule for all of them: the caller's environment, scrubbed to what such a process needs
(finding programs and the user's files, the locale, Orbit's own settings, what a Docker
client reads), the settings that change what a tick decides taken from the home as the caller saw
them, ORBIT_HOME, and the package's parent on PYTHONPATH so that `python -m orbit` works from a
checkout without an install. Whatever else the caller had set (cloud keys, tokens, `--pass-env`
values) has no business in a process that outlives the command.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from orbit.store.home import Home

# The directory holding the `orbit` package.
PACKAGE_PARENT = Path(__file__).resolve().parents[2]

KEEP = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "XDG_RUNTIME_DIR",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "LD_LIBRARY_PATH",  # some Python builds need it to start
        "SSH_AUTH_SOCK",  # the user's ssh agent: how mirrors and probes reach nodes
        "SLURM_CONF",  # where Slurm's commands find the cluster (a Slurm home's ticks)
    }
)
KEEP_PREFIXES = ("LC_", "ORBIT_", "DOCKER_", "PYTHON")
# As the caller's home saw them (they may come from an Env rather than os.environ).
FROM_HOME = ("ORBIT_DATA", "ORBIT_FAKE_GPUS", "ORBIT_GPUS")


def child_environ(home: Home, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for an Orbit child process of `home`, built from `base` (os.environ)."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if k in KEEP or k.startswith(KEEP_PREFIXES)}
    for name in FROM_HOME:
        env.pop(name, None)
        if home.environ.get(name):
            env[name] = home.environ[name]
    env["ORBIT_HOME"] = str(home.root)
    paths = [str(PACKAGE_PARENT), *env.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    return env


def lean_environ(home: Home) -> dict[str, str]:
    """`child_environ`, with this process's import path on PYTHONPATH: for an interpreter started
    with `-S` (a shepherd, a Slurm job), which skips the site module that would add the site
    directories."""
    env = child_environ(home, home.environ)
    paths = [*env.get("PYTHONPATH", "").split(os.pathsep), *sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p and os.path.isdir(p)))
    return env
