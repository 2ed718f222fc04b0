"""A line in the user's crontab, one per home, found again by the marker at its end.

`crontab -l` and `crontab -` are the only ways in (the table's file is cron's business);
$ORBIT_CRONTAB names another crontab program (the tests use one that keeps the table in a file).
Lines that are not this home's stay exactly as they were.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping

from orbit.errors import OrbitError, UsageError
from orbit.service.units import run_program
from orbit.store.home import Home


def crontab_program(environ: Mapping[str, str]) -> str:
    """The crontab program: $ORBIT_CRONTAB when set, else `crontab` on PATH."""
    chosen = environ.get("ORBIT_CRONTAB")
    if chosen:
        if not os.access(chosen, os.X_OK):
            raise OrbitError(f"ORBIT_CRONTAB={chosen} is not an executable crontab program")
        return chosen
    found = shutil.which("crontab", path=environ.get("PATH"))
    if found is None:
        raise OrbitError(
            "crontab not found: install cron (`apt-get install cron`) or use --systemd"
        )
    return found


def line_for(
    home: Home, schedule: str, environment: Mapping[str, str], argv: list[str], mark: str
) -> str:
    """A crontab entry running `argv` with `environment` on `schedule`, output discarded,
    ending in `mark` + the home so `find`, `replace` and `remove` know it."""
    if "\n" in str(home.root):
        raise UsageError("ORBIT_HOME must not contain a line break")
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in environment.items())
    cmd = " ".join(shlex.quote(a) for a in argv)
    line = f"{schedule} {env} {cmd} >/dev/null 2>&1 {mark}{home.root}"
    return line.replace("%", "\\%")  # cron turns a bare % into a newline


def _is_ours(line: str, home: Home, mark: str) -> bool:
    return line.rstrip().endswith(f"{mark}{home.root}".replace("%", "\\%"))


def read(environ: Mapping[str, str]) -> str:
    """The user's crontab ("" when there is none)."""
    got = run_program([crontab_program(environ), "-l"], environ)
    if got.code == 0:
        return got.out
    if "no crontab" in got.err.lower():
        return ""
    raise OrbitError(f"crontab -l failed: {got.why}")


def _write(environ: Mapping[str, str], text: str) -> None:
    got = run_program([crontab_program(environ), "-"], environ, stdin=text)
    if got.code != 0:
        raise OrbitError(f"crontab - failed: {got.why}")


def find(home: Home, environ: Mapping[str, str], mark: str) -> list[str]:
    """This home's lines with `mark`."""
    return [t for t in read(environ).splitlines() if _is_ours(t, home, mark)]


def replace(home: Home, environ: Mapping[str, str], line: str, mark: str) -> bool:
    """Put `line` where this home's line with `mark` was (or at the end); False when the table
    already held exactly that."""
    lines = read(environ).splitlines()
    mine = [i for i, text in enumerate(lines) if _is_ours(text, home, mark)]
    if [lines[i] for i in mine] == [line]:
        return False
    kept = [text for i, text in enumerate(lines) if i not in mine]
    kept.insert(mine[0] if mine else len(kept), line)
    _write(environ, "\n".join(kept) + "\n")
    return True


def remove(home: Home, environ: Mapping[str, str], mark: str) -> list[str]:
    """Delete this home's lines with `mark`; the lines removed."""
    lines = read(environ).splitlines()
    removed = [text for text in lines if _is_ours(text, home, mark)]
    if removed:
        kept = [text for text in lines if not _is_ours(text, home, mark)]
        _write(environ, "\n".join(kept) + "\n" if kept else "")
    return removed


def daemon_running() -> bool:
    import psutil

    return any(p.info.get("name") in ("cron", "crond") for p in psutil.process_iter(["name"]))
