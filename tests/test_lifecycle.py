"""The run lifecycle end to end, against a real Docker engine."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import SMALL, Orbit, Result, kill_shepherd, readable_site_packages

from orbit.errors import ExitCode


def container_names(orbit: Orbit) -> list[str]:
    out = subprocess.run(
        [
            "docker",
            "ps",
            "-a",
            "--format",
            "{{.Names}}",
            "--filter",
            f"label=orbit.home={orbit.home}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def wait_no_containers(orbit: Orbit, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while container_names(orbit) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert container_names(orbit) == []


def test_succeeding_run_leaves_a_complete_record(orbit: Orbit, busybox: str) -> None:
    script = (
        'echo "hello from orbit"; echo "to stderr" >&2; '
        'echo \'{"step": 1, "loss": 0.5}\' >> "$ORBIT_METRICS"; '
        'echo \'{"step": 2, "loss": 0.25}\' >> "$ORBIT_METRICS"; '
        'echo result > "$ORBIT_OUTPUT/result.txt"; echo "id=$ORBIT_RUN_ID"'
    )
    res = orbit(
        "run",
        "--image",
        busybox,
        "--no-project",
        "--cpus",
        "0.5",
        "--mem",
        "0.25",
        "-n",
        "hello",
        "-g",
        "demo",
        "-t",
        "kind=smoke",
        "-w",
        "--json",
        "--",
        "sh",
        "-c",
        script,
    )
    assert res.code == 0, res.err
    shown = res.json()
    run_id = shown["id"]
    assert shown["state"] == "succeeded" and shown["exit_code"] == 0 and shown["reason"] is None
    assert shown["metrics"]["latest"] == {"step": 2, "loss": 0.25}
    assert shown["resources"] == {
        "cpus": 0.5,
        "mem_gb": 0.25,
        "gpus": 0,
        "gpu_mem_gb": None,
        "gpu_ids": None,
    }
    run_dir = orbit.run_dir(run_id)
    log = (run_dir / "log.txt").read_text()
    assert "hello from orbit" in log and "to stderr" in log and f"id={run_id}" in log
    assert (run_dir / "output" / "result.txt").read_text() == "result\n"
    assert [e["event"] for e in orbit.events(run_id)] == [
        "submitted",
        "admitted",
        "started",
        "succeeded",
    ]
    import yaml

    spec = yaml.safe_load((run_dir / "run.yaml").read_text())
    assert spec["format"] == 1 and spec["name"] == "hello" and spec["group"] == "demo"
    assert spec["tags"] == {"kind": "smoke"}
    status = orbit.status(run_id)
    assert status["format"] == 1 and status["state"] == "succeeded"
    assert status["started_at"] <= status["finished_at"]
    exit_record = json.loads((run_dir / "exit.json").read_text())
    assert exit_record["exit_code"] == 0 and exit_record["oom_killed"] is False
    wait_no_containers(orbit)  # removed right after the record was complete
    # The shepherd drops the active marker just after it removed the container.
    deadline = time.monotonic() + 20
    while list((orbit.home / "active").iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list((orbit.home / "active").iterdir())
    assert not list((orbit.home / "queue").iterdir())


def test_failed_run_reports_its_exit_code(orbit: Orbit, busybox: str) -> None:
    res = orbit(
        "run",
        "--image",
        busybox,
        *SMALL,
        "-w",
        "--",
        "sh",
        "-c",
        "echo failing; exit 3",
    )
    assert res.code == 3  # the command's own exit code
    assert "failing" in res.out
    assert "failed: exit code 3" in res.err
    status = orbit.status("1")
    assert status["state"] == "failed" and status["exit_code"] == 3
    assert status["reason"] == "exit code 3"


def test_exit_hints_only_when_the_command_could_not_be_run(orbit: Orbit, busybox: str) -> None:
    chosen = orbit.submit("--image", busybox, *SMALL, "--", "sh", "-c", "echo chose; exit 126")
    missing = orbit.submit("--image", busybox, *SMALL, "--", "/no/such/program")
    unrunnable = orbit.submit("--image", busybox, *SMALL, "--", "sh", "-c", "/etc/passwd")
    assert orbit("wait", chosen, missing, unrunnable).code == ExitCode.RUN_FAILED
    assert orbit.status(chosen)["reason"] == "exit code 126"
    assert orbit.status(missing)["reason"] == "exit code 127 (command not found)"
    assert orbit.status(unrunnable)["reason"] == "exit code 126 (command not executable)"


def test_exit_137_without_oom_is_not_called_oom(orbit: Orbit, busybox: str) -> None:
    res = orbit(
        "run",
        "--image",
        busybox,
        *SMALL,
        "-w",
        "--",
        "sh",
        "-c",
        "exit 137",
    )
    assert res.code == 137  # passed through: the command chose it
    assert orbit.status("1")["reason"] == "exit code 137"
    assert orbit.status("1")["oom_killed"] is False


def test_oom_killed_run_says_so(orbit: Orbit, python_image: str) -> None:
    res = orbit(
        "run",
        "--image",
        python_image,
        "--no-project",
        "--cpus",
        "1",
        "--mem",
        "0.1",
        "-w",
        "--",
        "python3",
        "-c",
        "x = bytearray(10**9)",
    )
    assert res.code == ExitCode.OOM_KILLED
    status = orbit.status("1")
    assert status["state"] == "failed"
    assert status["reason"] == "killed for memory (limit 0.1 GiB)"
    assert status["oom_killed"] is True
    record = json.loads((orbit.run_dir("1") / "exit.json").read_text())
    assert record["kernel_oom_events"] or record["oom_kill_count"] or record["docker_oom_killed"]
    if record["kernel_oom_events"] or record["oom_kill_count"]:  # the kernel killed at the limit
        assert status["peaks"]["mem_bytes"] >= int(0.1 * 2**30)


def test_timeout_stops_the_run(orbit: Orbit, busybox: str) -> None:
    started = time.monotonic()
    res = orbit(
        "run",
        "--image",
        busybox,
        *SMALL,
        "--timeout",
        "0.02",
        "-w",
        "--",
        "sh",
        "-c",
        "echo begin; sleep 120",
    )
    assert res.code == ExitCode.TIMED_OUT
    assert time.monotonic() - started < 30
    status = orbit.status("1")
    assert status["reason"] == "timed out after 1.2 s"
    assert "begin" in (orbit.run_dir("1") / "log.txt").read_text()


def test_queue_waits_for_cpu_and_memory_and_moves_on(orbit: Orbit, busybox: str) -> None:
    orbit.configure(total_cpus=2, total_mem_gb=1)
    first = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "2", "--mem", "0.25", "--", "sleep", "3"
    )
    second = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "1", "--mem", "0.25", "--", "true"
    )
    third = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "0.5", "--mem", "1", "--", "true"
    )
    s2 = orbit.status(second)
    assert s2["state"] == "queued"
    assert s2["reason"] == "waiting for 1 CPU: 2 of 2 leased"
    s3 = orbit.status(third)
    assert s3["state"] == "queued"
    assert "1 GiB memory: 0.25 of 1 GiB leased" in s3["reason"]
    ps = orbit("ps")
    assert "waiting for 1 CPU: 2 of 2 leased" in ps.out
    res = orbit("wait", first, second, third)
    assert res.code == 0, res.out + res.err
    done_first = orbit.status(first)["finished_at"]
    assert orbit.status(second)["started_at"] >= done_first
    assert orbit.status(third)["started_at"] >= done_first


def test_cancel_queued_and_running_runs(orbit: Orbit, busybox: str) -> None:
    orbit.configure(total_cpus=1)
    running = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "1", "--mem", "0.25", "--", "sleep", "60"
    )
    queued = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "1", "--mem", "0.25", "--", "true"
    )
    orbit.wait_for(running, lambda s: s["state"] == "running")
    assert orbit.status(queued)["state"] == "queued"
    res = orbit("cancel", queued, "--json")
    assert res.code == 0
    assert res.json()["runs"][0]["state"] == "cancelled"
    assert orbit.status(queued)["reason"] == "cancelled by user"
    started = time.monotonic()
    res = orbit("cancel", running)
    assert res.code == 0, res.err
    assert time.monotonic() - started < 20
    status = orbit.status(running)
    assert status["state"] == "cancelled" and status["reason"] == "cancelled by user"
    wait_no_containers(orbit)
    assert "cancelled" in [e["event"] for e in orbit.events(queued)]


def test_snapshot_copies_the_working_tree_and_leaves_it_untouched(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    from conftest import git_repo

    repo = git_repo(
        tmp_path / "repo",
        {
            "train.py": "print('v1')\n",
            ".gitignore": "data/\n*.ckpt\n",
            "src/model.py": "layers = 2\n",
        },
    )
    (repo / "train.py").write_text("print('v2 uncommitted')\n")
    (repo / "notes.txt").write_text("untracked but not ignored\n")
    (repo / "data").mkdir()
    (repo / "data" / "big.bin").write_text("ignored\n")
    (repo / "model.ckpt").write_text("ignored too\n")
    before = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True
    ).stdout
    index_mtime = (repo / ".git" / "index").stat().st_mtime_ns
    script = "cat train.py notes.txt src/model.py; ls -a; echo changed > train.py; pwd"
    res = orbit(
        "run",
        "--image",
        busybox,
        "--cpus",
        "1",
        "--mem",
        "0.25",
        "-w",
        "--json",
        "--",
        "sh",
        "-c",
        script,
        cwd=repo,
    )
    assert res.code == 0, res.err
    shown = res.json()
    log = (orbit.run_dir(shown["id"]) / "log.txt").read_text()
    assert "v2 uncommitted" in log and "untracked but not ignored" in log and "layers = 2" in log
    assert "data" not in log.split() and "model.ckpt" not in log
    assert "/workspace" in log
    project = shown["project"]
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert project["commit"] == commit and project["dirty"] is True and project["mode"] == "copy"
    diff = (orbit.run_dir(shown["id"]) / "code.diff").read_text()
    assert "+print('v2 uncommitted')" in diff and "notes.txt" in diff
    assert (repo / "train.py").read_text() == "print('v2 uncommitted')\n"
    assert (repo / ".git" / "index").stat().st_mtime_ns == index_mtime
    after = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True
    ).stdout
    assert after == before
    # The same tree again: the snapshot is stored once.
    again = orbit(
        "run",
        "--image",
        busybox,
        "--cpus",
        "1",
        "--mem",
        "0.25",
        "-w",
        "--json",
        "--",
        "true",
        cwd=repo,
    )
    assert again.json()["project"]["snapshot"] == project["snapshot"]
    assert len(list((orbit.home / "snapshots").glob("*.manifest"))) == 1


def test_outside_a_repository_suggests_no_project(orbit: Orbit, busybox: str) -> None:
    res = orbit("run", "--image", busybox, "--", "true")
    assert res.code == ExitCode.USAGE
    assert "--no-project" in res.err
    assert not (orbit.home / "runs").exists() or not any((orbit.home / "runs").iterdir())


def _readable_site_packages(dest: Path) -> Path:
    """The packages Orbit imports and Orbit itself, readable by every user."""
    import shutil

    readable_site_packages(dest)
    shutil.copytree(Path(__file__).resolve().parent.parent / "orbit", dest / "orbit")
    for path in [dest / "orbit", *(dest / "orbit").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dest


def test_files_in_output_belong_to_the_caller(orbit: Orbit, busybox: str, open_dir: Path) -> None:
    uid = gid = 4321
    tmp_path = open_dir
    site = _readable_site_packages(tmp_path / "site")
    home = tmp_path / "user-home"
    home.mkdir()
    os.chown(home, uid, gid)
    docker_gid = Path("/var/run/docker.sock").stat().st_gid
    env = {
        "PATH": "/usr/bin:/bin",
        "ORBIT_HOME": str(home),
        "HOME": str(home),
        "USER": "tester",
        "PYTHONPATH": str(site),
    }
    cmd = [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={gid}",
        f"--groups={docker_gid}",
        "/usr/bin/python3",
        "-m",
        "orbit",
        "run",
        "--image",
        busybox,
        *SMALL,
        "-w",
        "--",
        "sh",
        "-c",
        'id -u; id -g; echo x > "$ORBIT_OUTPUT/out.txt"',
    ]
    proc = subprocess.run(cmd, env=env, cwd=home, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:2] == [str(uid), str(gid)]
    out = home / "runs" / "1" / "output" / "out.txt"
    assert (out.stat().st_uid, out.stat().st_gid) == (uid, gid)
    assert (home / "runs" / "1" / "status.yaml").stat().st_uid == uid
    subprocess.run(["docker", "rm", "-f", f"orbit-{_home_tag(home)}-1"], capture_output=True)


def test_root_flag_runs_as_root(orbit: Orbit, busybox: str) -> None:
    res = orbit(
        "run",
        "--image",
        busybox,
        "--no-project",
        "--root",
        "--cpus",
        "1",
        "--mem",
        "0.25",
        "-w",
        "--json",
        "--",
        "id",
        "-u",
    )
    assert res.code == 0
    import yaml

    spec = yaml.safe_load((orbit.run_dir("1") / "run.yaml").read_text())
    assert spec["user"] is None
    assert (orbit.run_dir("1") / "log.txt").read_text().strip() == "0"


def test_logs_follow_streams_until_the_run_ends(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit(
        "--image",
        busybox,
        *SMALL,
        "--",
        "sh",
        "-c",
        "for i in $(seq 1 20); do echo line $i; sleep 0.1; done",
    )
    proc = orbit.proc("logs", run_id, "-f")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.splitlines() == [f"line {i}" for i in range(1, 21)]
    tail = orbit("logs", run_id, "--tail", "8")
    assert tail.out == "line 20\n"


def test_killed_shepherd_is_replaced_and_the_log_is_complete(orbit: Orbit, busybox: str) -> None:
    n = 60
    run_id = orbit.submit(
        "--image",
        busybox,
        *SMALL,
        "--",
        "sh",
        "-c",
        f"for i in $(seq 1 {n}); do echo line $i; sleep 0.05; done",
    )
    orbit.wait_for(run_id, lambda s: s["state"] == "running")
    time.sleep(1.0)
    kill_shepherd(orbit, run_id)
    assert orbit.status(run_id)["state"] == "running"
    tick = orbit("scheduler", "tick", "--json")
    assert run_id in tick.json()["repaired"]
    status = orbit.wait_for(run_id, lambda s: s["state"] != "running")
    assert status["state"] == "succeeded", status
    lines = (orbit.run_dir(run_id) / "log.txt").read_text().splitlines()
    assert lines == [f"line {i}" for i in range(1, n + 1)]
    events = [e["event"] for e in orbit.events(run_id)]
    assert "shepherd-resumed" in events


def test_a_shepherd_whose_run_ended_follows_the_run_its_tick_admitted(
    orbit: Orbit, busybox: str
) -> None:
    """One slot, three runs: the shepherd of each run that ends follows the next run itself
    (one process for the three, never two containers at once), each run recorded as a fresh
    shepherd records it: its own events, log, shepherd.log and exit.json, whose CPU figure is
    that run's alone. Killed while it follows the second, the process is replaced by a tick."""
    orbit.configure(total_cpus=1, count_outside_use=False)
    one = ("--no-project", "--cpus", "1", "--mem", "0.1", "--image", busybox)
    res = orbit("sweep", "-g", "c", *one, "-p", "n=1,2,3", "--json", "--", "sh", "-c", "echo {n}")
    assert res.code == 0, res.err
    ids = [str(r["id"]) for r in res.json()["runs"]]
    assert orbit("wait", "-g", "c").code == 0
    wait_no_containers(orbit)
    pids = [int((orbit.run_dir(i) / "shepherd.pid").read_text()) for i in ids]
    assert len(set(pids)) == 1, pids
    cpu = []
    for n, run_id in enumerate(ids, 1):
        events = orbit.events(run_id)
        assert [e["event"] for e in events] == ["submitted", "admitted", "started", "succeeded"]
        assert {e["actor"] for e in events[2:]} == {f"shepherd:{run_id}"}
        assert (orbit.run_dir(run_id) / "log.txt").read_text() == f"{n}\n"
        assert (orbit.run_dir(run_id) / "shepherd.log").exists()
        cpu.append(json.loads((orbit.run_dir(run_id) / "exit.json").read_text())["shepherd_cpu_s"])
    for n in (1, 2):  # admitted by the run before it, after that run had ended
        assert orbit.events(ids[n])[1]["actor"] == f"shepherd:{ids[n - 1]}"
        assert orbit.status(ids[n])["started_at"] >= orbit.status(ids[n - 1])["finished_at"]
    # The first figure includes the interpreter's start and imports; the others do not.
    assert 0 < cpu[1] < cpu[0] and 0 < cpu[2] < cpu[0], cpu

    # Killed while following a later run: the tick's repair works as for any shepherd.
    res = orbit("sweep", "-g", "k", *one, "-p", "n=1,2", "--json", "--", "sh", "-c", "sleep 2")
    first, second = [str(r["id"]) for r in res.json()["runs"]]
    orbit.wait_for(second, lambda s: s["state"] == "running")
    pid = kill_shepherd(orbit, second)
    assert int((orbit.run_dir(first) / "shepherd.pid").read_text()) == pid
    assert second in orbit("scheduler", "tick", "--json").json()["repaired"]
    assert orbit("wait", second).code == 0
    assert orbit.status(second)["state"] == "succeeded"
    assert "shepherd-resumed" in [e["event"] for e in orbit.events(second)]


def test_vanished_container_makes_the_run_lost(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "1", "--mem", "0.25", "--", "sleep", "60"
    )
    status = orbit.wait_for(run_id, lambda s: s["state"] == "running")
    kill_shepherd(orbit, run_id)
    subprocess.run(["docker", "rm", "-f", status["container"]], check=True, capture_output=True)
    orbit("scheduler", "tick")
    status = orbit.wait_for(run_id, lambda s: s["state"] != "running")
    assert status["state"] == "lost"
    assert status["reason"] == "its container vanished with no exit record"
    # The marker goes just after the status is written (RunStore.update): wait for it.
    deadline = time.monotonic() + 30
    while (orbit.home / "active" / run_id).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (orbit.home / "active" / run_id).exists()


def test_reboot_is_recognised_and_settled_in_one_pass(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "1", "--mem", "0.25", "--", "sleep", "60"
    )
    orbit.wait_for(run_id, lambda s: s["state"] == "running")
    kill_shepherd(orbit, run_id)  # a reboot takes the shepherd with it
    (orbit.home / "runtime" / "boot_id").write_text("a-previous-boot\n")
    res = orbit("scheduler", "tick", "--json")
    assert run_id in res.json()["repaired"]
    status = orbit.status(run_id)
    assert status["state"] == "lost"
    assert status["reason"] == "the machine restarted while the run was active"
    wait_no_containers(orbit)  # the leftover container is cleaned up


def test_ten_concurrent_submissions_make_ten_runs(orbit: Orbit, busybox: str) -> None:
    procs = [
        orbit.proc(
            "run",
            "--image",
            busybox,
            "--no-project",
            "--cpus",
            "0.1",
            "--mem",
            "0.1",
            "-n",
            f"c{i}",
            "--json",
            "--",
            "sh",
            "-c",
            f"echo run {i}",
        )
        for i in range(10)
    ]
    ids = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        ids.append(json.loads(out)["id"])
    assert sorted(ids, key=int) == [str(i) for i in range(1, 11)]
    res = orbit("wait", *ids, "--json")
    assert res.code == 0, res.out
    for run_id in ids:
        name = orbit("show", run_id, "--json").json()["name"]
        assert (orbit.run_dir(run_id) / "log.txt").read_text() == f"run {name[1:]}\n"


def test_mounts_env_and_secrets(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("dataset\n")
    orbit.environ["MY_SECRET"] = "s3cr3t-value"
    res = orbit(
        "run",
        "--image",
        busybox,
        *SMALL,
        "-m",
        f"{data}:/data",
        "-e",
        "LR=0.1",
        "--pass-env",
        "MY_SECRET",
        "-w",
        "--",
        "sh",
        "-c",
        'cat /data/input.txt; echo "lr=$LR secret=$MY_SECRET"; '
        'test "${MY_SECRET#s3cr3t}" = -value && echo secret-arrived; '
        "touch /data/x 2>/dev/null && echo writable || echo read-only",
    )
    assert res.code == 0, res.err
    log = (orbit.run_dir("1") / "log.txt").read_text()
    assert "dataset" in log and "read-only" in log and "secret-arrived" in log
    assert "lr=0.1 secret=[redacted]" in log  # the value reached the run, never the record
    for path in orbit.run_dir("1").rglob("*"):
        if path.is_file():
            assert "s3cr3t-value" not in path.read_text(errors="replace"), path
    assert not list((orbit.home / "runtime" / "secrets").iterdir())


def test_no_network_has_only_loopback(orbit: Orbit, busybox: str) -> None:
    res = orbit(
        "run",
        "--image",
        busybox,
        "--no-project",
        "--no-network",
        "--cpus",
        "1",
        "--mem",
        "0.25",
        "-w",
        "--",
        "ls",
        "/sys/class/net",
    )
    assert res.code == 0
    assert res.out.split() == ["lo"]


def test_dockerfile_is_built_once_and_reused(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    ctx = tmp_path / "img"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {busybox}\nRUN echo built-in > /built.txt\n")

    def built(*command: str) -> Result:
        return orbit("run", "--dockerfile", str(ctx / "Dockerfile"), *SMALL, "-w", "--json",
                     "--", *command)  # fmt: skip

    first = built("cat", "/built.txt")
    assert first.code == 0, first.err
    assert "built-in" in (orbit.run_dir("1") / "log.txt").read_text()
    second = built("true")
    assert second.json()["image"] == first.json()["image"]
    import yaml

    assert yaml.safe_load((orbit.run_dir("2") / "run.yaml").read_text())["build"]["reused"] is True


def test_two_homes_never_touch_each_others_containers(busybox: str, tmp_path: Path) -> None:
    a = Orbit(tmp_path / "a", tmp_path)
    b = Orbit(tmp_path / "b", tmp_path)
    try:
        ra = a.submit(
            "--image", busybox, "--no-project", "--cpus", "0.5", "--mem", "0.1", "--", "sleep", "30"
        )
        rb = b.submit(
            "--image", busybox, "--no-project", "--cpus", "0.5", "--mem", "0.1", "--", "sleep", "30"
        )
        assert ra == rb == "1"
        sa = a.wait_for(ra, lambda s: s["state"] == "running")
        sb = b.wait_for(rb, lambda s: s["state"] == "running")
        assert sa["container"] != sb["container"]
        assert a("cancel", ra).code == 0
        assert b.status(rb)["state"] == "running"
    finally:
        for o in (a, b):
            o("cancel", "1")


@pytest.mark.parametrize("tail", [0, 3])
def test_logs_tail_bytes(orbit: Orbit, busybox: str, tail: int) -> None:
    orbit(
        "run",
        "--image",
        busybox,
        *SMALL,
        "-w",
        "--",
        "echo",
        "abcdef",
    )
    res = orbit("logs", "1", "--tail", str(tail))
    assert res.out == "abcdef\n"[len("abcdef\n") - tail :]


def _home_tag(home: Path) -> str:
    from orbit.store.home import Home

    return Home(home.resolve()).tag
