"""apt-get install that starts nothing and enables nothing at boot (sshd, munge, slurm, …).

The test setup installs servers only to start its own copies of them (on loopback, from files
of its own); the packages' maintainer scripts would start them at once and enable them at every
boot (sshd on 0.0.0.0:22). So, during the install, a /usr/sbin/policy-rc.d answers 101 (action
forbidden) to invoke-rc.d and deb-systemd-invoke, and nothing starts; afterwards the links the
install made to enable services are undone: `deb-systemd-helper disable UNIT` (a later upgrade
of the package then keeps it disabled) and `update-rc.d NAME disable`, and any link of the
install still left under /etc/systemd/system or /etc/rc?.d is removed. A policy-rc.d that was
there before stays as it was.

Usage (as root): python3 scripts/apt_quiet.py [--no-install-recommends] PACKAGE...
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

POLICY = "#!/bin/sh\n# Orbit's scripts/apt_quiet.py: no service starts now\nexit 101\n"
APT = ["apt-get", "-o", "DPkg::Lock::Timeout=300"]


def boot_links(root: Path) -> dict[Path, str]:
    """Every symbolic link that enables something at boot: under etc/systemd/system and in
    etc/rc?.d, with its target."""
    found: dict[Path, str] = {}
    places = [root / "etc/systemd/system", *sorted((root / "etc").glob("rc?.d"))]
    for place in places:
        for path in place.rglob("*") if place.is_dir() else ():
            if path.is_symlink():
                found[path] = os.readlink(path)
    return found


def undo_links(root: Path, new: dict[Path, str]) -> list[Path]:
    """Disable what the links in `new` enable (with Debian's helpers when `root` is the real
    one), then remove those still there; the links removed or disabled."""
    if root == Path("/"):
        units = sorted({Path(t).name for p, t in new.items() if "systemd" in p.parts})
        scripts = sorted({Path(t).name for p, t in new.items() if p.parent.name.startswith("rc")})
        for unit in units if shutil.which("deb-systemd-helper") else ():
            subprocess.run(["deb-systemd-helper", "disable", unit], capture_output=True)
        for script in scripts if shutil.which("update-rc.d") else ():
            subprocess.run(["update-rc.d", script, "disable"], capture_output=True)
    for path in new:
        # update-rc.d disable leaves K (stop) links, which enable nothing; S links go
        if path.is_symlink() and not path.name.startswith("K"):
            path.unlink()
    return sorted(new)


def quiet_install(command: Sequence[str], root: Path = Path("/")) -> int:
    """Run `command` (an install) with services forbidden to start, then undo the boot links
    it made; its exit status."""
    policy = root / "usr/sbin/policy-rc.d"
    ours = not policy.exists()
    before = boot_links(root)
    if ours:
        policy.parent.mkdir(parents=True, exist_ok=True)
        policy.write_text(POLICY)
        policy.chmod(0o755)
    try:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        code = subprocess.run(list(command), env=env).returncode
    finally:
        if ours:
            policy.unlink(missing_ok=True)
        after = boot_links(root)
        undo_links(root, {p: t for p, t in after.items() if p not in before})
    return code


def main(argv: list[str]) -> int:
    if not argv or all(a.startswith("-") for a in argv):
        print("usage: apt_quiet.py [--no-install-recommends] PACKAGE...", file=sys.stderr)
        return 2
    code = quiet_install([*APT, "install", "-y", "-q", *argv])
    if code != 0:  # stale or missing package lists: once more after an update
        subprocess.run([*APT, "update", "-q"], stdout=subprocess.DEVNULL)
        code = quiet_install([*APT, "install", "-y", "-q", *argv])
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
