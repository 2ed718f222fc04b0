"""One bot per app on this machine, whatever the home or the user: a lock per app id in
LOCK_DIR, held by the bot for its life (the kernel drops it when the bot dies).

Why /tmp/orbit-feishu/: the lock must be seen by every user of the machine and by every home,
so it cannot live in a home or under a user's runtime directory; /tmp is the one directory
all users share (XDG_RUNTIME_DIR and $TMPDIR can be per user). The directory is made 1777
(world-writable and sticky, as /tmp itself), so a user can neither remove nor replace another
user's lock file; a lock file is made 0666 so that whoever holds it can write their name in
it. A directory there that is not sticky and not this user's is refused (someone else could
swap the files). flock(2) locks work on read-only descriptors too, so a file another user
made 0644 still locks. Not covered: other machines (the binding tags of lark.py are), other
containers or a systemd unit with PrivateTmp= (a /tmp of their own), and a local user who
holds the lock on purpose to keep a bot down (any user of a shared /tmp can).
"""

from __future__ import annotations

import errno
import fcntl
import getpass
import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

from orbit.errors import ConflictError, OrbitError
from orbit.store.model import now_iso

LOCK_DIR = Path("/tmp/orbit-feishu")


class MachineLock:
    """The held lock of one app id: `close()` (or the process's end) gives it up."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _lock_dir(where: Path) -> Path:
    try:
        os.mkdir(where, 0o1777)
        os.chmod(where, 0o1777)  # less no umask: every user makes their locks here
    except FileExistsError:
        pass
    st = os.lstat(where)
    if not stat.S_ISDIR(st.st_mode):
        raise OrbitError(f"{where} is not a directory: remove it (the bots' machine locks)")
    if st.st_uid != os.getuid() and not (st.st_mode & stat.S_ISVTX):
        raise OrbitError(f"{where} belongs to uid {st.st_uid} and is not sticky: remove it")
    return where


def holder_text(info: dict[str, Any]) -> str:
    who = f"{info.get('user', '?')}@{info.get('host', '?')}"
    return (
        f"the bot {info.get('name', '?')} of ORBIT_HOME={info.get('home', '?')} ({who}, pid "
        f"{info.get('pid', '?')}, since {info.get('since', '?')})"
    )


def take(app_id: str, home_root: str, name: str, where: Path = LOCK_DIR) -> MachineLock:
    """Hold this machine's lock of `app_id`, noting this bot in it; a ConflictError naming
    the holder when another process holds it."""
    path = _lock_dir(where) / f"{app_id}.lock"
    flags = os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_RDWR, 0o666)
    except PermissionError:
        fd = os.open(path, flags | os.O_RDONLY)
    try:
        if os.fstat(fd).st_uid == os.getuid():
            os.fchmod(fd, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            try:
                info = json.loads(os.pread(fd, 4096, 0) or b"{}")
            except ValueError:
                info = {}
            other = holder_text(info) if isinstance(info, dict) and info else "another process"
            raise ConflictError(
                f"app {app_id} is already bound on this machine by {other}: one bot per app "
                f"(lock {path})"
            ) from None
        info = {
            "app_id": app_id,
            "home": home_root,
            "name": name,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "user": getpass.getuser(),
            "since": now_iso(),
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
        except OSError:
            pass  # a file another user made read-only: locked, without our name in it
    except BaseException:
        os.close(fd)
        raise
    return MachineLock(fd, path)
