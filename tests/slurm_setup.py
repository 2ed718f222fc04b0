"""A real Slurm cluster on this machine for the tests: Debian's slurmctld, two slurmd and munge.

Importable without pytest (`python tests/slurm_setup.py up|down`). Everything it starts lives
under BASE (a fixed path, so that a crashed earlier session's daemons are found and ended):
its own slurm.conf and gres.conf (commands and daemons find them through SLURM_CONF; the
machine's /etc/slurm is never touched), its own munged on its own socket, state, spool, logs
and pid files. Two slurmd run on this host (Slurm's MULTIPLE_SLURMD): node HOST and node
HOST2, each with 2 CPUs and 8000 MB; HOST has 2 stand-in GPUs as GRES, character devices
made with mknod (c 1 3, the null device: Slurm wants device files, and nothing reads them).
Process tracking is proctrack/linuxproc with task/none, so no cgroup directories are made.

The packages are installed when missing (apt-get), as scripts/test.sh does for CI.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

BASE = Path("/tmp/orbit-slurm-test")
CONF = BASE / "etc" / "slurm.conf"
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
PROGRAMS = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch", "/usr/sbin/munged")
CTLD_PORT = 16817  # not Slurm's defaults, so a Slurm the machine runs itself is never reached
NODE_PORTS = (16818, 16828)
PARTITION = "main"
NODE_MEM_MB = 8000


def host() -> str:
    return socket.gethostname().split(".")[0]


def nodes() -> tuple[str, str]:
    """The two node names: the host's own (the one with the GPUs) and a second one."""
    return host(), f"{host()}2"


def environ() -> dict[str, str]:
    """What a process needs to reach this cluster: SLURM_CONF."""
    return {"SLURM_CONF": str(CONF)}


def install() -> None:
    """Install the packages when a program is missing."""
    if all(os.path.exists(p) for p in PROGRAMS):
        return
    # Through scripts/apt_quiet.py: munged, slurmctld and slurmd are neither started nor enabled
    apt_quiet = Path(__file__).resolve().parents[1] / "scripts" / "apt_quiet.py"
    install = [sys.executable, str(apt_quiet), "--no-install-recommends", *PACKAGES]
    subprocess.run(install, check=True, capture_output=True)


def _config() -> str:
    a, b = nodes()
    lines = [
        "ClusterName=orbittest",
        f"SlurmctldHost={host()}",
        f"SlurmctldPort={CTLD_PORT}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={BASE / 'munge' / 'munge.socket'}",
        "MpiDefault=none",
        "MailProg=/usr/bin/true",
        f"StateSaveLocation={BASE / 'state'}",
        f"SlurmdSpoolDir={BASE / 'spool'}/%n",
        f"SlurmctldPidFile={BASE / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={BASE / 'run'}/slurmd-%n.pid",
        f"SlurmctldLogFile={BASE / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={BASE / 'log'}/slurmd-%n.log",
        "ReturnToService=2",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "KillWait=20",
        "GresTypes=gpu",
        f"NodeName={a} NodeHostname={host()} NodeAddr=127.0.0.1 Port={NODE_PORTS[0]} CPUs=2 "
        f"RealMemory={NODE_MEM_MB} Gres=gpu:2 State=UNKNOWN",
        f"NodeName={b} NodeHostname={host()} NodeAddr=127.0.0.1 Port={NODE_PORTS[1]} CPUs=2 "
        f"RealMemory={NODE_MEM_MB} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def _gres() -> str:
    return f"AutoDetect=off\nNodeName={nodes()[0]} Name=gpu File={BASE / 'dev'}/gpu[0-1]\n"


def _pids() -> list[tuple[int, str]]:
    """(pid, name) of the daemons a session started, from their pid files under BASE."""
    found = []
    for pidfile in sorted((BASE / "run").glob("*.pid")):
        try:
            found.append((int(pidfile.read_text().split()[0]), pidfile.stem))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _ours(pid: int) -> bool:
    """True when `pid` is a Slurm or munge daemon started with this cluster's files."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except OSError:
        return False
    daemon = any(name in cmdline for name in ("slurmctld", "slurmd", "munged"))
    return daemon and (str(BASE) in cmdline or str(CONF) in environ)


def down(timeout: float = 20.0) -> None:
    """Stop this cluster (also one a crashed session left): `scontrol shutdown`, then SIGTERM
    and SIGKILL to the daemons named by our pid files, then remove BASE."""
    if CONF.exists() and shutil.which("scontrol"):
        try:
            subprocess.run(
                ["scontrol", "shutdown"],
                env={**os.environ, **environ()},
                capture_output=True,
                timeout=10,
            )
        except subprocess.TimeoutExpired:
            pass
    found = [(pid, name) for pid, name in _pids() if _ours(pid)]
    for pid, name in found:
        if name == "munged":  # scontrol shutdown does not reach it
            _signal(pid, signal.SIGTERM)
    pids = [pid for pid, _ in found]
    deadline = time.monotonic() + timeout
    sent_term = False
    while pids:
        if time.monotonic() > deadline - timeout / 2 and not sent_term:
            for pid in pids:
                _signal(pid, signal.SIGTERM)
            sent_term = True
        if time.monotonic() > deadline:
            for pid in pids:
                _signal(pid, signal.SIGKILL)
            time.sleep(0.2)
            break
        time.sleep(0.1)
        pids = [pid for pid in pids if _ours(pid)]
    shutil.rmtree(BASE, ignore_errors=True)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def up(timeout: float = 30.0) -> dict[str, str]:
    """Start the cluster from scratch (ending any leftover first); the environment to reach it."""
    install()
    down()
    for sub in ("etc", "state", "spool", "run", "log", "dev", "munge"):
        (BASE / sub).mkdir(parents=True, exist_ok=True)
    BASE.chmod(0o755)
    for node in nodes():
        (BASE / "spool" / node).mkdir(exist_ok=True)
    for i in range(2):
        os.mknod(BASE / "dev" / f"gpu{i}", 0o666 | 0o020000, os.makedev(1, 3))
    CONF.write_text(_config())
    (BASE / "etc" / "gres.conf").write_text(_gres())
    munge_dir = BASE / "munge"
    shutil.chown(munge_dir, "munge", "munge")
    munge_dir.chmod(0o755)  # munged wants its socket directory open to all
    env = {**os.environ, **environ()}
    subprocess.run(
        [
            "runuser",
            "-u",
            "munge",
            "--",
            "/usr/sbin/munged",
            f"--socket={munge_dir / 'munge.socket'}",
            f"--pid-file={munge_dir / 'munged.pid'}",
            f"--log-file={munge_dir / 'munged.log'}",
            f"--seed-file={munge_dir / 'munged.seed'}",
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    _wait(lambda: (munge_dir / "munged.pid").exists(), 10, "munged did not start")
    # Our pid files all live in run/, where down() looks (munge's own dir is munge's).
    pid = (munge_dir / "munged.pid").read_text().strip()
    (BASE / "run" / "munged.pid").write_text(pid + "\n")
    subprocess.run(["/usr/sbin/slurmctld"], check=True, env=env, capture_output=True)
    for node in nodes():
        subprocess.run(["/usr/sbin/slurmd", "-N", node], check=True, env=env, capture_output=True)
    _wait(lambda: _idle(env) == set(nodes()), timeout, "the nodes did not become idle")
    return environ()


def _idle(env: dict[str, str]) -> set[str]:
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %t"], env=env, capture_output=True, text=True
    ).stdout
    return {line.split()[0] for line in out.splitlines() if line.split()[1:] == ["idle"]}


def _wait(pred: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return
        time.sleep(0.1)
    logs = "".join(
        f"\n--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
        for p in sorted((BASE / "log").glob("*.log"))
    )
    raise RuntimeError(f"{what}{logs}")


if __name__ == "__main__":
    if sys.argv[1:] == ["up"]:
        print(f"export SLURM_CONF={up()['SLURM_CONF']}")
    elif sys.argv[1:] == ["down"]:
        down()
    else:
        sys.exit("usage: slurm_setup.py up|down")
