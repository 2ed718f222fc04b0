"""A second Docker engine standing for a node machine's, beside the shared one.

Its own socket, data root, exec root, pidfile, cgroup parent and a bridge it never creates
or deletes itself: the bridge is made here before dockerd starts (``--bridge=none`` would
make dockerd delete the shared ``docker0``). ``--iptables=false`` keeps it out of the
shared NAT rules, so its containers have no outbound network. One session at a time uses
it: a lock file serializes sessions, and whoever takes the lock first removes what a crashed
session left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil
from docker_setup import BUSYBOX_IMAGE

SOCKET = "/run/orbit-test-docker2.sock"
DOCKER_HOST = f"unix://{SOCKET}"
ROOT = Path("/tmp/orbit-test-docker2")
LOCK = Path("/run/orbit-test-docker2.lock")
BRIDGE = "orbt-br2"
# The bridge's address (the containers' gateway); the first one free on this machine is used.
BRIDGE_ADDRESSES = ("172.31.254.1/24", "10.254.254.1/24", "192.168.254.1/24")
CGROUP_PARENT = "orbit-docker2"
CGROUP_ROOT = Path("/sys/fs/cgroup")


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def ping(path: str = SOCKET, timeout: float = 2.0) -> bool:
    """Whether the engine on unix socket `path` answers ``GET /_ping`` with OK."""
    conn = _UnixHTTP(path, timeout)
    try:
        conn.request("GET", "/_ping")
        return conn.getresponse().read() == b"OK"
    except OSError:
        return False
    finally:
        conn.close()


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def check_main_engine() -> None:
    """RuntimeError unless docker0 exists and the shared engine still runs a container."""
    if _run("ip", "link", "show", "docker0").returncode != 0:
        raise RuntimeError("the shared engine's bridge docker0 is gone")
    res = _run("docker", "run", "--rm", BUSYBOX_IMAGE, "true")
    if res.returncode != 0:
        raise RuntimeError(f"the shared engine no longer runs containers: {res.stderr.strip()}")


def free_bridge_address() -> str:
    """The first of BRIDGE_ADDRESSES whose subnet no interface address or route overlaps."""
    used = []
    for entry in json.loads(_run("ip", "-j", "addr").stdout or "[]"):
        for info in entry.get("addr_info", []):
            if info.get("family") == "inet":
                used.append(ipaddress.ip_network(f"{info['local']}/{info['prefixlen']}", False))
    for route in json.loads(_run("ip", "-j", "-4", "route").stdout or "[]"):
        if route.get("dst") not in (None, "default"):
            used.append(ipaddress.ip_network(route["dst"], strict=False))
    for candidate in BRIDGE_ADDRESSES:
        net = ipaddress.ip_network(candidate, strict=False)
        if not any(net.overlaps(u) for u in used):
            return candidate
    raise RuntimeError(f"every candidate subnet for {BRIDGE} is in use: {BRIDGE_ADDRESSES}")


class SecondEngine:
    """A second dockerd, reached at :attr:`docker_host`.

    `start()` after `kill()` restarts the engine on the same data root (as a machine coming
    back); `stop()` removes everything it made. Both check that the shared engine is intact.
    """

    def __init__(self, images: tuple[str, ...] = (BUSYBOX_IMAGE,), root: Path = ROOT) -> None:
        self.images = images
        self.root = root
        self.docker_host = DOCKER_HOST
        self.socket = SOCKET
        self.log = root / "dockerd.log"
        self.bridge_address = ""  # e.g. "172.31.254.1/24", once started
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock: int | None = None
        self.load_seconds: dict[str, float] = {}

    @property
    def subnet(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(self.bridge_address, strict=False)

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 60.0, lock_timeout: float = 600.0) -> None:
        """Start (or, after `kill()`, restart) the engine and wait until it answers _ping.

        The first start takes the lock (waiting up to `lock_timeout` for another session),
        removes leftovers, makes the bridge and loads `images` from the shared engine.
        """
        fresh = self._lock is None
        if fresh:
            self._lock = _take_lock(lock_timeout)
            try:
                teardown(self.root)
                self._prepare()
            except BaseException:
                self._release()
                raise
        elif self.proc is not None and self.proc.poll() is None:
            return
        self._launch(timeout)
        if fresh:
            for image in self.images:
                self.load_image(image)
        check_main_engine()

    def _prepare(self) -> None:
        self.bridge_address = free_bridge_address()
        for argv in (
            ("ip", "link", "add", "name", BRIDGE, "type", "bridge"),
            ("ip", "addr", "add", self.bridge_address, "dev", BRIDGE),
            ("ip", "link", "set", BRIDGE, "up"),
        ):
            res = _run(*argv)
            if res.returncode != 0:
                raise RuntimeError(f"{' '.join(argv)}: {res.stderr.strip()}")
        for sub in ("data", "exec"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # An empty configuration: /etc/docker/daemon.json belongs to the shared engine.
        (self.root / "daemon.json").write_text("{}\n")

    def _launch(self, timeout: float) -> None:
        argv = [
            "dockerd",
            "--config-file", str(self.root / "daemon.json"),
            "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "docker.pid"),
            "-H", self.docker_host,
            "--bridge", BRIDGE,
            "--iptables=false", "--ip-masq=false", "--ip-forward=false",
            "--cgroup-parent", f"/{CGROUP_PARENT}",
            # Only matters if dockerd used a system containerd instead of starting its own.
            "--containerd-namespace", "orbit-docker2",
            "--containerd-plugins-namespace", "orbit-docker2-plugins",
        ]  # fmt: skip
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while not ping(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the second dockerd did not come up:\n{tail}")
            time.sleep(0.05)

    def kill(self, containers: bool = False) -> None:
        """SIGKILL dockerd, as when its machine dies. Its containerd dies with it; the
        containers run on (their shims survive) unless `containers`, which SIGKILLs them and
        their shims too (a power loss).

        A restart (`start()`) then finds the containers that ran on still running and stops
        them (live-restore is off): stop signal, 10 s grace (a busybox `sleep` as PID 1 ignores
        SIGTERM), then SIGKILL: they end `exited`, code 137, and the restart takes ~11 s.
        Containers killed with `containers=True` are found dead: `exited`, code 255."""
        if self.proc is None:
            return
        containerd = _containerd(self.root)
        if containers:
            kill_all(_engine_processes(self.root))
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc = None
        # dockerd's containerd dies with it (parent-death signal) but stays a zombie until
        # PID 1 reaps it (~1 s here); a new dockerd would take the pid file for a live
        # containerd and wait for it in vain, so the file goes once containerd is dead.
        deadline = time.monotonic() + 10
        while containerd is not None and time.monotonic() < deadline:
            try:
                if containerd.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.02)
        else:
            if containerd is not None:
                raise RuntimeError(f"containerd {containerd.pid} outlived its killed dockerd")
        with contextlib.suppress(FileNotFoundError):
            (self.root / "exec" / "containerd" / "containerd.pid").unlink()

    def stop(self) -> None:
        """Remove every container, stop dockerd, then everything else it made (processes,
        mounts, directories, bridge, cgroups); release the lock; check the shared engine."""
        if self._lock is None:
            return
        try:
            if self.proc is not None and self.proc.poll() is None:
                ids = self.docker("ps", "-aq").stdout.split()
                if ids:
                    self.docker("rm", "-f", *ids)
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            self.proc = None
            teardown(self.root)
        finally:
            self._release()
        check_main_engine()

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    # ------------------------------------------------------------------ using it
    def docker(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """`docker -H DOCKER_HOST ARGS` (never raises on a non-zero exit)."""
        return _run("docker", "-H", self.docker_host, *args, timeout=timeout)

    def ensure_image(self, image: str) -> None:
        """`load_image(image)` unless the engine has it (orbit-test/python:3 takes ~3.5 s)."""
        if self.docker("image", "inspect", image).returncode != 0:
            self.load_image(image)

    def load_image(self, image: str) -> float:
        """Copy `image` from the shared engine (its store starts empty); return the seconds."""
        t0 = time.monotonic()
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(
            ["docker", "-H", self.docker_host, "load", "-q"],
            stdin=save.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
        assert save.stdout is not None
        save.stdout.close()
        if save.wait() != 0 or load.returncode != 0:
            raise RuntimeError(f"copying {image} to the second engine failed: {load.stderr}")
        self.load_seconds[image] = time.monotonic() - t0
        return self.load_seconds[image]


def _containerd(root: Path) -> psutil.Process | None:
    """The containerd the engine at `root` started, if it runs."""
    try:
        pid = int((root / "exec" / "containerd" / "containerd.pid").read_text())
        return psutil.Process(pid)
    except (OSError, ValueError, psutil.Error):
        return None


def _take_lock(timeout: float) -> int:
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise RuntimeError(
                    f"another test session holds {LOCK} (the second engine)"
                ) from None
            time.sleep(0.5)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd


def kill_all(procs: list[psutil.Process], timeout: float = 10) -> None:
    """SIGKILL `procs` and wait until each is gone or a zombie (PID 1 reaps orphans late)."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + timeout
    for proc in procs:
        while time.monotonic() < deadline:
            try:
                if proc.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.01)


def _engine_processes(root: Path) -> list[psutil.Process]:
    """dockerd, its containerd and shims (their command lines name `root`), and every process
    in a container (the cgroups under CGROUP_PARENT)."""
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid != os.getpid() and str(root) in " ".join(proc.info["cmdline"] or []):
            found[proc.pid] = proc
    for procs_file in (p for base in _cgroup_bases() for p in base.glob("**/cgroup.procs")):
        with contextlib.suppress(OSError):
            for pid in procs_file.read_text().split():
                with contextlib.suppress(psutil.Error):
                    found[int(pid)] = psutil.Process(int(pid))
    return list(found.values())


def _cgroup_bases() -> list[Path]:
    """CGROUP_PARENT in every hierarchy: one per controller (v1) or the one tree (v2)."""
    return [
        p
        for p in [CGROUP_ROOT / CGROUP_PARENT, *CGROUP_ROOT.glob(f"*/{CGROUP_PARENT}")]
        if p.is_dir()
    ]


def _mounts_under(root: Path) -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(root) or point.startswith(f"{root}/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)


def teardown(root: Path = ROOT) -> list[str]:
    """Remove whatever a second engine at `root` left: processes, mounts, directories, the
    bridge, its cgroups and socket. Return what was done (empty when nothing was there).

    Only for the holder of the lock (a running engine would be killed)."""
    done = []
    procs = _engine_processes(root)
    kill_all(procs)
    if procs:
        done.append(f"killed {len(procs)} process(es)")
    mounts = _mounts_under(root)
    for point in mounts:
        if _run("umount", point).returncode != 0:
            _run("umount", "-l", point)
    if mounts:
        done.append(f"unmounted {len(mounts)} mount(s)")
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)
        done.append(f"removed {root}")
    if _run("ip", "link", "show", BRIDGE).returncode == 0:
        _run("ip", "link", "del", BRIDGE)
        done.append(f"deleted bridge {BRIDGE}")
    cgroups = sorted((p for b in _cgroup_bases() for p in b.glob("**/")), key=lambda p: len(str(p)))
    for path in reversed(cgroups):
        with contextlib.suppress(OSError):
            path.rmdir()
    if cgroups:
        done.append(f"removed {len(cgroups)} cgroup(s)")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(SOCKET)
    return done


def cleanup_engine_leftovers() -> list[str]:
    """`teardown()` when no session holds the engine's lock; RuntimeError when one does."""
    fd = _take_lock(timeout=0)
    try:
        return [f"second engine: {step}" for step in teardown(ROOT)]
    finally:
        os.close(fd)
