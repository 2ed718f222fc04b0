"""Opening a path inside a folder that someone else writes, without ever leaving it.

A run's container writes its output/ (and session/) while Orbit reads them, so a path that was
checked may be a symlink a moment later. Every path from outside (a web request, a primary
asking a node) is therefore opened first and checked after, and then read only through that
descriptor (`open_beneath`): with openat2's RESOLVE_BENEATH where the kernel has it (symlinks
that stay inside the folder work), else a walk one component at a time with O_NOFOLLOW (every
symlink is refused). Used by the web view (web/runfiles.py) and by a node serving a primary
(nodes/agent.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

from orbit.errors import NotFoundError, OrbitError
from orbit.store.dirlist import control_free


class Refused(OrbitError):
    """A request path that leaves its folder (`..`, absolute, or a symlink out)."""


_SYS_OPENAT2 = 437  # the same number on every Linux architecture
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_openat2_state: dict[str, Any] = {"usable": None}


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


def _openat2(dir_fd: int, rel: str, flags: int) -> int | None:
    """openat2(dir_fd, rel, RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS); None without the syscall."""
    if _openat2_state["usable"] is False:
        return None
    libc = _openat2_state.get("libc")
    if libc is None:
        try:
            libc = _openat2_state["libc"] = ctypes.CDLL(None, use_errno=True)
        except OSError:
            _openat2_state["usable"] = False
            return None
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    for _ in range(8):  # EAGAIN: a rename raced with the lookup; the kernel asks to retry
        fd = int(
            libc.syscall(
                _SYS_OPENAT2,
                ctypes.c_int(dir_fd),
                ctypes.c_char_p(os.fsencode(rel)),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        )
        if fd >= 0:
            _openat2_state["usable"] = True
            return fd
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EPERM) and _openat2_state["usable"] is None:
            _openat2_state["usable"] = False  # an old kernel, or seccomp forbids it
            return None
        if err != errno.EAGAIN:
            raise OSError(err, os.strerror(err))
    raise Refused("refused path: it kept changing while it was opened")


def _walk(dir_fd: int, parts: list[str], flags: int) -> int:
    """Open `parts` under dir_fd one component at a time; no component may be a symlink."""
    cur = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=cur)
            os.close(cur)
            cur = nxt
        fd = os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=cur)
    finally:
        os.close(cur)
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused("refused path: it is a symbolic link")
    return fd


def check_rel(rel: str) -> list[str]:
    """The parts of a relative request path; Refused for a NUL, a backslash, an absolute path
    or a `..` (checked before the path is used at all, here or on another node)."""
    if "\x00" in rel or "\\" in rel:
        raise Refused("refused path: it has a NUL or a backslash")
    if not control_free(rel):  # listed as not servable (store/dirlist.py)
        raise Refused("refused path: its name has a control character")
    if rel.startswith("/"):
        raise Refused("refused path: it is absolute")
    parts = [p for p in PurePosixPath(rel).parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise Refused("refused path: it leaves the run directory")
    return parts


def open_beneath(dir_fd: int, rel: str) -> int:
    """An O_PATH descriptor of `rel` under the folder `dir_fd`, opened without ever leaving it
    (raises Refused for `..`, absolute paths and symlinks out, NotFoundError when missing).
    An empty `rel` is the folder itself."""
    parts = check_rel(rel)
    if not parts:
        return os.dup(dir_fd)
    flags = os.O_PATH | os.O_CLOEXEC
    try:
        fd = _openat2(dir_fd, "/".join(parts), flags)
        if fd is None:
            fd = _walk(dir_fd, parts, flags)
    except (FileNotFoundError, NotADirectoryError):
        raise NotFoundError(f"no file {rel!r}") from None
    except OSError as exc:
        if exc.errno in (errno.EXDEV, errno.ELOOP, errno.ENOTDIR):
            raise Refused(f"refused path {rel!r}: it points outside the run directory") from None
        raise Refused(f"refused path {rel!r}: {os.strerror(exc.errno or 0)}") from None
    return fd


@contextlib.contextmanager
def opened(run_dir: Path, area: str, rel: str) -> Iterator[tuple[int, os.stat_result]]:
    """(O_PATH descriptor, its stat) of `area/rel` in a run: `area` must be a folder of the run
    and `rel` must stay inside it (see open_beneath). Closed on exit."""
    try:
        run_fd = os.open(run_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFoundError(f"no folder {area}") from None
    fds = [run_fd]
    try:
        area_fd = open_beneath(run_fd, area)
        fds.append(area_fd)
        if not stat.S_ISDIR(os.fstat(area_fd).st_mode):
            raise Refused(f"refused path {area!r}: not a folder")
        fd = open_beneath(area_fd, rel)
        fds.append(fd)
        yield fd, os.fstat(fd)
    finally:
        for fd in fds:
            os.close(fd)


def reopen(path_fd: int, flags: int = os.O_RDONLY) -> int:
    """A readable descriptor of the same inode as the O_PATH `path_fd` (no path lookup)."""
    return os.open(f"/proc/self/fd/{path_fd}", flags | os.O_CLOEXEC | os.O_NOCTTY)


def read_file(path_fd: int) -> IO[bytes]:
    """The regular file behind an O_PATH descriptor, opened for reading."""
    return os.fdopen(reopen(path_fd), "rb")
