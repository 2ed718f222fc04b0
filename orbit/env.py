"""One environment object, built at the entry point and passed down (tests build their own)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from orbit.store.home import Home

if TYPE_CHECKING:
    from collections.abc import Sequence

    from orbit.execute.spawn import Prespawned
    from orbit.sched.tick import Spawner
    from orbit.store.model import Run


@dataclass
class Env:
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    cwd: Path = field(default_factory=Path.cwd)
    # The clock a waiting command paces what it says by (tests give their own).
    monotonic: Callable[[], float] = time.monotonic
    # A shepherd started ahead of the run this command submits (execute/spawn.Prespawned).
    prespawned: Prespawned | None = None

    @cached_property
    def home(self) -> Home:
        home = Home.from_environ(self.environ)
        # Before anything is written: what Orbit creates is private unless the home is shared.
        home.apply_umask()
        return home

    @property
    def actor(self) -> str:
        return f"cli:{os.getpid()}"

    @property
    def spawner(self) -> Spawner:
        from orbit.execute.spawn import spawn

        return self.prespawned or spawn

    def tick(self, submitted: Sequence[Run] = ()) -> object:
        from orbit.sched.tick import tick

        return tick(self.home, spawn=self.spawner, actor=self.actor, submitted=submitted)
