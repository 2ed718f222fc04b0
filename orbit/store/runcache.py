"""cache/tick-runs.jsonl: the tick's parsed run.yaml and status.yaml of the runs it reads.

A tick with many queued runs read every one of them on every pass, and parsing YAML costs
about half a millisecond a file: with a hundred queued runs, a shepherd's tick at the end of
each run spent more CPU on parsing than on anything else. This cache keeps what each run's two
files parsed to, keyed by run id and checked per file by one stat: `[inode, size, mtime_ns,
ctime_ns]`. Orbit replaces these files atomically (a new inode for every write); an edit by hand
changes the size or the times. A file whose stat differs is parsed from disk, as without the
cache.

Never the truth: a missing, damaged or foreign cache only makes the tick parse every run. It is
read and written by the tick alone, under the scheduler lock, so ticks never race on it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Iterable
from pathlib import Path

from orbit.errors import CorruptError, NotFoundError
from orbit.store.files import atomic_write
from orbit.store.model import RUN_YAML, STATUS_YAML, Run
from orbit.store.runs import Broken, RunStore

log = logging.getLogger(__name__)

FORMAT = 1
# A file changed within one timestamp granule of its recorded mtime would keep the same mtime:
# such a file is parsed again next time, not recorded (Git's "racily clean" entries). The kernel's
# clock ticks every few milliseconds; some file systems keep whole seconds.
RACY_FINE_NS = 100_000_000
RACY_COARSE_NS = 2_000_000_000

Stamp = list[int]


def cache_path(store: RunStore) -> str:
    return f"{store.home.root}/cache/tick-runs.jsonl"


class RunCache:
    """One tick pass's use of the cache: read once, `load_many` as often as the pass needs,
    `save` at its end, which keeps exactly the runs this pass asked for and could record (a run
    no longer asked for, finished long ago or removed, leaves it).

    Each run is kept as its line of JSON text: what a caller does with the dicts it was given
    never reaches the file.
    """

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.path = cache_path(store)
        self.runs = store.home.runs_dir  # once: with a data directory, each call resolves it
        self.runs_dir = str(self.runs)
        self.old = _read(self.path, self.runs_dir)
        self.new: dict[str, str] = {}

    def load_many(self, ids: Iterable[str]) -> list[Run | Broken]:
        """`store.load_many(ids)`, taking each run whose two files are unchanged from the cache."""
        out: list[Run | Broken] = []
        for run_id in ids:
            base = f"{self.runs_dir}/{run_id}"
            spec_st, status_st = _stamp(f"{base}/{RUN_YAML}"), _stamp(f"{base}/{STATUS_YAML}")
            line = self.old.get(run_id)
            run = _from_line(self.runs / run_id, run_id, line, spec_st, status_st)
            if run is not None and line is not None:
                self.new[run_id] = line
                out.append(run)
                continue
            try:
                run = self.store.load(run_id)  # stamps taken before the read: a later write shows
            except (CorruptError, NotFoundError) as exc:
                out.append(self.store.broken(run_id, str(exc)))
                continue
            out.append(run)
            if spec_st is not None and status_st is not None:
                recorded = _line(run, spec_st, status_st)
                if recorded is not None:
                    self.new[run_id] = recorded
        return out

    def save(self) -> None:
        """Replace the file when what it should hold changed; a disk that refuses costs speed,
        never a tick."""
        if self.new == self.old:
            return
        header = json.dumps({"format": FORMAT, "runs_dir": self.runs_dir})
        text = "".join(f"{line}\n" for line in (header, *self.new.values()))
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            atomic_write(Path(self.path), text.encode(), durable=False)
        except OSError as exc:
            log.debug("tick cache not written: %s", exc)
        self.old = dict(self.new)


def _from_line(
    run_dir: Path, run_id: str, line: str | None, spec_st: Stamp | None, status_st: Stamp | None
) -> Run | None:
    """The run as cached, when both its files still have the recorded stamps."""
    if line is None or spec_st is None or status_st is None:
        return None
    try:
        cached_id, run_stamp, stamp, spec, status = json.loads(line)
    except (ValueError, TypeError):
        return None
    if cached_id != run_id or run_stamp != spec_st or stamp != status_st:
        return None
    if not isinstance(spec, dict) or not isinstance(status, dict):
        return None
    ino, size, mtime_ns = status_st[0], status_st[1], status_st[2]
    return Run(run_id, run_dir, spec, status, [mtime_ns, size, ino])


def _line(run: Run, spec_st: Stamp, status_st: Stamp) -> str | None:
    """The line to record of a run just parsed; None when it must be parsed again next time: a
    file changed too recently to trust its stamp, or a value JSON would not give back as the
    YAML load gave it (a date, a non-string key, NaN…)."""
    now_ns = time.time_ns()
    if _racy(spec_st, now_ns) or _racy(status_st, now_ns):
        return None
    if not (exact(run.spec) and exact(run.status)):
        return None
    entry = [run.id, spec_st, status_st, run.spec, run.status]
    # ASCII: no line separator of any kind, and a lone surrogate is written as an escape.
    return json.dumps(entry, separators=(",", ":"), allow_nan=False)


def exact(value: object) -> bool:
    """True when a JSON round trip gives back `value` with the same types and values."""
    kind = type(value)
    if isinstance(value, dict) and kind is dict:
        return all(type(k) is str and exact(v) for k, v in value.items())
    if isinstance(value, list) and kind is list:
        return all(exact(v) for v in value)
    if isinstance(value, float) and kind is float:
        return math.isfinite(value)
    return value is None or kind in (str, int, bool)


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _racy(stamp: Stamp, now_ns: int) -> bool:
    latest = max(stamp[2], stamp[3])
    return latest >= now_ns - (RACY_FINE_NS if stamp[2] % 1_000_000_000 else RACY_COARSE_NS)


def _read(path: str, runs_dir: str) -> dict[str, str]:
    """Run id → its line; empty when the file is missing, damaged, of another format, or was
    made for another runs directory (the data directory moved). A damaged line is checked (and
    ignored) when its run is asked for."""
    try:
        with open(path, encoding="utf-8") as f:
            header, *lines = f.read().split("\n")
        data = json.loads(header)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    if data.get("runs_dir") != runs_dir:
        return {}
    runs: dict[str, str] = {}
    for line in lines:
        # The id is the line's first item: `["12",…`; the rest is read only for a run asked for.
        end = line.find('"', 2)
        if line.startswith('["') and end > 2:
            runs[line[2:end]] = line
    return runs
