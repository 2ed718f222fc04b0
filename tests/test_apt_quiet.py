"""scripts/apt_quiet.py: the test setup's installs start nothing and enable nothing at boot.

Against a root of its own (a temporary directory) and an "install" that does what a server
package's maintainer scripts do: ask policy-rc.d whether it may start the service, and link
the service into the boot targets. The real installs (scripts/test.sh, tests/node_setup.py,
tests/slurm_setup.py) go through the same function with the real root.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import apt_quiet  # noqa: E402

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
