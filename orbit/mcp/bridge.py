"""Run an `orbit` command in this process, as the CLI does, and keep what it printed.

The tools and resources of the server answer through here, so every answer is the command's
own `--json` and every refusal its own one-line `orbit: …` message: there is no second copy of
any command. Calls are serialised: the commands were written for one caller per process.
"""

from __future__ import annotations

import gc
import io
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbit.env import Env

_one_at_a_time = threading.Lock()


@dataclass(frozen=True)
class Answer:
    """What one command gave: its exit code, its JSON (None when it printed none) and the
    line that says why it refused (the last `orbit: …` line of its stderr)."""

    code: int
    data: Any
    error: str

    @property
    def failed(self) -> bool:
        return self.data is None


@dataclass(frozen=True)
class Orbit:
    """The home and directory the server runs commands in."""

    environ: Mapping[str, str]
    cwd: Path

    def call(self, *argv: str, cwd: Path | None = None) -> Answer:
        """`orbit ARGV… --json` through the CLI's main; never raises for the command's errors."""
        from orbit.cli import main

        out, err = io.StringIO(), io.StringIO()
        env = Env(
            environ=dict(self.environ),
            stdin=io.StringIO(""),
            stdout=out,
            stderr=err,
            cwd=cwd or self.cwd,
        )
        with _one_at_a_time:
            try:
                code = main(_with_json(argv), env)
            finally:
                # main() freezes what is loaded for a one-shot process; a server lives on, so
                # what each call leaves is collected again.
                gc.unfreeze()
        return Answer(code, _json(out.getvalue()), _error_line(err.getvalue(), argv, code))


def _with_json(argv: tuple[str, ...]) -> list[str]:
    """`--json` among the options: before the `--` that starts a run's command, if any."""
    at = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:at], "--json", *argv[at:]]


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return None


def _error_line(stderr: str, argv: tuple[str, ...], code: int) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith("orbit: ") and "warning:" not in line]
    if said:
        return said[-1]
    if lines:
        return lines[-1]
    return f"orbit: `orbit {argv[0]}` exited with code {code}"
