"""The agent session a run was launched from: read from the environment at submit (the
variables Orbit's SessionStart hook exports through CLAUDE_ENV_FILE) and indexed under
ORBIT_HOME/agents/sessions/<session_id>.json, so a session's Stop hook finds its runs."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.locks import locked

SESSION_VAR = "ORBIT_AGENT_SESSION"
HARNESS_VAR = "ORBIT_AGENT_HARNESS"
TRANSCRIPT_VAR = "ORBIT_AGENT_TRANSCRIPT"

# A session id names a file: letters, digits, '-', '_' and '.', not starting with '.'.
_SAFE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")


def valid_session_id(value: object) -> bool:
    return isinstance(value, str) and _SAFE_ID.fullmatch(value) is not None


def agent_from_environ(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """run.yaml's `agent` block from the environment, or None outside an agent session."""
    session = environ.get(SESSION_VAR, "").strip()
    if not valid_session_id(session):
        return None
    return {
        "harness": environ.get(HARNESS_VAR, "").strip() or None,
        "session_id": session,
        "transcript_path": environ.get(TRANSCRIPT_VAR, "").strip() or None,
    }


def sessions_dir(home: Home) -> Path:
    return home.root / "agents" / "sessions"


def session_index_path(home: Home, session_id: str) -> Path:
    return sessions_dir(home) / f"{session_id}.json"


def read_session_index(home: Home, session_id: str) -> dict[str, Any]:
    """The index of one session ({session_id, harness, transcript_path, runs}); empty runs when
    the session launched none (or the file is damaged)."""
    empty: dict[str, Any] = {"session_id": session_id, "runs": []}
    if not valid_session_id(session_id):
        return empty
    try:
        data = json.loads(session_index_path(home, session_id).read_text())
    except (OSError, ValueError):
        return empty
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        return empty
    data["runs"] = [str(r) for r in data["runs"]]
    return data


def record_session_run(home: Home, agent: Mapping[str, Any], *run_ids: str) -> None:
    """Add `run_ids` to their session's index: read, add and replace atomically under a lock,
    so concurrent submits from one session lose no id."""
    session_id = agent.get("session_id")
    if not valid_session_id(session_id):
        return
    assert isinstance(session_id, str)
    folder = sessions_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder / f".{session_id}.lock"):
        data = read_session_index(home, session_id)
        data["harness"] = agent.get("harness")
        data["transcript_path"] = agent.get("transcript_path")
        for run_id in run_ids:
            if run_id not in data["runs"]:
                data["runs"].append(run_id)
        text = json.dumps(data, indent=1) + "\n"
        atomic_write(session_index_path(home, session_id), text.encode())
