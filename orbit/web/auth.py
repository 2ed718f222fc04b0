"""Who may use the web view: the master token, browser sessions and one-time login codes.

- The master token is ORBIT_HOME/web-token (0600). Scripts send it as `X-Orbit-Token`. The
  server re-reads the file whenever its (inode, mtime, size) changes, so a new token (`orbit web
  --rotate`, or the file deleted and made again by `orbit web`) takes effect at once; while the
  file is missing no token is valid.
- A browser holds a session: a random id in the cookie `orbit_<port>`, never the master token.
  The server keeps only sha256(id) in runtime/web-sessions.json (0600), so sessions survive a
  restart and can be revoked (logout; a new master token revokes them all). A session id is
  never accepted as `X-Orbit-Token`.
- Browsers send a cookie of 127.0.0.1 to every port of 127.0.0.1, so browsers are served under
  a secret host name of this home, `o-<random>.localhost` (ORBIT_HOME/web-host, 0600), which
  browsers resolve to the loopback themselves: the session cookie is host-only on that name, and
  only a server a browser reaches by that name (this one) ever receives it.
- Forms carry a CSRF token derived from the session (HMAC), never the master token.
- `orbit web` prints a login URL with a one-time code (a file under runtime/web-login/, valid
  for LOGIN_CODE_TTL_S); /login exchanges it for a session, so the URL left in a browser's
  history is useless.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from orbit.store.files import atomic_write
from orbit.store.home import Home

SESSION_MAX_AGE_S = 30 * 86400
LOGIN_CODE_TTL_S = 600
SESSIONS_MAX = 1000  # the oldest sessions are dropped beyond this


SECRET_HOST = re.compile(r"o-[0-9a-f]{20}\.localhost")


def token_path(home: Home) -> Path:
    return home.root / "web-token"


def host_path(home: Home) -> Path:
    return home.root / "web-host"


def sessions_path(home: Home) -> Path:
    return home.runtime_dir / "web-sessions.json"


def codes_dir(home: Home) -> Path:
    return home.runtime_dir / "web-login"


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    """(inode, mtime, size) of `path`, which changes when the file is rewritten; None while it
    is missing."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def equal(sent: str | None, expected: str | None) -> bool:
    """Constant-time comparison that is False (never an error) for non-ASCII input."""
    if not sent or not expected or not sent.isascii():
        return False
    return hmac.compare_digest(sent.encode(), expected.encode())


def write_token(home: Home, token: str | None = None) -> str:
    """A new master token (`token`, or a random one) in ORBIT_HOME/web-token (0600), replacing
    the old one."""
    path = token_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    if token is None:
        token = secrets.token_urlsafe(32)
    atomic_write(path, (token + "\n").encode(), mode=0o600)
    return token


def load_or_create_token(home: Home) -> str:
    """The master token in ORBIT_HOME/web-token (mode 0600), made on first use."""
    try:
        token = token_path(home).read_text().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    return write_token(home)


def write_host(home: Home) -> str:
    """A new secret host name (80 random bits) in ORBIT_HOME/web-host (0600)."""
    name = f"o-{secrets.token_hex(10)}.localhost"
    path = host_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (name + "\n").encode(), mode=0o600)
    return name


def read_host(home: Home) -> str | None:
    """The secret host name of web-host; None while it is missing or not one Orbit made."""
    try:
        name = host_path(home).read_text().strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return name if SECRET_HOST.fullmatch(name) else None


def load_or_create_host(home: Home) -> str:
    """The secret host name browsers use (`o-<20 hex>.localhost`), made on first use."""
    return read_host(home) or write_host(home)


def rotate(home: Home) -> str:
    """A new master token and host name; every session and unused login code is revoked."""
    token = write_token(home)
    write_host(home)
    revoke_all(home)
    return token


def revoke_all(home: Home) -> None:
    for path in (sessions_path(home), *_code_files(home)):
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def _code_files(home: Home) -> list[Path]:
    try:
        return list(codes_dir(home).iterdir())
    except FileNotFoundError:
        return []


def new_login_code(home: Home, token: str) -> str:
    """A one-time login code for the current token (a 0600 file under runtime/web-login/)."""
    folder = codes_dir(home)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    now = time.time()
    for old in _code_files(home):  # expired codes are swept by whoever makes a new one
        try:
            if old.stat().st_mtime < now - LOGIN_CODE_TTL_S:
                old.unlink()
        except FileNotFoundError:
            pass
    code = secrets.token_urlsafe(24)
    body = json.dumps({"token_id": _sha(token)[:16], "created": now}) + "\n"
    atomic_write(folder / _sha(code), body.encode(), durable=False, mode=0o600)
    return code


class Auth:
    """The server's view of the token file, the sessions and the login codes (thread-safe)."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self._lock = threading.Lock()
        self._token_key: tuple[int, int, int] | None = None
        self._token: str | None = None
        self._sessions_key: tuple[int, int, int] | None = None
        self._sessions: dict[str, dict[str, Any]] = {}
        self._host_key: tuple[int, int, int] | None = None
        self._host: str | None = None

    # --- the master token ----------------------------------------------------------------
    def token(self) -> str | None:
        """The current master token, re-read when the file changed; None while it is missing."""
        path = token_path(self.home)
        with self._lock:
            key = _stat_key(path)
            if key is None:
                self._token_key, self._token = None, None
                return None
            if key != self._token_key:
                try:
                    self._token = path.read_text().strip() or None
                except FileNotFoundError:
                    self._token = None
                self._token_key = key
            return self._token

    def secret_host(self) -> str | None:
        """The secret host name, re-read when web-host changed; None while it is missing."""
        with self._lock:
            key = _stat_key(host_path(self.home))
            if key != self._host_key:
                self._host = read_host(self.home) if key else None
                self._host_key = key
            return self._host

    def token_ok(self, sent: str | None) -> bool:
        return bool(sent) and equal(sent, self.token())  # no stat when nothing was sent

    # --- sessions ------------------------------------------------------------------------
    def _load_sessions(self) -> dict[str, dict[str, Any]]:
        path = sessions_path(self.home)
        key = _stat_key(path)
        if key is None:
            self._sessions_key, self._sessions = None, {}
            return self._sessions
        if key != self._sessions_key:
            try:
                data = json.loads(path.read_text())
                sessions = data.get("sessions") if isinstance(data, dict) else None
                self._sessions = sessions if isinstance(sessions, dict) else {}
            except (OSError, ValueError):
                self._sessions = {}
            self._sessions_key = key
        return self._sessions

    def _save_sessions(self, sessions: dict[str, dict[str, Any]]) -> None:
        if len(sessions) > SESSIONS_MAX:
            keep = sorted(sessions.items(), key=lambda kv: kv[1].get("created", 0))
            sessions = dict(keep[-SESSIONS_MAX:])
        data = json.dumps({"format": 1, "sessions": sessions}) + "\n"
        atomic_write(sessions_path(self.home), data.encode(), durable=False, mode=0o600)
        self._sessions_key, self._sessions = None, sessions

    def new_session(self) -> str:
        token = self.token()
        if token is None:
            raise LookupError("no web-token")
        sid = secrets.token_urlsafe(32)
        with self._lock:
            sessions = dict(self._load_sessions())
            now = time.time()
            sessions = {k: v for k, v in sessions.items() if v.get("expires", 0) > now}
            sessions[_sha(sid)] = {
                "token_id": _sha(token)[:16],
                "created": now,
                "expires": now + SESSION_MAX_AGE_S,
            }
            self._save_sessions(sessions)
        return sid

    def session_ok(self, sid: str | None) -> bool:
        if not sid or not sid.isascii():
            return False
        token = self.token()
        if token is None:
            return False
        with self._lock:
            entry = self._load_sessions().get(_sha(sid))
        return (
            isinstance(entry, dict)
            and entry.get("token_id") == _sha(token)[:16]
            and float(entry.get("expires", 0)) > time.time()
        )

    def revoke(self, sid: str | None) -> None:
        if not sid or not sid.isascii():
            return
        with self._lock:
            sessions = dict(self._load_sessions())
            if sessions.pop(_sha(sid), None) is not None:
                self._save_sessions(sessions)

    def csrf(self, sid: str) -> str:
        """The form token of a session: an HMAC of its id, useless as a login."""
        return hmac.new(sid.encode(), b"orbit-web-csrf", hashlib.sha256).hexdigest()

    # --- one-time login codes ------------------------------------------------------------
    def redeem(self, code: str | None) -> bool:
        """True once for a valid, unexpired code of the current token (it is used up)."""
        return self._code_ok(code, use=True)

    def code_ok(self, code: str | None) -> bool:
        """Whether `code` is a valid, unexpired code of the current token; it stays unused."""
        return self._code_ok(code, use=False)

    def _code_ok(self, code: str | None, use: bool) -> bool:
        if not code or not code.isascii() or not code.replace("-", "").replace("_", "").isalnum():
            return False
        token = self.token()
        path = codes_dir(self.home) / _sha(code)
        try:
            data = json.loads(path.read_text())
            if use:
                os.unlink(path)  # whoever unlinks it first has used it
        except (OSError, ValueError):
            return False
        if not isinstance(data, dict) or token is None:
            return False
        fresh = float(data.get("created", 0)) > time.time() - LOGIN_CODE_TTL_S
        return fresh and data.get("token_id") == _sha(token)[:16]
