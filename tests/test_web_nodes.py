"""A run on another node in the web view and the terminal (issue 14): where it runs, its
output/ read through the node, a node that cannot be reached, and the `unknown` state.

The node is a second ORBIT_HOME on this machine with its own real runs in Docker, reached
through the transport stand-in of tests/node_transport.py (a real shell running the real
`orbit _node` there; only sshd is missing). The pages are driven through the real WSGI app.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ORBIT_PY, SMALL, Orbit, _cleanup_containers, stop_ticker
from docker_setup import BUSYBOX_IMAGE
from node_transport import REFUSED, Transport
from test_web_runs import TOKEN, Client

from orbit.store.home import Home
from orbit.web import listing, remote
from orbit.web.app import make_app

WRITE = (
    "echo hi > $ORBIT_OUTPUT/a.txt; mkdir $ORBIT_OUTPUT/d; "
    "printf 'x,y\\n1,2\\n' > $ORBIT_OUTPUT/d/t.csv"
)


@dataclass
class Cluster:
    primary: Orbit
    node: Orbit
    transport: Transport
    run_id: str  # a finished run of the primary, run on the node

    def client(self, transport: Transport | None = None) -> Client:
        """A web client of the primary whose node calls go through `transport`."""
        environ = {**self.primary.environ, "ORBIT_SSH": (transport or self.transport).command}
        return Client(make_app(Home(self.primary.home, environ), token=TOKEN))


AUTH = {"X-Orbit-Token": TOKEN}


def get(client: Client, path: str, query: str = "") -> tuple[int, str, bytes]:
    r = client.get(path, query, headers=AUTH, auth=False)
    return r.status, r.body.decode(errors="replace"), r.body


@pytest.fixture(scope="module")
def cluster(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("nodes")
    (base / "work").mkdir()
    primary = Orbit(base / "primary", base / "work")
    node = Orbit(base / "node", base / "work")  # configures the node's home: no outside use
    transport = Transport(base / "transport")
    primary.environ["ORBIT_SSH"] = transport.command
    try:
        res = primary(
            "node", "add", "b", "ssh://x", "--orbit", f"{sys.executable} {ORBIT_PY}",
            "--home", str(node.home),
        )  # fmt: skip
        assert res.code == 0, res.err
        run_id = primary.submit(
            "--node", "b", *SMALL, "--image", BUSYBOX_IMAGE, "--", "sh", "-c", WRITE
        )
        res = primary("wait", run_id)
        assert res.code == 0, res.err
        yield Cluster(primary, node, transport, run_id)
    finally:
        for o in (primary, node):
            stop_ticker(o.home)
            _cleanup_containers(o.home)


def test_the_page_names_the_node_and_lists_output_through_it(cluster: Cluster) -> None:
    status = cluster.primary.status(cluster.run_id)
    assert status["node"] == "b" and status["state"] == "succeeded"
    remote_id = status["remote"]["id"]
    # output/ is on the node only: the primary's copy of the run has none of it
    assert not (cluster.primary.run_dir(cluster.run_id) / "output" / "a.txt").exists()
    code, page, _ = get(cluster.client(), f"/runs/{cluster.run_id}")
    assert code == 200, page
    assert f'id="run-node">Ran on node b as run {remote_id}.<' in page
    assert "output/ on node b" in page
    assert f'href="/runs/{cluster.run_id}/files/a.txt">a.txt</a></td><td>3 B<' in page
    assert f'href="/runs/{cluster.run_id}/files/d/">d/</a>' in page
    assert "cannot be read now" not in page


def test_a_file_on_the_node_is_previewed_and_served_raw(cluster: Cluster) -> None:
    client = cluster.client()
    code, page, _ = get(client, f"/runs/{cluster.run_id}/files/a.txt")
    assert code == 200, page
    assert '<pre class="preview text">hi\n</pre>' in page
    assert "Read through node b" in page
    r = client.get(f"/runs/{cluster.run_id}/files/a.txt", "raw=1", headers=AUTH, auth=False)
    assert (r.status, r.body) == (200, b"hi\n")
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.headers["content-security-policy"] == "sandbox; default-src 'none'"
    # a folder of the flat listing, and a CSV in it, previewed as a table
    code, page, _ = get(client, f"/runs/{cluster.run_id}/files/d/")
    assert code == 200 and f'href="/runs/{cluster.run_id}/files/d/t.csv">t.csv</a>' in page
    code, page, _ = get(client, f"/runs/{cluster.run_id}/files/d/t.csv")
    assert code == 200 and "<th>x</th><th>y</th>" in page and "<td>1</td><td>2</td>" in page
    code, page, _ = get(client, f"/runs/{cluster.run_id}/files/nothing.txt")
    assert code == 404 and "no file output/nothing.txt on node b" in page


@pytest.mark.parametrize(
    "path",
    ["/../run.yaml", "/d/../../status.yaml", "/..", "//etc/passwd", "/a\\b"],
)
def test_a_path_out_of_output_is_refused_before_the_node_hears_of_it(
    cluster: Cluster, path: str
) -> None:
    client = cluster.client()
    before = len(cluster.transport.calls())
    code, page, _ = get(client, f"/runs/{cluster.run_id}/files{path}")
    assert code == 403, page
    assert "refused path" in page
    assert len(cluster.transport.calls()) == before  # not even a listing
    # the recording itself works: a good path does reach the node
    assert get(client, f"/runs/{cluster.run_id}/files/a.txt")[0] == 200
    assert len(cluster.transport.calls()) > before


def test_an_unreachable_node_leaves_the_page_readable(cluster: Cluster, tmp_path: Path) -> None:
    cut = Transport(tmp_path / "cut")
    cut.down()
    client = cluster.client(cut)
    note = "note kept on the primary"
    assert cluster.primary("note", cluster.run_id, note).code == 0
    started = time.monotonic()
    code, page, _ = get(client, f"/runs/{cluster.run_id}")
    assert time.monotonic() - started < remote.LIST_TIMEOUT_S
    assert code == 200, page
    line = f"output/ is on node b and cannot be read now: node b: {REFUSED}"
    assert f'<p class="error" id="output-unreadable">{line}</p>' in page
    assert note in page and "succeeded" in page
    # the log mirrored here still shows (the run wrote none: the log section is there, empty)
    assert '<pre class="log" id="log"></pre>' in page
    for sub in ("/", "/a.txt"):
        code, page, _ = get(client, f"/runs/{cluster.run_id}/files{sub}")
        assert code == 502 and line in page, page
    assert cut.calls() == []


def test_folders_are_built_from_the_flat_listing() -> None:
    files = [
        {"path": "z.txt", "size": 1},
        {"path": "a/b/c.txt", "size": 2},
        {"path": "a/x.txt", "size": 3},
        {"path": "ab.txt", "size": 4},
    ]
    top = remote.folder(files, "")
    assert top is not None
    assert [(e.name, e.is_dir, e.size) for e in top[0]] == [
        ("a", True, 0),
        ("ab.txt", False, 4),
        ("z.txt", False, 1),
    ]
    inner = remote.folder(files, "a")
    assert inner is not None and [e.name for e in inner[0]] == ["b", "x.txt"]
    assert remote.folder(files, "a/b/c.txt") is None  # a file, not a folder
    assert remote.folder(files, "ab") is None  # only a name prefix of ab.txt
    assert remote.find(files, "a/x.txt") == 3 and remote.find(files, "a") is None
    gpus = remote.NodeView("b", "3", ["0", "1"])
    assert gpus.where == "on node b as run 3, GPUs 0, 1"
    assert remote.NodeView("b", None, []).where == "on node b (not sent there yet)"


def test_every_state_has_a_colour(cluster: Cluster) -> None:
    code, css, _ = get(cluster.client(), "/static/orbit.css")
    assert code == 200
    missing = [s for s in listing.STATES if f".state-{s}" not in css]
    assert not missing, missing


def test_a_run_whose_node_cannot_be_reached_is_unknown_everywhere(
    cluster: Cluster, busybox: str
) -> None:
    """The connection to the node breaks while the run runs there: the run becomes `unknown`
    (in `orbit wait`, `orbit ps`, the list's state filter and the run page), then what the
    node says once it answers again."""
    primary, transport = cluster.primary, cluster.transport
    primary.configure(node_unknown_after_s=1)
    command = "echo started; sleep 12; echo done"
    run_id = primary.submit("--node", "b", *SMALL, "--image", busybox, "--", "sh", "-c", command)
    primary.wait_for(run_id, lambda s: s["state"] == "running", timeout=60)
    waiter = primary.proc("wait", run_id)
    try:
        transport.down()
        assert transport.cut("follow") >= 1
        primary.wait_for(run_id, lambda s: s["state"] == "unknown", timeout=30)
        reason = primary.status(run_id)["reason"]
        assert reason.startswith("node b unreachable since ") and REFUSED in reason

        res = primary("ps", "--state", "unknown", "--json")
        assert [r["id"] for r in res.json()["runs"]] == [run_id], res.out
        client = cluster.client()
        code, page, _ = get(client, "/", "state=unknown")
        assert code == 200 and f'data-id="{run_id}"' in page
        assert f'data-id="{cluster.run_id}"' not in page
        assert '<span class="state state-unknown" data-field="state">unknown</span>' in page
        before = len(transport.calls())
        code, page, _ = get(client, f"/runs/{run_id}")
        assert code == 200 and 'id="run-state">unknown</span>' in page
        assert f"output/ is on node b and cannot be read now: {reason}" in page
        assert len(transport.calls()) == before  # its reason says why: no call to wait on
        assert "started" in page  # the log mirrored before the break

        transport.up()
        _, err = waiter.communicate(timeout=90)
    finally:
        transport.up()
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, err
    assert f"orbit: run {run_id} unknown: node b unreachable since " in err
    status = primary.status(run_id)
    assert status["state"] == "succeeded"
    events = [e["event"] for e in primary.events(run_id)]
    assert "unknown" in events and "reconnected" in events
    log = (primary.run_dir(run_id) / "log.txt").read_text()
    assert log == "started\ndone\n"  # nothing lost, nothing twice
