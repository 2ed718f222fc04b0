"""One folder's entries without following links: the web's listings of `output/` and
`session/` and the `output` files of `orbit show --json`."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

SCAN_MAX = 20000  # entries of one folder looked at; a listing says when there are more


SPECIAL = {
    stat.S_IFIFO: "FIFO",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}


def special_kind(mode: int) -> str:
    """ "FIFO", "socket", "character device" or "block device"; "" for a file, folder or link.
    A container (with `--root`, CAP_MKNOD) can make real device nodes of the host in output/:
    nothing reads these."""
    return SPECIAL.get(stat.S_IFMT(mode), "")


def control_free(name: str) -> bool:
    """No control character in `name` (a newline, a tab, an escape …): such a name cannot be
    a URL path the web serves, nor safely a header or a terminal line."""
    return not any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)


@dataclass
class Entry:
    name: str
    is_dir: bool
    size: int  # bytes of a regular file; 0 for a folder, a link or a special file
    link: bool
    special: str = ""  # special_kind: a FIFO, socket or device node is listed, never read

    @property
    def kind(self) -> str:
        return self.special or ("link" if self.link else "dir" if self.is_dir else "file")

    @property
    def label(self) -> str:
        """The name as shown: control characters as escapes (`new\\nline.txt`)."""
        if control_free(self.name):
            return self.name
        return "".join(
            c if control_free(c) else c.encode("unicode_escape").decode() for c in self.name
        )

    @property
    def note(self) -> str:
        """Why the web does not open it ("" when it does)."""
        if self.special:
            return f"{self.special}, not served"
        return "" if control_free(self.name) else "a control character in its name, not served"

    @property
    def servable(self) -> bool:
        """Whether the web can open it: no special file, and a name without control characters."""
        return not self.special and control_free(self.name)


def scan_dir(folder: int | Path, limit: int) -> tuple[list[Entry], int]:
    """The first `limit` entries of `folder` (a path, or a descriptor that stays the caller's),
    folders first, by name, and how many there are (counted up to SCAN_MAX)."""
    entries = []
    with os.scandir(folder if isinstance(folder, int) else str(folder)) as it:
        for n, e in enumerate(it):
            if n >= SCAN_MAX:
                break
            try:
                st = e.stat(follow_symlinks=False)
                link, is_dir = stat.S_ISLNK(st.st_mode), stat.S_ISDIR(st.st_mode)
                special = special_kind(st.st_mode)
                size = st.st_size if stat.S_ISREG(st.st_mode) else 0
            except OSError:
                link, is_dir, size, special = False, False, 0, ""
            entries.append(Entry(e.name, is_dir, size, link, special))
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
