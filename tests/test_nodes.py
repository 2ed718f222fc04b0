"""Nodes over SSH (docs/nodes.md), against real parts: an sshd on loopback and a second Docker
engine (its own socket, data root and bridge) stand for a second machine, `node b`, whose home
is a directory of this test; the primary is the test's own home on the shared engine.
(tests/node_setup.py, tests/node_engine.py; docs/testing.md.)

Node b's environment is its sshd's (SetEnv): its Docker engine, its node name, its stand-in
GPUs, and this checkout on PYTHONPATH, so `python -m orbit` there is this Orbit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import SMALL, Orbit, gpu, write_gpus
from docker_setup import REPO_ROOT
from node_engine import SecondEngine
from node_setup import SshServer

from orbit.errors import NodeError
from orbit.nodes.client import read_output
from orbit.store.files import read_yaml
from orbit.store.home import Home
from orbit.store.runs import RunStore

LONG_S = 90
CODE = ("--cpus", "1", "--mem", "0.25")  # SMALL, with the project's code


class NodeB:
    """Node b: its home, its sshd, its engine."""

    def __init__(self, home: Path, sshd: SshServer, engine: SecondEngine) -> None:
        self.home = home
        self.sshd = sshd
        self.engine = engine

    def run_dir(self, run_id: str) -> Path:
        return self.home / "runs" / run_id

    def status(self, run_id: str) -> dict[str, Any]:
        return read_yaml(self.run_dir(run_id) / "status.yaml")

    def orbit(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`orbit ARGS` in node b's home, as node b would run it (its engine, its name)."""
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": "/root",
            "ORBIT_HOME": str(self.home),
            "ORBIT_NODE": "b",
            "DOCKER_HOST": self.engine.docker_host,
            "PYTHONPATH": str(REPO_ROOT),
        }
        return subprocess.run(
            [sys.executable, "-m", "orbit", *args], env=env, capture_output=True, text=True
        )


def _home(path: Path, **settings: Any) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    config = {"format": 1, "count_outside_use": False, **settings}
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def node_b(
    tmp_path: Path, second_engine: SecondEngine, node_sshd: Callable[..., SshServer]
) -> NodeB:
    home = _home(tmp_path / "node-b", total_cpus=2, total_mem_gb=4)
    gpus = write_gpus(tmp_path / "b-gpus.yaml", [gpu(0, uuid="GPU-b0"), gpu(1, uuid="GPU-b1")])
    sshd = node_sshd(
        {
            "DOCKER_HOST": second_engine.docker_host,
            "ORBIT_NODE": "b",
            "ORBIT_FAKE_GPUS": str(gpus),
            "PYTHONPATH": str(REPO_ROOT),
        }
    )
    return NodeB(home, sshd, second_engine)


@pytest.fixture
def primary(orbit: Orbit, node_b: NodeB, tmp_path: Path) -> Orbit:
    """This test's home as the primary, named `here`, with node b added."""
    orbit.environ["ORBIT_NODE"] = "here"
    orbit.environ["ORBIT_SSH"] = node_b.sshd.orbit_ssh_env()
    orbit.configure(total_cpus=1, total_mem_gb=4, node_unknown_after_s=1)
    res = orbit(
        "node", "add", "b", node_b.sshd.url(), "--home", str(node_b.home),
        "--orbit", f"{sys.executable} -m orbit",
    )  # fmt: skip
    assert res.code == 0, res.err
    assert res.out.startswith(f"added node b ({node_b.sshd.url()}): Orbit ")
    return orbit


def remote_id(orbit: Orbit, run_id: str) -> str:
    status = orbit.wait_for(run_id, lambda s: (s.get("remote") or {}).get("id"), timeout=LONG_S)
    return str(status["remote"]["id"])


def finished(orbit: Orbit, run_id: str, timeout: float = LONG_S) -> dict[str, Any]:
    return orbit.wait_for(
        run_id,
        lambda s: s["state"] in ("succeeded", "failed", "cancelled", "lost"),
        timeout=timeout,
    )


def containers_of(engine: SecondEngine, home: Path) -> list[str]:
    out = engine.docker("ps", "-aq", "--filter", "label=orbit.home").stdout
    return out.split()


# --- registering -----------------------------------------------------------------------------
def test_add_ls_check_rm(orbit: Orbit, node_b: NodeB) -> None:
    orbit.environ["ORBIT_SSH"] = node_b.sshd.orbit_ssh_env()
    py = f"{sys.executable} -m orbit"
    home = ("--home", str(node_b.home), "--orbit", py)

    bad = orbit("node", "add", "b", "http://x")
    assert (bad.code, bad.err) == (
        2,
        "orbit: node URL must start with ssh:// or slurm://, got 'http://x'\n",
    )
    assert orbit("node", "add", "b/c", "ssh://x").code == 2
    # A node that cannot be reached is not added, and says why in one line.
    down = orbit("node", "add", "b", "ssh://root@127.0.0.1:1", *home)
    assert down.code == 8
    assert down.err.startswith("orbit: node b: ") and down.err.endswith("; node not added\n")
    assert "Connection refused" in down.err and down.err.count("\n") == 1
    assert orbit("node", "ls", "--json").json()["nodes"] == []
    # A --home that is not there on the node is not made there.
    typo = orbit("node", "add", "b", node_b.sshd.url(), "--home", f"{node_b.home}x", "--orbit", py)
    assert typo.code == 8 and "no Orbit home at" in typo.err
    assert not Path(f"{node_b.home}x").exists()
    assert orbit("node", "add", "b", node_b.sshd.url(), "--home", "rel", "--orbit", py).code == 2

    assert orbit("node", "add", "b", node_b.sshd.url(), *home).code == 0
    dup = orbit("node", "add", "b", node_b.sshd.url(), *home)
    assert dup.code == 5 and "exists" in dup.err

    listing = orbit("node", "ls", "--json").json()
    (row,) = listing["nodes"]
    assert row["name"] == "b" and row["reachable"] is True
    assert row["version"] == orbit("--version").out.split()[-1]
    assert row["free"]["cpus"] == [2, 2] and row["free"]["gpus"] == [2, 2]
    assert row["runs"] == {"here": [], "there": {"queued": 0, "active": 0}}
    text = orbit("node", "ls").out
    assert text.splitlines()[0].split()[:3] == ["NAME", "URL", "STATE"]
    assert "b  " in text and " ok " in text

    check = orbit("node", "check", "b")
    assert check.code == 0, check.err
    assert f"home {node_b.home}" in check.out and "GPUs read through fake" in check.out

    node_b.sshd.stop()
    try:
        gone = orbit("node", "ls", "--json").json()["nodes"][0]
        assert gone["reachable"] is False and "Connection refused" in gone["error"]
        assert orbit("node", "check", "b").code == 8
    finally:
        node_b.sshd.start()

    assert orbit("node", "rm", "b").code == 0
    assert orbit("node", "ls", "--json").json()["nodes"] == []
    assert orbit("node", "rm", "b").code == 3


def test_resources_show_the_nodes_from_their_last_readings(
    primary: Orbit, node_b: NodeB, busybox: str
) -> None:
    """`orbit resources` (and /api/resources, the same report) lists each node as last read,
    with the reading's age and this home's runs there; a node that does not answer never
    holds it up: it is shown as never reached, then as unreachable once its probe tried."""
    from orbit.store import nodes

    run_id = primary.submit("--node", "b", *SMALL, "--image", busybox, "--", "sleep", "60")
    remote_id(primary, run_id)
    down = nodes.parse_url("c", "ssh://root@127.0.0.1:1", orbit=f"{sys.executable} -m orbit")
    nodes.add(Home(primary.home, primary.environ), down)
    started = time.monotonic()
    data = primary("resources", "--json").json()
    assert time.monotonic() - started < 5
    b, c = data["nodes"]
    assert (b["name"], b["reachable"], b["runs"]["here"]) == ("b", True, [run_id])
    assert b["free"]["gpus"][1] == 2 and b["age_s"] is not None and b["age_s"] < 120
    assert (c["name"], c["reachable"], c["age_s"]) == ("c", None, None)
    text = primary("resources").out
    nodes_part = text[text.index("Nodes (last readings") :]
    header, row_b, row_c = nodes_part.splitlines()[1:4]
    assert header.split()[:3] == ["NAME", "URL", "STATE"] and header.endswith("READ")
    assert row_b.split()[:3] == ["b", node_b.sshd.url(), "ok"] and row_b.endswith(" ago")
    assert "never reached" in row_c
    # The look woke c's probe: it tried, and the next look says why c cannot be reached.
    deadline = time.monotonic() + 30
    while nodes.read_state(Home(primary.home, primary.environ), "c") is None:
        assert time.monotonic() < deadline, "no probe read node c"
        time.sleep(0.2)
    c = primary("resources", "--json").json()["nodes"][1]
    assert c["reachable"] is False and "Connection refused" in c["error"]
    assert "unreachable: node c: " in primary("resources").out
    assert primary("cancel", run_id).code == 0


# --- one run on the node ---------------------------------------------------------------------
def _project(tmp_path: Path) -> Path:
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "train.sh").write_text("echo trained from the snapshot\n")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@x",
                                                "commit", "-qm", "x"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def test_a_run_on_a_node_has_its_record_here(
    primary: Orbit, node_b: NodeB, busybox: str, tmp_path: Path
) -> None:
    repo = _project(tmp_path)
    script = (
        "sh /workspace/train.sh; sleep 1; for i in 1 2 3; do echo step $i; "
        'echo "{\\"step\\": $i, \\"loss\\": 0.$i}" >> $ORBIT_METRICS; done; '
        "echo result > $ORBIT_OUTPUT/result.txt; ln -s /etc/hostname $ORBIT_OUTPUT/link; "
        "echo to stderr >&2; exit 3"
    )
    res = primary("run", "--json", "--node", "b", "--image", busybox, *CODE, "-w", "--",
                  "sh", "-c", script, cwd=repo)  # fmt: skip
    assert res.code == 3, res.err
    run_id = str(res.json()["id"])
    status = primary.status(run_id)
    rid = status["remote"]["id"]
    there = node_b.status(rid)
    # The record here is the node's: state, exit code, reason, times, peaks.
    assert status["state"] == there["state"] == "failed"
    for key in ("exit_code", "reason", "started_at", "finished_at", "peaks", "error_excerpt"):
        assert status[key] == there[key], key
    assert status["reason"] == "exit code 3" and status["node"] == "b"
    assert status["lease"] == {"cpus": 0, "mem_gb": 0, "gpus": []}  # nothing here
    # Log and metrics are mirrored byte for byte.
    here_dir, there_dir = primary.run_dir(run_id), node_b.run_dir(rid)
    log = (here_dir / "log.txt").read_bytes()
    assert log == (there_dir / "log.txt").read_bytes()
    assert b"trained from the snapshot\n" in log and b"to stderr" in log
    metrics = (here_dir / "metrics.jsonl").read_bytes()
    assert metrics == (there_dir / "metrics.jsonl").read_bytes() and metrics.count(b"\n") == 3
    assert json.loads((here_dir / "metrics.summary.json").read_text())["lines"] == 3
    events = primary.events_when(run_id, lambda names: "failed" in names)
    assert events == ["submitted", "placed", "sent", "running", "failed"]
    # The node's run names where it came from; it ran on the node's own engine.
    spec = read_yaml(there_dir / "run.yaml")
    assert spec["origin"] == {"node": "here", "home": spec["origin"]["home"], "run": run_id}
    assert spec["node"] == "b" and "pin_node" not in spec
    # output/ stays on the node and is read through it.
    assert not list((here_dir / "output").iterdir())
    shown = primary("show", run_id, "--json").json()
    assert shown["output"]["files"][1] == {"name": "result.txt", "type": "file", "size": 7}
    home = Home(primary.home, primary.environ)
    run = RunStore(home).load(run_id)
    assert read_output(home, run, "result.txt") == b"result\n"
    # A symlink the container left there is never followed out of the run on the node.
    with pytest.raises(NodeError, match="refused path 'link': it points outside"):
        read_output(home, run, "link")
    with pytest.raises(NodeError, match="refused path: it leaves the run directory"):
        read_output(home, run, "../status.yaml")
    assert shown["node"]["name"] == "b" and shown["node"]["id"] == rid
    assert f"node       b (as run {rid}); output/ stays there" in primary("show", run_id).out
    assert primary("logs", run_id).out == log.decode()

    # The same code again: the snapshot is not sent twice (one content hash, one manifest).
    snapshots = node_b.home / "snapshots"
    before = {p.name: p.stat().st_mtime_ns for p in snapshots.rglob("*") if p.is_file()}
    again = primary("run", "--json", "--node", "b", "--image", busybox, *CODE, "-w", "--",
                    "sh", "/workspace/train.sh", cwd=repo)  # fmt: skip
    assert again.code == 0, again.err
    after = {p.name: p.stat().st_mtime_ns for p in snapshots.rglob("*") if p.is_file()}
    assert after == before and len([n for n in before if n.endswith(".manifest")]) == 1


def test_run_refusals_for_a_node(primary: Orbit, busybox: str, tmp_path: Path) -> None:
    res = primary("run", "--node", "nope", "--image", busybox, *SMALL, "--", "true")
    assert res.code == 3 and "no node 'nope' (known: b)" in res.err
    res = primary("run", "--node", "b", "--image", busybox, *SMALL, "-m", f"{tmp_path}:/x",
                  "--", "true")  # fmt: skip
    assert res.code == 2 and res.err.startswith("orbit: --node b: -m mounts a path of this machine")
    # More than this machine has, but node b has it: accepted, and it runs there.
    res = primary("run", "--json", "--image", busybox, "--no-project", "--cpus", "2", "--mem",
                  "0.25", "-w", "--", "true")  # fmt: skip
    assert res.code == 0, res.err
    assert primary.status(str(res.json()["id"]))["node"] == "b"
    # More than any node has: refused at submit, as on one machine.
    res = primary("run", "--image", busybox, "--no-project", "--cpus", "3", "--", "true")
    assert res.code == 2 and "can never start" in res.err


# --- placement -------------------------------------------------------------------------------
def test_placement_by_free_gpus_and_cancel(
    primary: Orbit, node_b: NodeB, busybox: str, tmp_path: Path
) -> None:
    path = write_gpus(tmp_path / "here-gpus.yaml", [gpu(0, uuid="GPU-h0")])
    primary.environ["ORBIT_FAKE_GPUS"] = str(path)
    ids = [
        primary.submit("--image", busybox, *SMALL, "--gpus", "1", "--", "sleep", "60")
        for _ in range(4)
    ]
    first = primary.wait_for(ids[0], lambda s: s["state"] == "running")
    assert "node" not in first and first["lease"]["gpus"] == [{"index": 0, "uuid": "GPU-h0"}]
    on_b = [primary.wait_for(i, lambda s: s["state"] == "running", LONG_S) for i in ids[1:3]]
    assert [s["node"] for s in on_b] == ["b", "b"]
    assert sorted(s["remote"]["lease"]["gpus"][0]["uuid"] for s in on_b) == ["GPU-b0", "GPU-b1"]
    # The fourth waits, with every node's reason (each short of CPUs and GPUs).
    reason = primary.wait_for(ids[3], lambda s: "; b: " in (s.get("reason") or ""))["reason"]
    here, there = reason.split("; b: ")
    assert here.startswith("waiting for a node: here: 1 CPU: 1 of 1 leased")
    assert here.endswith(f"and for 1 GPU: GPU 0 leased to run {ids[0]}")
    assert there.startswith("1 CPU: 2 of 2 leased; and for 1 GPU: GPU 0 ")
    assert ", GPU 1 " in there
    assert primary("ps", "--json").json()  # listing works with runs on a node

    # Cancel reaches the node: the runs end there and here, their containers are gone.
    for run_id in ids:
        assert primary("cancel", run_id).code == 0
    for run_id in ids:
        assert finished(primary, run_id)["state"] == "cancelled"
    for status in on_b:
        there = node_b.status(status["remote"]["id"])
        assert there["state"] == "cancelled"
    deadline = time.monotonic() + 30
    while containers_of(node_b.engine, node_b.home) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert containers_of(node_b.engine, node_b.home) == []


def test_a_sweep_spreads_over_two_nodes(primary: Orbit, node_b: NodeB, busybox: str) -> None:
    res = primary("sweep", "--json", "-g", "spread", "--image", busybox, *SMALL,
                  "-p", "i=1,2,3,4,5", "-w", "--", "sh", "-c", "sleep 2; echo run {i}")  # fmt: skip
    assert res.code == 0, res.err
    ids = [str(r["id"]) for r in res.json()["runs"]]
    where = {}
    for run_id in ids:
        status = primary.status(run_id)
        assert status["state"] == "succeeded", status
        where[run_id] = status.get("node") or "here"
        i = ids.index(run_id) + 1
        assert (primary.run_dir(run_id) / "log.txt").read_text() == f"run {i}\n"
    assert set(where.values()) == {"here", "b"}, where


def test_datasets_decide_where_a_run_goes(
    primary: Orbit, node_b: NodeB, busybox: str, tmp_path: Path
) -> None:
    data = tmp_path / "on-b"
    data.mkdir()
    (data / "f.txt").write_text("data on b\n")
    res = primary("data", "add", "corpus", str(data), "--node", "b")
    assert res.code == 0, res.err
    assert [
        d["name"] for d in primary("data", "ls", "--node", "b", "--json").json()["datasets"]
    ] == ["corpus"]
    assert primary("data", "ls", "--json").json()["datasets"] == []
    # Not here, on b: the run goes to b and reads b's copy, read-only.
    script = "cat /data/corpus/f.txt; touch /data/corpus/x || echo read-only"
    res = primary("run", "--json", "--image", busybox, *SMALL, "-d", "corpus", "-w", "--",
                  "sh", "-c", script)  # fmt: skip
    assert res.code == 0, res.err
    run_id = str(res.json()["id"])
    assert primary.status(run_id)["node"] == "b"
    log = (primary.run_dir(run_id) / "log.txt").read_text()  # stdout and stderr, interleaved
    assert "data on b\n" in log and "read-only\n" in log
    # A dataset only here: never sent to b, which lacks it.
    local = tmp_path / "here-only"
    local.mkdir()
    assert primary("data", "add", "mine", str(local)).code == 0
    hog = primary.submit("--image", busybox, *SMALL, "--cpus", "1", "--", "sleep", "60")
    primary.wait_for(hog, lambda s: s["state"] == "running")
    waiting = primary.submit("--image", busybox, *SMALL, "--cpus", "1", "-d", "mine", "--",
                             "true")  # fmt: skip
    reason = primary.wait_for(waiting, lambda s: "b: has no dataset" in (s.get("reason") or ""))
    assert reason["reason"].endswith("; b: has no dataset mine")
    assert primary("cancel", hog, waiting).code == 0
    unknown = primary("run", "--image", busybox, *SMALL, "-d", "nothing", "--", "true")
    assert unknown.code == 3


# --- faults ----------------------------------------------------------------------------------
def test_ssh_dropped_mid_mirror_loses_and_doubles_nothing(
    primary: Orbit, node_b: NodeB, busybox: str
) -> None:
    script = "i=0; while [ $i -lt 400 ]; do echo line $i; i=$((i+1)); sleep 0.01; done"
    run_id = primary.submit("--node", "b", "--image", busybox, *SMALL, "--", "sh", "-c", script)
    rid = remote_id(primary, run_id)
    primary.wait_for(run_id, lambda s: s["state"] == "running", LONG_S)
    dropped = 0
    while primary.status(run_id)["state"] == "running":
        dropped += node_b.sshd.drop_connections()
        time.sleep(0.7)
    assert dropped >= 2, "the connection was never dropped while the run ran"
    status = finished(primary, run_id)
    assert status["state"] == "succeeded"
    log = (primary.run_dir(run_id) / "log.txt").read_bytes()
    assert log == (node_b.run_dir(rid) / "log.txt").read_bytes()
    assert log.decode().splitlines() == [f"line {i}" for i in range(400)]


def test_a_node_that_goes_away_makes_its_runs_unknown_then_reconciles(
    primary: Orbit, node_b: NodeB, busybox: str
) -> None:
    run_id = primary.submit("--node", "b", "--image", busybox, *SMALL, "--", "sh", "-c",
                            "echo before; sleep 6; echo after")  # fmt: skip
    rid = remote_id(primary, run_id)
    primary.wait_for(run_id, lambda s: s["state"] == "running", LONG_S)
    node_b.sshd.stop()  # the node is gone: its sshd, and every process it started
    status = primary.wait_for(run_id, lambda s: s["state"] == "unknown", 30)
    assert status["reason"].startswith("node b unreachable since ")
    listed = {r["id"]: r for r in primary("ps", "--json").json()["runs"]}
    assert listed[run_id]["state"] == "unknown"
    node_b.sshd.start()  # it is back: the run went on there (its container never stopped)
    status = finished(primary, run_id)
    assert status["state"] == "succeeded" == node_b.status(rid)["state"]
    events = [e["event"] for e in primary.events(run_id)]
    # Back while it ran: `reconnected` (to running), then its end; or it had ended while the
    # node was away, and `reconnected` is that end.
    assert events[-3:] == ["unknown", "reconnected", "succeeded"] or events[-2:] == [
        "unknown",
        "reconnected",
    ]
    log = (primary.run_dir(run_id) / "log.txt").read_bytes()
    assert log == (node_b.run_dir(rid) / "log.txt").read_bytes() == b"before\nafter\n"


def test_a_node_that_dies_with_its_engine_reconciles_to_what_it_recorded(
    primary: Orbit, node_b: NodeB, busybox: str
) -> None:
    run_id = primary.submit("--node", "b", "--image", busybox, *SMALL, "--", "sh", "-c",
                            "echo started; sleep 60")  # fmt: skip
    rid = remote_id(primary, run_id)
    primary.wait_for(run_id, lambda s: s["state"] == "running", LONG_S)
    node_b.sshd.stop()
    node_b.engine.kill(containers=True)  # a power loss: the container dies with it
    primary.wait_for(run_id, lambda s: s["state"] == "unknown", 30)
    node_b.engine.start()
    node_b.sshd.start()
    status = finished(primary, run_id)
    there = node_b.status(rid)
    assert status["state"] == there["state"] != "succeeded"
    assert status["reason"] == there["reason"]
    assert (primary.run_dir(run_id) / "log.txt").read_bytes() == (
        node_b.run_dir(rid) / "log.txt"
    ).read_bytes()


def test_a_node_unreachable_at_placement_waits_with_its_reason(
    primary: Orbit, node_b: NodeB, busybox: str
) -> None:
    node_b.sshd.stop()
    run_id = primary.submit("--node", "b", "--image", busybox, *SMALL, "--", "echo", "hi")
    status = primary.wait_for(
        run_id, lambda s: "unreachable since" in (s.get("reason") or ""), timeout=60
    )
    assert status["state"] == "queued"
    assert status["reason"].startswith("waiting for node b: unreachable since ")
    node_b.sshd.start()
    status = finished(primary, run_id)
    assert status["state"] == "succeeded"
    assert (primary.run_dir(run_id) / "log.txt").read_text() == "hi\n"


def test_removing_a_node_with_runs_on_it(primary: Orbit, node_b: NodeB, busybox: str) -> None:
    run_id = primary.submit("--node", "b", "--image", busybox, *SMALL, "--", "sleep", "60")
    rid = remote_id(primary, run_id)
    primary.wait_for(run_id, lambda s: s["state"] == "running", LONG_S)
    refused = primary("node", "rm", "b")
    assert refused.code == 5
    assert refused.err.startswith(f"orbit: runs {run_id} of this home are on node b; ")
    assert primary("node", "rm", "b", "--force").code == 0
    status = primary.status(run_id)
    assert status["state"] == "failed"
    assert (
        status["reason"]
        == f"node b was removed from this home (the run goes on there as run {rid})"
    )
    # Its mirror lets go; the node's run is the node's.
    deadline = time.monotonic() + 30
    while (primary.home / "active" / run_id).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (primary.home / "active" / run_id).exists()
    assert node_b.status(rid)["state"] == "running"
    assert node_b.orbit("cancel", rid).returncode == 0


# --- sending: answers lost, refusals, identity ------------------------------------------------
def _flaky_ssh(tmp_path: Path, node_b: NodeB, op: str) -> str:
    """An ORBIT_SSH that, the first time `op` is called, lets the node do it and then loses
    the answer (exit 255, as a connection reset would), and is plain ssh otherwise."""
    flag = tmp_path / f"lost-{op}"
    script = tmp_path / "flaky-ssh"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *"_node {op}"*) if [ ! -e {flag} ]; then touch {flag}; '
        f'{node_b.sshd.orbit_ssh_env()} "$@" > /dev/null; '
        'echo "Connection reset by peer" >&2; exit 255; fi;; esac\n'
        f'exec {node_b.sshd.orbit_ssh_env()} "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


def test_an_answer_lost_after_the_node_wrote_the_run_makes_no_second_run(
    primary: Orbit, node_b: NodeB, busybox: str, tmp_path: Path
) -> None:
    primary.environ["ORBIT_SSH"] = _flaky_ssh(tmp_path, node_b, "submit")
    run_id = primary.submit("--node", "b", "--image", busybox, *SMALL, "--", "echo", "once")
    status = finished(primary, run_id)
    assert status["state"] == "succeeded" and (tmp_path / "lost-submit").exists()
    # The node wrote it when first asked; asked again, it gave the same run.
    runs_there = [p.name for p in (node_b.home / "runs").iterdir() if p.name.isdigit()]
    assert runs_there == [status["remote"]["id"]]
    assert (primary.run_dir(run_id) / "log.txt").read_text() == "once\n"
    assert [e["event"] for e in primary.events(run_id)].count("sent") == 1


def test_a_node_that_refuses_a_run(primary: Orbit, node_b: NodeB, busybox: str) -> None:
    """An image the node cannot get: a run that named the node fails with the node's words;
    one that did not goes back to the queue, is never offered to that node again, and runs
    here once there is room."""
    (node_b.home / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "format": 1,
                "count_outside_use": False,
                "total_cpus": 2,
                "total_mem_gb": 4,
                "pull_timeout_s": 5,
            }
        )
    )
    missing = "orbit-test/nowhere:1"
    pinned = primary.submit("--node", "b", "--image", busybox, *SMALL, "--", "true")
    finished(primary, pinned)
    subprocess.run(["docker", "tag", busybox, missing], check=True)
    try:
        res = primary("run", "--json", "--node", "b", "--image", missing, *SMALL, "--", "true")
        status = finished(primary, str(res.json()["id"]))
        assert status["state"] == "failed"
        assert status["reason"].startswith("node b did not take the run: image not found: ")
        hog = primary.submit("--image", busybox, *SMALL, "--", "sleep", "4")
        primary.wait_for(hog, lambda s: s["state"] == "running")
        free = primary.submit("--image", missing, *SMALL, "--", "echo", "here after all")
        waiting = primary.wait_for(
            free, lambda s: "b: did not take it" in (s.get("reason") or ""), LONG_S
        )
        assert waiting["state"] == "queued" and waiting["refused_by"] == ["b"]
        assert [e["event"] for e in primary.events(free)][-1] == "requeued"
        status = finished(primary, free)
        assert status["state"] == "succeeded" and not status.get("node")
        assert (primary.run_dir(free) / "log.txt").read_text() == "here after all\n"
    finally:
        subprocess.run(["docker", "rmi", missing], capture_output=True)


def test_node_urls_and_the_identity_a_home_sends(tmp_path: Path) -> None:
    from orbit.errors import UsageError
    from orbit.store import nodes

    for url in ("ssh://[::1]:2222", "ssh://alice@[fe80::1]", "ssh://h:22", "slurm://a@login"):
        assert nodes.parse_url("x", nodes.parse_url("x", url).url).url == url
    for url in ("ssh://-oProxyCommand=id", "ssh://-x@h", "http://h", "ssh://h/path", "ssh://"):
        with pytest.raises(UsageError):
            nodes.parse_url("x", url)
    # Each home names itself with an id of its own, kept: a home made again at the same
    # path is another home to a node.
    first = Home(tmp_path / "h")
    ident = nodes.home_id(first)
    assert len(ident) == 16 and nodes.home_id(Home(tmp_path / "h")) == ident
    (tmp_path / "h" / "nodes" / "home.id").unlink()
    assert nodes.home_id(first) != ident
