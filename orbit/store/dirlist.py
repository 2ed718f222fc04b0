"""One folder's entries without following links: the web's listings of `output/` and
`session/` and the `output` files of `orbit show --json`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SCAN_MAX = 20000  # entries of one folder looked at; a listing says when there are more


@dataclass
class Entry:
    name: str
    is_dir: bool
    size: int  # bytes of a regular file; 0 for a folder or a link
    link: bool

    @property
    def kind(self) -> str:
        return "link" if self.link else "dir" if self.is_dir else "file"


def scan_dir(folder: int | Path, limit: int) -> tuple[list[Entry], int]:
    """The first `limit` entries of `folder` (a path, or a descriptor that stays the caller's),
    folders first, by name, and how many there are (counted up to SCAN_MAX)."""
    entries = []
    with os.scandir(folder if isinstance(folder, int) else str(folder)) as it:
        for n, e in enumerate(it):
            if n >= SCAN_MAX:
                break
            try:
                link = e.is_symlink()
                is_dir = e.is_dir(follow_symlinks=False)
                size = 0 if is_dir or link else e.stat(follow_symlinks=False).st_size
            except OSError:
                link, is_dir, size = False, False, 0
            entries.append(Entry(e.name, is_dir, size, link))
    entries.sort(key=lambda e: (not e.is_dir, e.name))
    return entries[:limit], len(entries)
