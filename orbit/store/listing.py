"""cache/listing.json: a snapshot of a whole listing, read instead of index.jsonl and every
run's status.yaml while nothing in the home changed.

Never the truth: deleting it costs one slower listing. It is valid while its *change signal*
is what it was when the listing was made:

- `index.jsonl`'s device, inode, size, mtime and ctime. Every change Orbit makes to what a
  listing shows ends with a line appended there (a status change, a new run, a tombstone of
  `orbit rm`), or replaces the file (compaction), so the size or the inode moves;
- `runs/`'s device, inode, mtime and ctime: a run directory that appears, is renamed away or
  deleted (also by hand) changes them;
- `config.yaml`'s stamp and `ORBIT_DATA`, so that the runs directory need not be computed
  (which would parse config.yaml) to know it is the one the snapshot was made from;
- the stamp of the `status.yaml` of each *watched* run (those the caller names: the active and
  the unreadable ones, whose files change most), so that a process killed between writing a
  status and appending its index line cannot leave those rows stale.

Not seen: an edit by hand inside a finished run (its status.yaml or run.yaml), and a change of a
finished run whose writer was killed between status.yaml and index.jsonl (or whose index line a
full disk refused). Those show from the next change anywhere in the home, the next listing
that reads every run (a tick looking for lost markers, `orbit web`, a lookup by name), or once
this file is deleted.

After a change, a snapshot is still the base of the next listing when `since` can tell what
moved (docs/run-directory.md, "After a change"): the lines appended to index.jsonl and the
entries of runs/; the caller reads again only the runs whose status.yaml moved.

A snapshot is written only by a listing during which the signal did not move (a listing that
repaired the index itself leaves it to the next one), and only when the signal is older than
`RACY_S`: a change within one timestamp granule of the recorded mtime would not move it.

Layout: line 1 is a JSON header `{"format": 1, "config", "runs_dir", "signal", "watch", "tail",
"sections": {name: [offset, length, crc32]}}`; the sections follow as one JSON value per line,
each at `offset` bytes after the header's newline. Written to a temporary file and renamed; a
file that is unreadable, of another format, or whose section fails its CRC is ignored.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from pathlib import Path
from typing import Any

from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.model import STATUS_YAML, stamp_of

FORMAT = 1
TAIL = 64  # bytes of index.jsonl before a snapshot's size, compared by `since`
RACY_S = 2.0  # coarser than any file system's timestamps (1 s on ext3, some NFS servers)

Stamp = list[int] | None


def path_of(home: Home, name: str = "listing") -> str:
    """The snapshot file: `cache/listing.json`, or another listing's (`name`: a path under
    cache/ without `.json`, e.g. store/grouprows.py's `groups/<key>`)."""
    return f"{home.root}/cache/{name}.json"


def file_stamp(path: str) -> Stamp:
    """[dev, inode, size, mtime_ns, ctime_ns], or None when there is no such file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def status_stamp(path: str) -> Stamp:
    """A status.yaml's stamp as index rows record it (`st`: [mtime_ns, size, inode])."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return stamp_of(st)


class Signal:
    """What a snapshot is checked against, taken before the listing it is made from."""

    def __init__(self, home: Home, runs_dir: str) -> None:
        self.taken = time.time()
        self.config = [file_stamp(str(home.config_path)), home.environ.get("ORBIT_DATA")]
        self.runs_dir = runs_dir
        self.stamps = _stamps(home, runs_dir)

    def settled(self) -> bool:
        """True when every mtime of the signal is older than RACY_S: a change from now on
        sets a later one. (Every change of an entry or of the contents sets the mtime, and
        the ctime with it; a ctime alone moves for chmod and chown, which change no row.)"""
        limit = (self.taken - RACY_S) * 1e9
        return self.stamps[0] is not None and all(s[-2] < limit for s in self.stamps if s)


def _stamps(home: Home, runs_dir: str) -> list[Stamp]:
    runs = file_stamp(runs_dir)
    if runs is not None:
        del runs[2]  # a directory's size says nothing its mtime does not
    return [runs, file_stamp(str(home.index_path))]


class Snapshot:
    """A snapshot of this home's runs directory; each section is parsed (and its CRC checked)
    on first use. `fresh`: its signal says nothing changed since it was made."""

    def __init__(self, header: dict[str, Any], body: bytes, fresh: bool) -> None:
        self._header = header
        self._body = body
        self._sections = header["sections"]
        self.fresh = fresh
        self.watch: dict[str, Stamp] = header["watch"]

    def section(self, name: str) -> Any:
        """The section's value, or None when it is missing or damaged."""
        where = self._sections.get(name)
        if not (isinstance(where, list) and len(where) == 3):
            return None
        offset, length, crc = where
        try:
            raw = self._body[offset : offset + length]
            if len(raw) != length or zlib.crc32(raw) != crc:
                return None
            return json.loads(raw)
        except (TypeError, ValueError):
            return None

    def since(self, home: Home, now: Signal) -> Since | None:
        """What changed between this snapshot and `now` (taken after it was read), when all of
        it can be told: whole lines appended to index.jsonl (its device and inode the same,
        its last bytes before the old size unchanged) and entries of runs/ (the same
        directory). None when anything else moved (a compaction, another runs directory), or
        when the index grew by more than it held: the whole listing is then as cheap, and
        compacts it. A watched run's status.yaml is the caller's to check."""
        try:
            old_runs, old_index = self._header["signal"]
            tail = bytes.fromhex(self._header["tail"])
            new_runs, new_index = now.stamps
            if self._header["runs_dir"] != now.runs_dir or old_index is None or new_index is None:
                return None
            if old_runs is None or new_runs is None or old_runs[:2] != new_runs[:2]:
                return None
            start, end = old_index[2], new_index[2]
            if old_index[:2] != new_index[:2] or end < start or end - start > start:
                return None
            with open(home.index_path, "rb") as fh:
                fh.seek(start - len(tail))
                raw = fh.read(end - start + len(tail))
        except (KeyError, TypeError, ValueError, OSError):
            return None
        if raw[: len(tail)] != tail:
            return None
        appended = raw[len(tail) :]
        if appended and not appended.endswith(b"\n"):
            return None  # an append in progress
        names = None if old_runs == new_runs else _dir_names(now.runs_dir)
        return Since(appended, names)


class Since:
    """`appended`: the bytes added to index.jsonl since a snapshot (whole lines); `names`:
    the entries of runs/ now, when it changed (None: the same entries)."""

    def __init__(self, appended: bytes, names: list[str] | None) -> None:
        self.appended = appended
        self.names = names


def _dir_names(runs_dir: str) -> list[str]:
    try:
        return [n for n in os.listdir(runs_dir) if not n.startswith(".")]
    except FileNotFoundError:
        return []


def load(home: Home, name: str = "listing") -> Snapshot | None:
    """The snapshot made for this home's settings (its `fresh` says whether its signal says
    nothing changed since), or None. Never raises: a missing, damaged or foreign file, or
    one made for another data directory, is no snapshot."""
    try:
        with open(path_of(home, name), "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    end = data.find(b"\n")
    try:
        header = json.loads(data[:end])
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            return None
        config = [file_stamp(str(home.config_path)), home.environ.get("ORBIT_DATA")]
        if header["config"] != config:
            return None  # the data directory may have moved: compute it again
        runs_dir = header["runs_dir"]
        fresh = header["signal"] == _stamps(home, runs_dir)
        if fresh:
            for run_id, stamp in header["watch"].items():
                if status_stamp(f"{runs_dir}/{run_id}/{STATUS_YAML}") != stamp:
                    fresh = False
                    break
        if not isinstance(header["sections"], dict) or not isinstance(header["watch"], dict):
            return None
        return Snapshot(header, data[end + 1 :], fresh)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def save(
    home: Home,
    before: Signal,
    watch: dict[str, Stamp],
    sections: dict[str, Any],
    name: str = "listing",
) -> bool:
    """Write a snapshot of a listing made after `before` was taken; True when written.

    `watch` maps run ids to the `status.yaml` stamp their row was made from (None: no such
    file). Nothing is written when the signal moved since `before` (the listing may have missed
    that change) or is not settled. A write the disk refuses is logged, never raised.
    """
    if not before.settled():
        return False
    tail = _tail(home, before.stamps[1])  # read before the signal is checked again
    if tail is None or _stamps(home, before.runs_dir) != before.stamps:
        return False
    header: dict[str, Any] = {
        "format": FORMAT,
        "config": before.config,
        "runs_dir": before.runs_dir,
        "signal": before.stamps,
        "watch": watch,
        "tail": tail.hex(),
        "sections": {},
    }
    body = bytearray()
    for section, value in sections.items():
        raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        header["sections"][section] = [len(body), len(raw), zlib.crc32(raw)]
        body += raw
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    path = Path(path_of(home, name))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, head + bytes(body), durable=False)
    except OSError as exc:
        import logging  # only here: the listing that reads a snapshot never logs

        logging.getLogger(__name__).debug("listing snapshot not written: %s", exc)
        return False
    return True


def _tail(home: Home, stamp: Stamp) -> bytes | None:
    """The last TAIL bytes of index.jsonl before the size in its `stamp` (what `since` checks:
    a file of the same inode number that is not the same file has other bytes there)."""
    if stamp is None:
        return b""  # no index yet
    size = stamp[2]
    try:
        with open(home.index_path, "rb") as fh:
            fh.seek(max(0, size - TAIL))
            raw = fh.read(min(size, TAIL))
    except OSError:
        return None
    return raw if len(raw) == min(size, TAIL) else None
