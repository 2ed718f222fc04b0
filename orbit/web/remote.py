"""A run on another node, as the web view shows it: where it runs, and its output/.

A run sent to a node (docs/nodes.md) has its log, metrics and state mirrored here, but its
output/ stays on the node. The page lists it through the node (`orbit _node outputs`, a flat
list of file paths, built into folders here) and reads a file through it (`orbit _node cat`).
A node that cannot be reached costs the page at most LIST_TIMEOUT_S and is named in one line;
everything kept here still shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orbit.errors import OrbitError
from orbit.nodes import client
from orbit.store.dirlist import Entry
from orbit.store.home import Home
from orbit.store.model import Run, RunState
from orbit.web.runfiles import LISTING_MAX

# The run page and a folder listing wait this long for the node; ssh gives up connecting
# after 10 s (nodes/ssh.py), so its own message ("Connection timed out") comes first.
LIST_TIMEOUT_S = 12.0
READ_TIMEOUT_S = 60.0  # one file's bytes
PREVIEW_FETCH_MAX = 8 << 20  # a larger file is not fetched for a preview, only served raw


@dataclass
class NodeView:
    """Where a run on another node is, and its output/ files there when they were read."""

    name: str
    remote_id: str | None  # the run's id on the node; None until it is sent there
    gpus: list[str]  # the indexes of the GPUs it leases there
    files: list[dict[str, Any]] | None = None  # {"path", "size"} of every file of output/
    error: str | None = None  # why output/ could not be read

    @property
    def where(self) -> str:
        """`on node b as run 3, GPUs 0, 1`."""
        if self.remote_id is None:
            return f"on node {self.name} (not sent there yet)"
        text = f"on node {self.name} as run {self.remote_id}"
        if self.gpus:
            text += f", GPU{'s' if len(self.gpus) > 1 else ''} {', '.join(self.gpus)}"
        return text

    @property
    def unreadable(self) -> str:
        """The one line a page shows when output/ cannot be listed."""
        if self.remote_id is None:
            return f"output/ will be on node {self.name} once the run is sent there."
        return f"output/ is on node {self.name} and cannot be read now: {self.error}"


def view(home: Home, run: Run, *, list_files: bool = True) -> NodeView | None:
    """The node a run runs on (None for a run here); with `list_files`, its output/ files are
    read through the node, or `error` says why they could not be (without a call for a run
    that is `unknown`: its reason says why). Never raises OrbitError."""
    name = run.status.get("node")
    if not name:
        return None
    remote = run.status.get("remote")
    remote = remote if isinstance(remote, dict) else {}
    lease = remote.get("lease")
    lease = lease if isinstance(lease, dict) else {}
    gpus = [str(g.get("index")) for g in lease.get("gpus") or [] if isinstance(g, dict)]
    found = NodeView(str(name), str(remote["id"]) if remote.get("id") else None, gpus)
    if run.state is RunState.UNKNOWN:
        # The mirror could not reach the node just now (it tries every few seconds): a page
        # need not wait up to LIST_TIMEOUT_S to learn the same.
        found.error = run.reason or f"node {found.name} cannot be reached"
    elif list_files and found.remote_id is not None:
        try:
            found.files = client.outputs(home, run, timeout=LIST_TIMEOUT_S)
        except OrbitError as exc:
            found.error = str(exc)
    return found


def find(files: list[dict[str, Any]], rel: str) -> int | None:
    """The size of the file `rel` of the listing; None when no file has that path."""
    for f in files:
        if f["path"] == rel:
            return int(f["size"])
    return None


def folder(files: list[dict[str, Any]], rel: str) -> tuple[list[Entry], int] | None:
    """The entries of the folder `rel` ("" for output/ itself) of the flat listing, folders
    first, by name, at most LISTING_MAX, and how many there are; None when no file lies under
    `rel`. A folder that holds no file is not in the listing, so it never shows."""
    prefix = rel + "/" if rel else ""
    dirs: set[str] = set()
    plain: dict[str, int] = {}
    for f in files:
        path = f["path"]
        if not path.startswith(prefix):
            continue
        head, sep, _ = path[len(prefix) :].partition("/")
        if sep:
            dirs.add(head)
        elif head:
            plain[head] = int(f["size"])
    if rel and not dirs and not plain:
        return None
    entries = [Entry(d, True, 0, False) for d in sorted(dirs)]
    entries += [Entry(n, False, size, False) for n, size in sorted(plain.items())]
    return entries[:LISTING_MAX], len(entries)


def fetch(home: Home, run: Run, rel: str) -> bytes:
    """The bytes of output/`rel` read through the node. `rel` must have been checked
    (runfiles.check_rel) and found in the listing: the node checks it again."""
    return client.read_output(home, run, rel, timeout=READ_TIMEOUT_S)
