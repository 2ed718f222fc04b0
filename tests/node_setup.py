"""A second machine for node tests: a real sshd on loopback and a second Docker engine.

Importable without pytest (like docker_setup.py); the fixtures in conftest.py wrap it.

* :func:`ensure_packages` installs Debian's openssh-server when ``/usr/sbin/sshd`` is missing.
* :class:`SshClient` is the primary's side: an ed25519 key, a known_hosts file and an
  ``ssh_config``; ``ORBIT_SSH`` (:meth:`SshClient.orbit_ssh_env`) points Orbit at it.
* :class:`SshServer` is an sshd on 127.0.0.1 with its own host key and sshd_config in a
  temporary directory, key-only root login, and ``SetEnv`` for the node's environment
  (DOCKER_HOST, ORBIT_FAKE_GPUS, PYTHONPATH ...). Nothing in /etc/ssh or ~/.ssh is touched.
* :class:`SecondEngine` (in node_engine.py) is a second dockerd on a bridge of its own.

``python tests/node_setup.py cleanup`` removes what a crashed session left behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from node_engine import SecondEngine, cleanup_engine_leftovers, kill_all

SSHD = "/usr/sbin/sshd"
# Every sshd directory is named PREFIX<owner pid>-<random>, so a later session can tell an
# sshd whose test process died (a leftover) from one another session still uses.
SSHD_DIR_PREFIX = "orbit-test-sshd-"
# Set (through SetEnv) in every session an SshServer runs, to its directory.
MARKER = "ORBIT_TEST_NODE"

__all__ = [
    "MARKER",
    "SSHD",
    "SecondEngine",
    "SshClient",
    "SshServer",
    "cleanup_leftovers",
    "cleanup_sshd_leftovers",
    "ensure_packages",
    "free_port",
]


def ensure_packages() -> None:
    """Install Debian's openssh-server when /usr/sbin/sshd is missing; RuntimeError on failure.

    Through scripts/apt_quiet.py, so the package's sshd is neither started nor enabled at boot:
    every sshd of the tests is started by hand.
    """
    if os.access(SSHD, os.X_OK):
        return
    apt_quiet = Path(__file__).resolve().parents[1] / "scripts" / "apt_quiet.py"
    install = [sys.executable, str(apt_quiet), "--no-install-recommends", "openssh-server"]
    done = subprocess.run(install, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"apt-get install openssh-server failed:\n{done.stdout}{done.stderr}")
    if not os.access(SSHD, os.X_OK):
        raise RuntimeError(f"{SSHD} still missing after installing openssh-server")


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SshClient:
    """The primary's ssh setup: a key, known_hosts and an ssh_config in `directory`.

    One client reaches every :class:`SshServer` made with it, so one ``ORBIT_SSH`` value
    serves a primary with several nodes. ssh reads ~/.ssh of the passwd home (not $HOME)
    unless given ``-F``, so the command always carries ``-F``.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.key_path = directory / "id_ed25519"
        self.known_hosts = directory / "known_hosts"
        self.config_path = directory / "ssh_config"
        if not self.key_path.exists():
            _keygen(self.key_path, "orbit-test-client")
        self.public_key = (directory / "id_ed25519.pub").read_text()
        self.config_path.write_text(
            "Host *\n"
            f"    IdentityFile {self.key_path}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.known_hosts}\n"
            "    StrictHostKeyChecking accept-new\n"
            "    BatchMode yes\n"
            "    ConnectTimeout 5\n"
            # "Permanently added ... to the list of known hosts" would land on stderr.
            "    LogLevel ERROR\n"
        )

    def ssh_command(self) -> list[str]:
        return ["ssh", "-F", str(self.config_path)]

    def orbit_ssh_env(self) -> str:
        """The value for ORBIT_SSH: the ssh command as a shell-style command line."""
        return shlex.join(self.ssh_command())


class SshServer:
    """An sshd on 127.0.0.1:`port` standing for a node machine.

    `env` becomes ``SetEnv`` lines: every command run through this server sees it, as a
    node's commands see that machine's environment. The listener runs in the foreground
    (``-D``) as a child of the test process, in its own session.
    """

    def __init__(
        self,
        env: dict[str, str] | None = None,
        client: SshClient | None = None,
        base: Path | None = None,
    ) -> None:
        prefix = f"{SSHD_DIR_PREFIX}{os.getpid()}-"
        self.directory = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        # The marker finds every process a session started, also after it left the sshd's
        # process tree (a dropped connection orphans it; a detached shepherd never was in it).
        self.env = {**(env or {}), MARKER: str(self.directory)}
        for name, value in self.env.items():
            if not name.isidentifier() or any(c in value for c in '"\n\\'):
                raise ValueError(f"cannot pass {name}={value!r} through SetEnv")
        self.client = client or SshClient(self.directory / "client")
        self.port = free_port()
        self.config = self.directory / "sshd_config"
        self.log = self.directory / "sshd.log"
        self.host_key = self.directory / "ssh_host_ed25519_key"
        self.authorized_keys = self.directory / "authorized_keys"
        self.proc: subprocess.Popen[bytes] | None = None
        _keygen(self.host_key, "orbit-test-host")
        self.authorized_keys.write_text(self.client.public_key)
        self._write_config()

    def _write_config(self) -> None:
        lines = [
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {self.host_key}",
            f"PidFile {self.directory / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.authorized_keys}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            # The files live under /tmp (mode 1777), which StrictModes would refuse.
            "StrictModes no",
            "PrintMotd no",
            # Tests open many connections at once (mirroring, ControlMaster): no throttling.
            "MaxStartups 100",
            "MaxSessions 100",
            "LogLevel VERBOSE",
        ]
        if self.env:
            lines.append("SetEnv " + " ".join(f'"{k}={v}"' for k, v in self.env.items()))
        self.config.write_text("\n".join(lines) + "\n")

    def ssh_command(self) -> list[str]:
        return self.client.ssh_command()

    def orbit_ssh_env(self) -> str:
        return self.client.orbit_ssh_env()

    def url(self, user: str = "root") -> str:
        return f"ssh://{user}@127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        """Start sshd and wait until it accepts TCP connections; RuntimeError if it does not."""
        if self.proc is not None and self.proc.poll() is None:
            return
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # Debian's privilege separation dir
        check = subprocess.run([SSHD, "-t", "-f", str(self.config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"sshd refused {self.config}: {check.stderr.strip()}")
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-f", str(self.config), "-E", str(self.log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited with {self.proc.returncode}: {self._log_tail()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"sshd on port {self.port} did not listen within {timeout}s")

    def _log_tail(self) -> str:
        try:
            return self.log.read_text()[-2000:]
        except OSError:
            return "(no log)"

    def _descendants(self) -> list[psutil.Process]:
        if self.proc is None:
            return []
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def drop_connections(self) -> int:
        """Kill every per-connection sshd (not the listener); return how many were killed.

        Every live session and ControlMaster connection breaks at once; the commands those
        sessions ran are left as they are (as when the network drops), and new connections
        are accepted as before.
        """
        victims = [p for p in self._descendants() if _is_sshd(p)]
        kill_all(victims)
        return len(victims)

    def stop(self) -> None:
        """The node goes away: kill the listener, every connection and every command run."""
        if self.proc is None:
            return
        victims = [*self._descendants(), *_marked(str(self.directory))]
        with contextlib.suppress(psutil.NoSuchProcess):
            victims.append(psutil.Process(self.proc.pid))
        kill_all(list({p.pid: p for p in victims}.values()))
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.proc = None

    def run(
        self, command: str, *ssh_options: str, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        """Run `command` (a remote shell line) through this server as root."""
        argv = [*self.client.ssh_command(), *ssh_options, self.url(), command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def _is_sshd(proc: psutil.Process) -> bool:
    try:
        return proc.name() == "sshd"
    except psutil.Error:
        return False


def _marked(directory: str | None = None) -> list[psutil.Process]:
    """Processes carrying the marker (for `directory`, or any), this process excluded."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            value = proc.environ().get(MARKER)
        except psutil.Error:
            continue
        if value is not None and (directory is None or value == directory):
            found.append(proc)
    return found


def _is_leftover(directory: str) -> bool:
    """Whether `directory` is a test sshd's whose test process (the pid in its name) is gone."""
    name = Path(directory).name
    if not name.startswith(SSHD_DIR_PREFIX):
        return False
    owner = name[len(SSHD_DIR_PREFIX) :].split("-", 1)[0]
    return not (owner.isdigit() and psutil.pid_exists(int(owner)))


def cleanup_sshd_leftovers() -> int:
    """Kill every test sshd, and every process a session of it started, whose owning test
    process is gone; return how many processes were killed."""
    victims = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        # sshd rewrites its command line ("sshd: /usr/sbin/sshd -D -f CONFIG ... [listener]").
        found = re.search(r"-f (\S+)/sshd_config", " ".join(proc.info["cmdline"] or []))
        if proc.info["name"] == "sshd" and found and _is_leftover(found.group(1)):
            victims.append(proc)
    for proc in _marked():
        with contextlib.suppress(psutil.Error):
            if _is_leftover(proc.environ()[MARKER]):
                victims.append(proc)
    kill_all(victims)
    for directory in Path(tempfile.gettempdir()).glob(f"{SSHD_DIR_PREFIX}*"):
        if _is_leftover(str(directory)):
            shutil.rmtree(directory, ignore_errors=True)
    return len(victims)


def cleanup_leftovers() -> list[str]:
    """Remove what a crashed session left: orphaned test sshds and the second engine."""
    done = []
    n = cleanup_sshd_leftovers()
    if n:
        done.append(f"killed {n} process(es) of test sshds whose test process is gone")
    try:
        done.extend(cleanup_engine_leftovers())
    except RuntimeError as exc:  # a running session holds the engine: not a leftover
        done.append(f"second engine left alone: {exc}")
    return done


if __name__ == "__main__":
    if sys.argv[1:] != ["cleanup"]:
        sys.exit("usage: python tests/node_setup.py cleanup")
    for line in cleanup_leftovers() or ["nothing left behind"]:
        print(line)
