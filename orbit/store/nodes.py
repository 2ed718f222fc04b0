"""The other machines this home places runs on, and what was last learnt of each.

    nodes.yaml            the registry (format: 1): per name its URL, the remote home and the
                          command that runs Orbit there; written by `orbit node add/rm` only
    nodes/<name>.json     the node's last state: when it was read, reachable or not (and since
                          when not), its Orbit version, executor, pool and datasets; written by
                          whoever reached the node last (a probe, a mirror, `orbit node ls`)

A node is reached with the user's own `ssh` (docs/nodes.md). This module only reads and writes
these files; the SSH side is orbit/nodes/.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from orbit.errors import ConflictError, UsageError
from orbit.record import Frozen, Record
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.model import now_iso, parse_iso
from orbit.store.profiles import Malformed, ProfileStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KINDS = ("ssh", "slurm")
# A node's state older than this is read again before runs are placed on it.
FRESH_S = 15.0


class Node(Record):
    """One registered node: how to reach it and run Orbit there."""

    __slots__ = (
        "account",
        "added_at",
        "home",
        "host",
        "kind",
        "name",
        "orbit",
        "partition",
        "port",
        "user",
    )
    name: str
    kind: str  # ssh or slurm
    host: str
    user: str | None
    port: int | None
    home: str | None  # ORBIT_HOME there; None: the node's default
    orbit: str  # the command that runs Orbit there
    partition: str | None
    account: str | None
    added_at: str | None

    def __init__(
        self,
        name: str,
        kind: str,
        host: str,
        *,
        user: str | None = None,
        port: int | None = None,
        home: str | None = None,
        orbit: str = "orbit",
        partition: str | None = None,
        account: str | None = None,
        added_at: str | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.host = host
        self.user = user
        self.port = port
        self.home = home
        self.orbit = orbit
        self.partition = partition
        self.account = account
        self.added_at = added_at

    @property
    def url(self) -> str:
        who = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address
        return f"{self.kind}://{who}{host}{port}"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"url": self.url, "home": self.home, "orbit": self.orbit}
        if self.kind == "slurm":
            out["partition"] = self.partition
            out["account"] = self.account
        out["added_at"] = self.added_at
        return out


def local_name(home: Home) -> str:
    """This machine's node name: ORBIT_NODE, else the host name up to its first dot."""
    return home.environ.get("ORBIT_NODE") or socket.gethostname().split(".")[0]


def parse_url(name: str, url: str, **fields: Any) -> Node:
    """A node from `ssh://[user@]host[:port]` or `slurm://[user@]login-host[:port]`."""
    parts = urlsplit(url)
    if parts.scheme not in KINDS:
        raise UsageError(f"node URL must start with ssh:// or slurm://, got {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"bad port in node URL {url!r}") from None
    if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.password:
        raise UsageError(f"node URL must be {parts.scheme}://[user@]host[:port], got {url!r}")
    if parts.hostname.startswith("-") or (parts.username or "").startswith("-"):
        # ssh would read it as one of its options (`-oProxyCommand=…` runs a command here)
        raise UsageError(f"bad host or user in node URL {url!r}: it starts with '-'")
    return Node(
        STORE.check_name(name),
        parts.scheme,
        parts.hostname,
        user=parts.username,
        port=port,
        **fields,
    )


def home_id(home: Home) -> str:
    """This home's own random id (nodes/home.id, made once): what the runs it sends name as
    their origin, so that no other home, nor this one wiped and made again at the same path,
    is ever taken for it by a node."""
    path = home.root / "nodes" / "home.id"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = os.urandom(8).hex()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()  # another process made it first
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return value


def probe_lock(home: Home, name: str) -> Path:
    """Held by the node's probe for its life: one probe per node at a time."""
    return home.locks_dir / f"node-{name}.probe.lock"


def state_path(home: Home, name: str) -> Path:
    return home.root / "nodes" / f"{name}.json"


def _parse(name: str, entry: dict[str, Any]) -> Node:
    url = entry.get("url")
    if not isinstance(url, str):
        raise Malformed("has no `url`")
    fields = {k: entry.get(k) for k in ("home", "partition", "account", "added_at")}
    node = parse_url(name, url, **fields)
    node.orbit = str(entry.get("orbit") or "orbit")
    return node


STORE: ProfileStore[Node] = ProfileStore(
    file="nodes.yaml",
    kind="node",
    command="orbit node",
    parse=_parse,
    dump=Node.as_dict,
    sort=False,  # `orbit node ls` lists them in the order they were added
    stamp="added_at",
    longest=63,
    add_usage="orbit node add NAME ssh://[user@]host",
)
registry_path, load, get = STORE.path, STORE.load, STORE.get


def check_new(home: Home, name: str, *, replace: bool = False) -> None:
    """What `add` refuses, said before the node is reached: this machine's own name, and
    (unless `replace`) a name that is taken."""
    _not_this_machine(home, name)
    if not replace and name in load(home):
        raise STORE.conflict(name)


def _not_this_machine(home: Home, name: str) -> None:
    if name == local_name(home):
        raise ConflictError(f"{name!r} is this machine's own node name (ORBIT_NODE)")


def add(home: Home, node: Node, *, replace: bool = False) -> Node:
    _not_this_machine(home, node.name)
    return STORE.add(home, node, replace=replace)  # a taken name is refused under the lock


def remove(home: Home, name: str) -> Node:
    """Forget the node, and what was last learnt of it."""
    node = STORE.remove(home, name)
    state_path(home, name).unlink(missing_ok=True)
    return node


class NodeState(Frozen):
    """What was last learnt of a node (nodes/<name>.json)."""

    __slots__ = ("at", "error", "info", "ok", "since")
    at: datetime | None
    ok: bool
    info: dict[str, Any]
    error: str | None
    since: datetime | None

    def __init__(
        self,
        at: datetime | None,
        ok: bool,
        info: dict[str, Any] | None = None,
        error: str | None = None,
        since: datetime | None = None,
    ) -> None:
        self._init(at=at, ok=ok, info=info or {}, error=error, since=since)

    def age_s(self, now: datetime) -> float:
        return (now - self.at).total_seconds() if self.at else float("inf")

    def fresh(self, now: datetime) -> bool:
        return 0 <= self.age_s(now) < FRESH_S


def read_state(home: Home, name: str) -> NodeState | None:
    """The node's last state; None when never read, or when the file is damaged (it is only a
    cache: the next probe writes it again)."""
    try:
        doc = json.loads(state_path(home, name).read_bytes())
        return NodeState(
            parse_iso(doc["at"]),
            bool(doc["ok"]),
            doc.get("info") if isinstance(doc.get("info"), dict) else {},
            doc.get("error"),
            parse_iso(doc.get("since")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_state(
    home: Home, name: str, *, info: dict[str, Any] | None = None, error: str | None = None
) -> NodeState:
    """Record a node as reached now (`info`, its answer) or not (`error`). An unreachable node
    keeps the time it was first found so (`since`) and the last info it gave."""
    now = now_iso()
    previous = read_state(home, name)
    doc: dict[str, Any] = {"at": now, "ok": error is None}
    if error is None:
        doc["info"] = info or {}
    else:
        doc["error"] = error
        doc["info"] = previous.info if previous else {}
        since = previous.since if previous is not None and not previous.ok else None
        doc["since"] = since.isoformat() if since else now
    path = state_path(home, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(doc).encode(), durable=False)
    return NodeState(parse_iso(now), error is None, doc["info"], error, parse_iso(doc.get("since")))
