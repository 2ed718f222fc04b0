"""What the test setup leaves behind: its installs start and enable nothing at boot
(scripts/apt_quiet.py), and no process of a test's home outlives the session.

apt_quiet.py is tested against a root of its own (a temporary directory) and an "install" that
does what a server package's maintainer scripts do: ask policy-rc.d whether it may start the
service, and link the service into the boot targets. The real installs (scripts/test.sh,
ensure-docker.sh, tests/node_setup.py, tests/slurm_setup.py) go through it with the real root.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import apt_quiet  # noqa: E402

TRAP_TERM = (
    "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(os.environ['ORBIT_HOME'] + '.ready', 'w'); time.sleep(60)"
)

# What openssh-server's postinst does, in short: enable at boot, then start unless forbidden.
POSTINST = """
set -e
mkdir -p "$R/etc/systemd/system/multi-user.target.wants" "$R/etc/rc2.d" "$R/etc/rc0.d"
ln -s /lib/systemd/system/ssh.service "$R/etc/systemd/system/multi-user.target.wants/ssh.service"
ln -s /lib/systemd/system/ssh.service "$R/etc/systemd/system/sshd.service"
ln -s ../init.d/ssh "$R/etc/rc2.d/S01ssh"
ln -s ../init.d/ssh "$R/etc/rc0.d/K01ssh"
if "$R/usr/sbin/policy-rc.d" ssh start; then echo started > "$R/started"; else
    echo "forbidden $?" > "$R/started"; fi
"""


def install(root: Path) -> int:
    return apt_quiet.quiet_install(["sh", "-c", f"R={root}; {POSTINST}"], root=root)


def test_an_install_starts_nothing_and_enables_nothing(tmp_path: Path) -> None:
    wants = tmp_path / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True)
    (wants / "docker.service").symlink_to("/lib/systemd/system/docker.service")  # was there
    assert install(tmp_path) == 0
    assert (tmp_path / "started").read_text() == "forbidden 101\n"
    assert not (tmp_path / "usr/sbin/policy-rc.d").exists(), "the policy is for the install only"
    links = sorted(str(p.relative_to(tmp_path)) for p in apt_quiet.boot_links(tmp_path))
    assert links == [
        "etc/rc0.d/K01ssh",  # a stop link: what `update-rc.d ssh disable` leaves
        "etc/systemd/system/multi-user.target.wants/docker.service",
    ]


def test_a_policy_that_was_there_stays(tmp_path: Path) -> None:
    policy = tmp_path / "usr/sbin/policy-rc.d"
    policy.parent.mkdir(parents=True)
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    assert install(tmp_path) == 0
    assert policy.read_text() == "#!/bin/sh\nexit 101\n"


def test_the_setup_installs_packages_only_through_it() -> None:
    """No direct `apt-get install` in the setup, but for docker.io (whose engine is the point)."""
    direct = re.compile(r'apt-get\b.*\binstall -y|"install", "-y"')
    files = ["scripts/test.sh", "scripts/ensure-docker.sh", "tests/node_setup.py"]
    found = [
        f"{name}: {line.strip()}"
        for name in [*files, "tests/slurm_setup.py"]
        for line in (REPO / name).read_text().splitlines()
        if direct.search(line)
    ]
    assert found == [
        "scripts/ensure-docker.sh: NEEDRESTART_MODE=l apt-get -o DPkg::Lock::Timeout=300 "
        'install -y -q "${engine[@]}"; } \\'
    ]
    assert all("apt_quiet.py" in (REPO / name).read_text() for name in files)


def test_no_process_of_a_sessions_home_outlives_it(tmp_path: Path) -> None:
    """What the session's end does (conftest.no_orbit_processes_left): a process of a home
    under the session's directory ends, even one that ignores SIGTERM; another home's stays."""
    from conftest import end_processes_of

    def start(home: Path, script: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "ORBIT_HOME": str(home)}
        return subprocess.Popen([sys.executable, "-c", script], env=env)

    base = tmp_path / "session"
    (base / "t1").mkdir(parents=True)
    sender = start(base / "t0" / "home", "import time; time.sleep(60)")
    stubborn = start(base / "t1" / "home", TRAP_TERM)
    other = start(tmp_path / "elsewhere", "import time; time.sleep(60)")
    try:
        until_ready = time.monotonic() + 10
        while not (base / "t1" / "home.ready").exists():  # the handler is set
            assert time.monotonic() < until_ready
            time.sleep(0.01)
        assert end_processes_of(base, grace_s=1) == sorted([sender.pid, stubborn.pid])
        # ended (reaped by psutil already, so no exit status here); the stubborn one by SIGKILL
        sender.wait(5)
        stubborn.wait(5)
        assert other.poll() is None
    finally:
        for proc in (sender, stubborn, other):
            proc.kill()
            proc.wait()
