"""The node test infrastructure works for real: sshd with SetEnv, ControlMaster, dropped
connections, a node going away, and the second Docker engine (tests/node_setup.py)."""

from __future__ import annotations

import ipaddress
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from docker_setup import BUSYBOX_IMAGE, REPO_ROOT
from node_engine import BRIDGE, check_main_engine, ping
from node_setup import MARKER, SecondEngine, SshServer, cleanup_sshd_leftovers

NodeSshd = Callable[..., SshServer]


def connections(server: SshServer) -> int:
    """How many SSH connections the server has authenticated so far."""
    return server.log.read_text().count("Accepted publickey for root")


def test_each_server_runs_commands_with_its_own_setenv(node_sshd: NodeSshd) -> None:
    root_ssh = Path("/root/.ssh")
    before = root_ssh.exists() and sorted(p.name for p in root_ssh.iterdir())
    a = node_sshd({"DOCKER_HOST": "unix:///run/a.sock", "ORBIT_FAKE_GPUS": "/x/gpus a.yaml"})
    b = node_sshd({"DOCKER_HOST": "unix:///run/b.sock"})
    assert a.port != b.port
    # One ORBIT_SSH value reaches both nodes, as a primary with two nodes needs.
    assert a.orbit_ssh_env() == b.orbit_ssh_env()
    ssh = shlex.split(a.orbit_ssh_env())
    line = 'echo "$DOCKER_HOST|$ORBIT_FAKE_GPUS|$(id -un)"'
    out_a = subprocess.run([*ssh, a.url(), line], capture_output=True, text=True, timeout=30)
    out_b = subprocess.run([*ssh, b.url(), line], capture_output=True, text=True, timeout=30)
    assert (out_a.returncode, out_a.stderr) == (0, "")
    assert out_a.stdout == "unix:///run/a.sock|/x/gpus a.yaml|root\n"
    assert out_b.stdout == "unix:///run/b.sock||root\n"
    # The ssh:// form and the -p form name the same server.
    res = subprocess.run([*ssh, "-p", str(a.port), "root@127.0.0.1", "echo $DOCKER_HOST"],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert res.stdout == "unix:///run/a.sock\n"
    after = root_ssh.exists() and sorted(p.name for p in root_ssh.iterdir())
    assert before == after, "root's ~/.ssh was touched"


def test_a_remote_command_imports_this_checkout(node_sshd: NodeSshd) -> None:
    node = node_sshd({"PYTHONPATH": str(REPO_ROOT)})
    python = shlex.quote(sys.executable)
    res = node.run(
        f"{python} -c 'import orbit; print(orbit.__file__)' && {python} -m orbit --version"
    )
    assert res.returncode == 0, res.stderr
    where, version = res.stdout.splitlines()[:2]
    assert where == str(REPO_ROOT / "orbit" / "__init__.py")
    assert version.strip()


def test_control_master_is_reused_and_breaks_when_connections_drop(node_sshd: NodeSshd) -> None:
    node = node_sshd({})
    control = Path(tempfile.mkdtemp(prefix="cm-"))  # a socket path must stay under 108 bytes
    mux = ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}/%C"]
    mux += ["-o", "ControlPersist=60"]
    seconds = []
    for _ in range(3):
        t0 = time.monotonic()
        assert node.run("true", *mux).returncode == 0
        seconds.append(time.monotonic() - t0)
    print(f"ssh true: first {seconds[0] * 1000:.0f} ms, reused {seconds[1] * 1000:.0f} and "
          f"{seconds[2] * 1000:.0f} ms")  # fmt: skip
    assert connections(node) == 1
    assert min(seconds[1:]) < seconds[0]

    live = subprocess.Popen([*node.ssh_command(), *mux, node.url(), "echo started; sleep 60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert live.stdout is not None and live.stdout.readline() == "started\n"
    assert node.drop_connections() >= 1
    live.communicate(timeout=10)
    assert live.returncode == 255  # a mux client says no more than that
    check = subprocess.run([*node.ssh_command(), *mux, "-O", "check", node.url()],
                           capture_output=True, text=True, timeout=10)  # fmt: skip
    assert check.returncode != 0  # the master went with its connection

    res = node.run("echo back", *mux)
    assert (res.returncode, res.stdout) == (0, "back\n")
    assert connections(node) == 2


def test_stop_takes_the_node_away_and_ssh_fails_fast(node_sshd: NodeSshd) -> None:
    node = node_sshd({})
    # A detached process, as a remote shepherd would be, and one orphaned by a dropped
    # connection: neither is in the sshd's process tree any more.
    res = node.run("setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!")
    detached = psutil.Process(int(res.stdout))
    live = subprocess.Popen([*node.ssh_command(), node.url(), "echo $$; exec sleep 301"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert live.stdout is not None
    orphan = psutil.Process(int(live.stdout.readline()))
    node.drop_connections()
    live.wait(timeout=10)
    assert orphan.is_running() and orphan.environ()[MARKER] == str(node.directory)

    node.stop()
    assert not detached.is_running() or detached.status() == psutil.STATUS_ZOMBIE
    assert not orphan.is_running() or orphan.status() == psutil.STATUS_ZOMBIE
    t0 = time.monotonic()
    res = node.run("true")
    elapsed = time.monotonic() - t0
    assert res.returncode == 255
    assert f"port {node.port}: Connection refused" in res.stderr
    assert elapsed < 5  # ConnectTimeout bounds a node that no longer answers at all


@pytest.mark.sshd
def test_a_crashed_sessions_sshd_is_cleaned_up(tmp_path: Path) -> None:
    script = (
        "import sys; sys.path.insert(0, 'tests'); from node_setup import SshServer;"
        f"s = SshServer({{}}, base={str(tmp_path)!r}); s.start(); print(s.proc.pid)"
    )
    res = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=30, check=True)  # fmt: skip
    orphan = psutil.Process(int(res.stdout))  # its test process exited without stopping it
    assert orphan.name() == "sshd"
    assert cleanup_sshd_leftovers() >= 1
    assert not orphan.is_running() or orphan.status() == psutil.STATUS_ZOMBIE


def test_second_engine_runs_containers_on_its_own_bridge(second_engine: SecondEngine) -> None:
    res = second_engine.docker("run", "--rm", BUSYBOX_IMAGE, "hostname", "-i")
    assert res.returncode == 0, res.stderr
    address = ipaddress.ip_address(res.stdout.strip())
    assert address in second_engine.subnet
    main = subprocess.run(["docker", "run", "--rm", BUSYBOX_IMAGE, "hostname", "-i"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ipaddress.ip_address(main.stdout.strip()) not in second_engine.subnet
    assert subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0
    check_main_engine()  # docker0 is there and the shared engine runs containers


def test_docker_over_ssh_reaches_the_second_engine(
    node_sshd: NodeSshd, second_engine: SecondEngine
) -> None:
    node = node_sshd({"DOCKER_HOST": second_engine.docker_host})
    res = node.run(f"docker run --rm {BUSYBOX_IMAGE} hostname -i")
    assert res.returncode == 0, res.stderr
    assert ipaddress.ip_address(res.stdout.strip()) in second_engine.subnet


def test_second_engine_dies_and_comes_back(second_engine: SecondEngine) -> None:
    # Killed alone, dockerd leaves its containers running; the restarted engine stops them
    # (live-restore is off) with their stop timeout, then SIGKILL: exit code 137.
    run = ("run", "-d", "--stop-timeout", "1", BUSYBOX_IMAGE, "sleep", "300")
    survivor = second_engine.docker(*run).stdout.strip()
    second_engine.kill()
    assert not ping(second_engine.socket)
    assert second_engine.docker("ps").returncode != 0
    check_main_engine()
    second_engine.start()
    state = "{{.State.Status}} {{.State.ExitCode}}"
    assert second_engine.docker("inspect", "-f", state, survivor).stdout == "exited 137\n"

    # Killed with its containers (a power loss), they are found dead: exit code 255.
    victim = second_engine.docker(*run).stdout.strip()
    second_engine.kill(containers=True)
    second_engine.start()
    assert second_engine.docker("inspect", "-f", state, victim).stdout == "exited 255\n"
    res = second_engine.docker("run", "--rm", BUSYBOX_IMAGE, "echo", "back")
    assert res.stdout == "back\n"
