"""The Claude Code hooks Orbit installs: `orbit hook session-start` and `orbit hook session-end`.

Both read the hook's JSON payload (session_id, transcript_path, cwd, hook_event_name, …) from
stdin. They must never fail or slow the agent's session: the CLI catches everything, logs it to
ORBIT_HOME/runtime/hooks.log and exits 0. The copy of a transcript is append-only, whole lines
only, and bounded in time; a later call continues where the last one stopped.

The installed commands name their home (`--home PATH`). A home that is missing or cannot be
read is said in one line, to the agent (SessionStart's additionalContext) and to the person
(`systemMessage`), and nothing is created in its place.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from orbit.errors import OrbitError
from orbit.harnesses import claude_code
from orbit.store.agent import (
    HARNESS_VAR,
    SESSION_VAR,
    TRANSCRIPT_VAR,
    read_session_index,
    valid_session_id,
)
from orbit.store.home import Home
from orbit.store.locks import release, try_lock
from orbit.store.model import now_iso

HARNESS = claude_code.HARNESS.id  # the agent these hooks are installed into
# What the SessionStart hook adds to the context: the lessons digest, cut to this many chars.
MAX_CONTEXT_CHARS = 4000
# SessionEnd hooks get 1.5 s by default: the copy stops after this long and resumes next time.
COPY_BUDGET_S = 1.0
CHUNK = 1 << 20
MAX_LOG_BYTES = 1 << 20


class BadPayload(ValueError):
    """The hook's stdin is not the payload Orbit expects."""


def parse_payload(text: str) -> dict[str, Any]:
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise BadPayload(f"payload is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise BadPayload("payload is not a JSON object")
    if not valid_session_id(payload.get("session_id")):
        raise BadPayload(f"bad session_id {payload.get('session_id')!r}")
    return payload


def log_path(home: Home) -> Path:
    return home.runtime_dir / "hooks.log"


def log(home: Home, message: str) -> None:
    """One line in ORBIT_HOME/runtime/hooks.log (best effort: a hook never fails on it)."""
    try:
        home.runtime_dir.mkdir(parents=True, exist_ok=True)
        path = log_path(home)
        if path.exists() and path.stat().st_size > MAX_LOG_BYTES:
            path.replace(path.with_name("hooks.log.1"))  # keep one older file, no more
        with open(path, "a") as f:
            f.write(f"{now_iso()} {message}\n")
    except OSError:
        pass


# --- the home -----------------------------------------------------------------------------------
REINSTALL = f"reinstall with `orbit plugin install {claude_code.HARNESS.plugin}`"


def open_home(given: str | None, environ: Mapping[str, str]) -> tuple[Home, str | None]:
    """The home the hook reports to: `given` (the command's --home), else ORBIT_HOME, else
    ~/.orbit; and, when one that was named is missing or cannot be read, the line saying so.
    The default home missing is no problem (nothing was run yet)."""
    named = {**environ, "ORBIT_HOME": given} if given else environ
    home = Home.from_environ(named)
    if given:
        what = f"the home {home.root} this hook was installed for"
    elif environ.get("ORBIT_HOME"):
        what = f"ORBIT_HOME={home.root}"
    else:
        return home, None
    if not home.root.exists():
        return home, f"Orbit: {what} is missing; {REINSTALL}"
    if not home.root.is_dir():
        return home, f"Orbit: {what} is not a directory; {REINSTALL}"
    if not os.access(home.root, os.R_OK | os.W_OK | os.X_OK):
        return home, f"Orbit: {what} cannot be used (permission denied); {REINSTALL}"
    try:
        data = home.data_dir
    except (OrbitError, OSError) as exc:  # config.yaml cannot be read
        return home, f"Orbit: {what} cannot be used: {exc}"
    if not data.is_dir():
        return home, f"Orbit: the data directory {data} of {what} is missing"
    return home, None


def unusable(event: str, line: str) -> str:
    """The hook's output for a home it cannot use: for the agent (SessionStart) and the user."""
    out: dict[str, Any] = {"systemMessage": line}
    if event == "session-start":
        out["hookSpecificOutput"] = {"hookEventName": "SessionStart", "additionalContext": line}
    return json.dumps(out)


# --- SessionStart ------------------------------------------------------------------------------
def env_lines(payload: dict[str, Any], home: Home | None = None) -> str:
    """The `export` lines for CLAUDE_ENV_FILE: later Bash commands of the session see them.
    With `home`, ORBIT_HOME too, so the session's own commands use the hooks' home."""
    values = {SESSION_VAR: payload["session_id"], HARNESS_VAR: HARNESS}
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and transcript:
        values[TRANSCRIPT_VAR] = transcript
    if home is not None:
        values["ORBIT_HOME"] = str(home.root)
    return "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in values.items())


def write_env_file(path: Path, payload: dict[str, Any], home: Home | None = None) -> None:
    with open(path, "a") as f:
        f.write(env_lines(payload, home))


def lessons_context(home: Home, cwd: str | None) -> str:
    """The short lessons digest of `cwd`'s repository, opened by the groups its runs are in
    and the home they are in; or "" (no repository, no runs)."""
    from orbit.execute.snapshot import repo_root
    from orbit.review.lessons import Scope, digest
    from orbit.review.lessons_page import render
    from orbit.store.runs import RunStore

    if not cwd or not home.runs_dir.is_dir():
        return ""
    try:
        root = repo_root(Path(cwd))
        d = digest(RunStore(home), Scope(project=str(root)))
    except OrbitError:  # not a repository, or no runs of it
        return ""
    head = (
        f"Orbit (experiment runner) has {d['runs']} runs of this repository in "
        f"ORBIT_HOME={home.root}. Its digest of what was tried (`orbit lessons`; the groups "
        "are listed under Groups, each with its own digest):\n\n"
    )
    return head + fit(render(d), MAX_CONTEXT_CHARS - len(head))


def fit(text: str, room: int) -> str:
    """`text` cut at a line to about `room` characters, with a mark and the command that shows
    the rest; never inside the groups' conclusions, which are carried whole."""
    if len(text) <= room:
        return text
    keep = text.find("\n## Tried")  # the conclusions come before it
    cut = max(room - 40, keep if keep > 0 else 0)
    return text[:cut].rsplit("\n", 1)[0] + "\n… (the rest: `orbit lessons`)\n"


def session_start(
    home: Home,
    payload: dict[str, Any],
    env_file: str | None,
    *,
    bound: bool = False,
    their_home: Path | None = None,
) -> str:
    """Export the session's variables; return what to print (the hook's JSON output or "").

    `bound`: the command named `home` (--home); `their_home`: the ORBIT_HOME of the agent's
    environment, when it has one. A bound hook exports ORBIT_HOME through CLAUDE_ENV_FILE when
    the environment has none, so the session's own commands use the same home; when the
    environment names another home, the context opens by saying so."""
    if env_file:
        write_env_file(Path(env_file), payload, home if bound and their_home is None else None)
    cwd = payload.get("cwd")
    context = lessons_context(home, cwd if isinstance(cwd, str) else None)
    if bound and their_home is not None and their_home != home.root:
        context = (
            f"Orbit: this session's ORBIT_HOME is {their_home}, but its hooks report to "
            f"{home.root}: runs launched here go to {their_home}, and their sessions are not "
            f"recorded; {REINSTALL} from the home you use.\n\n" + context
        )
    if not context:
        return ""
    out = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}
    return json.dumps(out)


# --- Stop / SessionEnd -------------------------------------------------------------------------
def transcript_name(session_id: str) -> str:
    return f"{session_id}.jsonl"


def _last_line_end(src: BinaryIO, start: int, size: int) -> int:
    """The offset just after the last newline in [start, size), or `start` when there is none."""
    pos = size
    while pos > start:
        step = min(CHUNK, pos - start)
        src.seek(pos - step)
        cut = src.read(step).rfind(b"\n")
        if cut >= 0:
            return pos - step + cut + 1
        pos -= step
    return start


def _same_tail(src: BinaryIO, dest: Path, done: int, n: int = 4096) -> bool:
    """Whether the last `n` bytes of the copy are still those of the source (a transcript
    replaced by another one is not appended to the old copy)."""
    n = min(n, done)
    src.seek(done - n)
    with os.fdopen(os.open(dest, os.O_RDONLY | os.O_NOFOLLOW), "rb") as d:
        d.seek(done - n)
        return src.read(n) == d.read(n)


def copy_new_lines(source: Path, dest: Path, deadline: float) -> int:
    """Append to `dest` the whole lines of `source` beyond `dest`'s length; bytes copied.

    `dest` only ever holds a prefix of `source`, so its size is how far the copy got. Stops at
    the last newline (a line still being written waits for the next call) or, between chunks of
    about a MiB, at `deadline`: a call made before the deadline copies one chunk at least.
    """
    if time.monotonic() >= deadline:
        return 0
    if dest.is_symlink():  # session/ of an --auth run is writable from inside its container
        raise OSError(f"{dest} is a symbolic link: not followed")
    done = dest.stat().st_size if dest.exists() else 0
    size = source.stat().st_size
    if size < done:
        raise OSError(f"{source} is shorter ({size} bytes) than its copy {dest} ({done})")
    pos = done
    with open(source, "rb") as src:
        if done and not _same_tail(src, dest, done):
            raise OSError(f"{source} no longer starts with its copy {dest}: not appended to")
        end = _last_line_end(src, done, size)
        while pos < end:  # a chunk at least, then until the deadline
            src.seek(pos)
            data = src.read(min(CHUNK, end - pos))
            cut = data.rfind(b"\n")
            while cut < 0:  # one line longer than a chunk: read on to its end (end is a newline)
                more = src.read(min(CHUNK, end - pos - len(data)))
                if not more:  # the file changed under us: try again next time
                    return pos - done
                data += more
                cut = data.rfind(b"\n")
            fd = os.open(dest, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
            try:
                view = memoryview(data)[: cut + 1]
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            pos += cut + 1
            if time.monotonic() >= deadline:
                break
    return pos - done


def session_end(home: Home, payload: dict[str, Any], budget_s: float = COPY_BUDGET_S) -> list[str]:
    """Copy the finished part of the transcript into `session/` of each run the session launched.
    Returns one line per run for the log."""
    from orbit.store.runs import RunStore

    session_id = payload["session_id"]
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        raise BadPayload("no transcript_path")
    source = Path(transcript)
    runs = read_session_index(home, session_id)["runs"]
    store = RunStore(home)
    deadline = time.monotonic() + budget_s
    report = []
    for run_id in runs:
        run_dir = store.run_dir(run_id)
        if not run_dir.is_dir():
            continue  # removed with `orbit rm`
        folder = run_dir / "session"
        folder.mkdir(exist_ok=True)
        handle = try_lock(run_dir / ".session.lock", timeout=0.2)
        if handle is None:
            report.append(f"run {run_id}: another copy is in progress")
            continue
        try:
            n = copy_new_lines(source, folder / transcript_name(session_id), deadline)
            report.append(f"run {run_id}: +{n} bytes")
        except OSError as exc:  # this run's copy; the others still get theirs
            report.append(f"run {run_id}: not copied: {exc}")
        finally:
            release(handle)
    return report
