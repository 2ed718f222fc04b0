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


def find_files(folder: int | Path, suffix: str, depth: int, limit: int) -> list[tuple[str, int]]:
    """(path relative to `folder`, size) of the regular files named `*suffix` in `folder` and
    its subfolders down to `depth` levels, by path, at most `limit`. Links are neither
    followed nor listed; each subfolder is opened beneath its parent with O_NOFOLLOW, so a
    folder swapped for a link meanwhile is skipped (a descriptor stays the caller's)."""
    found: list[tuple[str, int]] = []
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        top = os.dup(folder) if isinstance(folder, int) else os.open(folder, flags)
    except OSError:
        return found
    stack = [(top, "", 0)]
    while stack:
        fd, prefix, level = stack.pop()
        if len(found) >= SCAN_MAX:  # a folder of countless files: what was found so far
            os.close(fd)
            continue
        try:
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
            for e in entries:
                if e.is_symlink():
                    continue
                if e.is_dir(follow_symlinks=False) and level < depth:
                    try:
                        sub = os.open(e.name, flags | os.O_NOFOLLOW, dir_fd=fd)
                    except OSError:
                        continue
                    stack.append((sub, f"{prefix}{e.name}/", level + 1))
                elif e.name.endswith(suffix) and e.is_file(follow_symlinks=False):
                    found.append((prefix + e.name, e.stat(follow_symlinks=False).st_size))
        except OSError:
            pass
        finally:
            os.close(fd)
    found.sort()
    return found[:limit]
