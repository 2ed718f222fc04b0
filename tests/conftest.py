"""Test fixtures: a real Docker engine, locally built images, a temporary ORBIT_HOME per test.

Tests drive the real entry point, `orbit.cli.main(argv, env)`, in-process (shepherds are
forked from the test process exactly as from the CLI) or as real `python orbit.py` processes
where concurrency or `kill -9` matters.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docker_setup import BUSYBOX_IMAGE, PYTHON_IMAGE, REPO_ROOT, ensure_docker, ensure_test_images
from node_setup import SecondEngine, SshClient, SshServer, cleanup_sshd_leftovers, ensure_packages

from orbit.cli import main
from orbit.env import Env
from orbit.store.files import read_yaml

ORBIT_PY = str(REPO_ROOT / "orbit.py")
# A small CPU-only run without code: most tests need nothing bigger.
SMALL = ("--no-project", "--cpus", "1", "--mem", "0.25")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


class Orbit:
    """Runs the CLI against one temporary ORBIT_HOME."""

    def __init__(self, home: Path, cwd: Path) -> None:
        self.home = home
        self.cwd = cwd
        self.environ = {**os.environ, "ORBIT_HOME": str(home)}
        self.environ.pop("ORBIT_DATA", None)
        for var in ("ORBIT_AGENT_SESSION", "ORBIT_AGENT_HARNESS", "ORBIT_AGENT_TRANSCRIPT"):
            self.environ.pop(var, None)  # tests run from an agent session record none of it
        # Tests share this machine with their own load (pytest, dockerd, parallel suites): a
        # home does not subtract use outside Orbit unless a test turns it on to test it.
        self.configure(count_outside_use=False)

    def __call__(self, *args: str, stdin: str = "", cwd: Path | None = None) -> Result:
        out, err = io.StringIO(), io.StringIO()
        env = Env(
            environ=dict(self.environ),
            stdin=io.StringIO(stdin),
            stdout=out,
            stderr=err,
            cwd=cwd or self.cwd,
        )
        code = main(list(args), env)
        return Result(code, out.getvalue(), err.getvalue())

    def proc(self, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
        """`python orbit.py ARGS` as a real process (stdout/stderr piped)."""
        return subprocess.Popen(
            [sys.executable, ORBIT_PY, *args],
            cwd=kwargs.pop("cwd", self.cwd),
            env=self.environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **kwargs,
        )

    def configure(self, **settings: Any) -> None:
        import yaml

        path = self.home / "config.yaml"
        data = read_yaml(path) if path.exists() else {"format": 1}
        data.update(settings)
        self.home.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data))

    def run_dir(self, run_id: str) -> Path:
        return self.home / "runs" / run_id

    def status(self, run_id: str) -> dict[str, Any]:
        return read_yaml(self.run_dir(run_id) / "status.yaml")

    def events(self, run_id: str) -> list[dict[str, Any]]:
        path = self.run_dir(run_id) / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def events_when(
        self, run_id: str, pred: Callable[[list[str]], bool], timeout: float = 30
    ) -> list[str]:
        """The run's event names once `pred` holds for them. A status is replaced before its
        event is appended (store.runs.RunStore.update), so a finished status may be read a
        moment before its event: wait for the event rather than read it at once."""
        deadline = time.monotonic() + timeout
        names = [e["event"] for e in self.events(run_id)]
        while not pred(names):
            assert time.monotonic() < deadline, f"run {run_id}: events {names}"
            time.sleep(0.05)
            names = [e["event"] for e in self.events(run_id)]
        return names

    def wait_for(
        self, run_id: str, pred: Callable[[dict[str, Any]], bool], timeout: float = 60
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                status = self.status(run_id)
            except Exception:
                status = {}
            if status and pred(status):
                return status
            time.sleep(0.05)
        raise AssertionError(f"run {run_id} never reached the condition; last status {status}")

    def submit(self, *args: str) -> str:
        """`orbit run --json …` → the new run's id (asserting it was accepted)."""
        res = self("run", "--json", *args)
        assert res.code == 0, res.err
        return str(res.json()["id"])


# --- tiers (docs/testing.md) -------------------------------------------------------------------
# A test needs a service when it uses one of these fixtures, directly or through another fixture;
# files and tests that reach a service no fixture reveals carry the marker themselves.
SERVICE_FIXTURES = {
    "docker": ("docker_engine",),  # busybox, python_image, second_engine, ... all ask for it
    "sshd": ("ssh_client",),  # node_sshd asks for it
    "slurm": ("slurm_cluster",),  # tests/test_slurm.py
}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by these markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in SERVICE_FIXTURES.items():
            if used.intersection(fixtures):
                item.add_marker(marker)


@pytest.fixture(scope="session")
def docker_engine() -> None:
    ensure_docker()
    ensure_test_images()


@pytest.fixture(autouse=True)
def _marked_docker(request: pytest.FixtureRequest) -> None:
    """A test marked `docker` by hand gets the engine and images as the fixture's users do."""
    if request.node.get_closest_marker("docker"):
        request.getfixturevalue("docker_engine")


@pytest.fixture(scope="session", autouse=True)
def no_orbit_processes_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the session, end every process still working for a home under this session's
    temporary directory: a ticker (a test may leave runs queued, and pytest keeps the
    directories), a notification sender retrying a dead endpoint for minutes, a shepherd."""
    yield
    end_processes_of(tmp_path_factory.getbasetemp())


def end_processes_of(base: Path, grace_s: float = 5) -> list[int]:
    """End (SIGTERM, then SIGKILL after `grace_s`) every process whose environment has an
    ORBIT_HOME under `base`, other than this one; their pids."""
    import psutil

    prefix = str(base.resolve()) + os.sep
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get("ORBIT_HOME", "").startswith(prefix):
                proc.send_signal(signal.SIGTERM)
                found.append(proc)
        except psutil.Error:
            continue
    _, alive = psutil.wait_procs(found, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return sorted(p.pid for p in found)


@pytest.fixture(scope="session")
def _second_engine_session(docker_engine: None) -> Iterator[SecondEngine]:
    engine = SecondEngine()  # its first start removes what a crashed session left
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture
def second_engine(_second_engine_session: SecondEngine) -> SecondEngine:
    """The node machine's Docker engine (see docs/testing.md), one per session, started (or
    restarted, after a test killed or stopped it) for each test that asks for it."""
    _second_engine_session.start()
    return _second_engine_session


@pytest.fixture(scope="session")
def ssh_client(tmp_path_factory: pytest.TempPathFactory) -> SshClient:
    """The primary's ssh key and config: one for the session, reaching every `node_sshd`."""
    ensure_packages()
    cleanup_sshd_leftovers()
    return SshClient(tmp_path_factory.mktemp("ssh-client"))


@pytest.fixture(scope="session")
def node_sshd(
    ssh_client: SshClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., SshServer]]:
    """`node_sshd(env)` starts an sshd on its own port whose sessions see `env` (SetEnv);
    every one is stopped at the end of the session."""
    servers: list[SshServer] = []
    base = tmp_path_factory.getbasetemp()

    def make(env: dict[str, str] | None = None) -> SshServer:
        server = SshServer(env, client=ssh_client, base=base)
        servers.append(server)
        server.start()
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def busybox(docker_engine: None) -> str:
    return BUSYBOX_IMAGE


@pytest.fixture
def python_image(docker_engine: None) -> str:
    return PYTHON_IMAGE


@pytest.fixture
def orbit(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Orbit]:
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    o = Orbit(home, work)
    yield o
    stop_ticker(home)
    stop_bots(home)
    if request.node.get_closest_marker("docker"):  # a fast-tier test starts no container
        _cleanup_containers(home)


def _cleanup_containers(home: Path) -> None:
    """Remove every container this test's home started (their shepherds then settle)."""
    try:
        ids = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=orbit.home={home.resolve()}"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, timeout=60)


def stop_bots(home: Path) -> None:
    """End this home's Feishu bots (orbit/feishu/bot.py: `notify add --kind feishu-app` starts
    one), so that none goes on retrying a stand-in Feishu that is gone."""
    if not (home / "feishu").is_dir():
        return
    from orbit.feishu import control
    from orbit.store.home import Home

    for where in (home / "feishu").iterdir():
        with contextlib.suppress(Exception):
            control.stop(Home(home, {}), where.name)


def stop_ticker(home: Path, timeout: float = 20.0) -> None:
    """End this home's ticker (orbit/service/ticker.py), if one lives, so that no test leaves a
    process ticking its home behind; waits until its lock is free."""
    import psutil

    from orbit.store.locks import is_locked, lock_holder

    lock = home / "locks" / "ticker.lock"
    deadline = time.monotonic() + timeout
    while is_locked(lock):
        holder = lock_holder(lock)
        try:
            noted = json.loads((home / "runtime" / "ticker.json").read_text())["pid"]
        except (OSError, ValueError, KeyError):
            noted = None
        for pid in {noted, holder.pid if holder else None} - {None}:
            try:
                proc = psutil.Process(pid)
                if "orbit.service.ticker" in proc.cmdline():
                    proc.send_signal(signal.SIGTERM)
            except psutil.Error:
                pass
        assert time.monotonic() < deadline, f"the ticker of {home} did not stop"
        time.sleep(0.1)


def git_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(path), *cmd], check=True, env=env, capture_output=True)
    return path


# --- shepherds ---------------------------------------------------------------------------------
def shepherd_pid(orbit: Orbit, run_id: str) -> int:
    """The pid the run's shepherd wrote (it writes shepherd.pid once it holds the lock)."""
    path = orbit.run_dir(run_id) / "shepherd.pid"
    deadline = time.monotonic() + 20
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(path.read_text())


def kill_shepherd(orbit: Orbit, run_id: str) -> int:
    """SIGKILL the run's shepherd and wait until the kernel has released its lock (the thread
    group leader can read as a zombie while its other threads still hold the files); its pid.
    A shepherd already gone counts as killed (a successor may hold the lock by then)."""
    from orbit.store.locks import is_locked

    pid = shepherd_pid(orbit, run_id)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return pid  # it had ended already (its run finished): done, and its lock is not its own
    lock = orbit.run_dir(run_id) / "shepherd.lock"
    deadline = time.monotonic() + 10
    while is_locked(lock):
        assert time.monotonic() < deadline, "the killed shepherd still holds its lock"
        time.sleep(0.02)
    return pid


# --- other users -------------------------------------------------------------------------------
# The packages Orbit imports, copied where another user can read them (root's site-packages may
# sit in a home other users cannot enter).
PACKAGES = (
    "docker",
    "requests",
    "urllib3",
    "certifi",
    "idna",
    "charset_normalizer",
    "yaml",
    "portalocker",
    "psutil",
    "argcomplete",
    "typing_extensions",
)


def readable_site_packages(dest: Path) -> Path:
    """A world-readable copy of the installed packages Orbit imports, in `dest`."""
    import importlib
    import shutil
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    for name in PACKAGES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        origin = Path(module.__file__ or "").resolve()
        top = origin.parent if origin.name == "__init__.py" else origin
        if site not in top.parents:
            continue
        target = dest / top.relative_to(site)
        if top.is_dir():
            shutil.copytree(top, target, dirs_exist_ok=True)
        else:
            shutil.copy2(top, target)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dest


# --- the GPU stand-in (docs/gpus.md) -----------------------------------------------------------
STAND_IN_UUID = "GPU-00000000-0000-4000-8000-{:012d}"  # the stand-in's UUID for an index


def write_gpus(path: Path, gpus: list[dict[str, Any]]) -> Path:
    """Replace the stand-in file atomically, as an editor that renames would: a tick reading
    it at that moment sees the old or the new file, never half of one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump({"gpus": gpus}))
    os.replace(tmp, path)
    return path


def stand_in(orbit: Orbit, tmp_path: Path, n: int, **extra: Any) -> Path:
    """`n` idle 80 GiB stand-in GPUs, used by this test's Orbit (and its subprocesses)."""
    path = write_gpus(tmp_path / "gpus.yaml", [gpu(i, **extra) for i in range(n)])
    orbit.environ["ORBIT_FAKE_GPUS"] = str(path)
    return path


def gpu(index: int, **extra: Any) -> dict[str, Any]:
    return {"index": index, "name": "A100 (stand-in)", "memory_gb": 80, **extra}


# This session's own user, removed at its end (a crashed session's goes at the next start).
TESTER = f"orbit-tester-{os.getpid()}"


# --- a real non-root user ----------------------------------------------------------------------
@contextlib.contextmanager
def real_user(name: str) -> Iterator[tuple[int, int]]:
    """A real user `name` in the docker group, with a home; its uid and gid. Afterwards its
    processes are ended and it is removed with its home (userdel -r)."""
    subprocess.run(["useradd", "-m", "-G", "docker", name], check=True, capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid
    finally:
        remove_user(name)


def remove_user(name: str) -> None:
    import psutil

    uid = pwd.getpwnam(name).pw_uid
    for _ in range(50):  # a process still becoming the user (setpriv) is missed once: again
        for proc in psutil.process_iter(["uids"]):
            if proc.info["uids"] and proc.info["uids"].real == uid:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        done = subprocess.run(["userdel", "-r", name], capture_output=True)
        if done.returncode != 8:  # 8: the user is used by a process
            break
        time.sleep(0.1)
    done.check_returncode()


def remove_stale_testers() -> list[str]:
    """Remove the users of test sessions that are gone (orbit-tester-PID, PID not alive), and
    the plain `orbit-tester` that these tests' older versions left for good."""
    import psutil

    found = [
        (e.pw_name, re.fullmatch(r"orbit-tester(?:-(\d+))?", e.pw_name)) for e in pwd.getpwall()
    ]
    stale = [name for name, m in found if m and (m[1] is None or not psutil.pid_exists(int(m[1])))]
    for name in stale:
        remove_user(name)
    return stale


@pytest.fixture(scope="session")
def tester() -> Iterator[tuple[int, int]]:
    """This session's real user (TESTER) and its ids; removed at the end of the session."""
    remove_stale_testers()
    with real_user(TESTER) as ids:
        yield ids


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A temporary directory other users can enter (pytest's tmp_path is under a 0700 one);
    the test process's umask is put back after (a private home sets it too)."""
    path = Path(tempfile.mkdtemp(prefix="orbit-hard-"))
    path.chmod(0o755)
    saved = os.umask(0o022)
    os.umask(saved)
    yield path
    os.umask(saved)
    for home in path.iterdir():
        _cleanup_containers(home)
    subprocess.run(["chmod", "-R", "u+rwx", str(path)], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)
