"""dsh: a host-only agent Orbit installs skills for: in $DSH_AGENTS_HOME/skills (default
~/.agents/skills, shared with Codex and pi), or in one of dsh's own profiles
($DSH_HOME/profiles/NAME/skills, `orbit plugin install dsh --profile NAME`). Orbit runs no dsh
inside a container and reads no dsh transcript."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from orbit.errors import NotFoundError, UsageError
from orbit.harnesses.base import Harness, Skills, home_of


def dsh_home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("DSH_HOME") or home_of(environ) / ".dsh")


def skills(environ: Mapping[str, str], profile: str | None) -> Skills:
    if profile is not None:
        if not profile or "/" in profile or profile.startswith("."):
            raise UsageError(f"not a dsh profile name: {profile!r}")
        return Skills(dsh_home(environ) / "profiles" / profile / "skills")
    agents_home = environ.get("DSH_AGENTS_HOME")
    return Skills(Path(agents_home or home_of(environ) / ".agents") / "skills")


def check_install(profile: str | None, environ: Mapping[str, str]) -> None:
    """Refuse to install for a dsh that is not there: neither `dsh` on PATH nor its home (npx
    runs it without a command), or a profile it does not have (dsh makes its profiles)."""
    home = dsh_home(environ)
    if not shutil.which("dsh", path=environ.get("PATH", "")) and not home.is_dir():
        raise NotFoundError(
            f"dsh not found: no `dsh` on PATH and no {home}; install it (`npm install -g "
            "@deepseek-ai/dsh`) and run it once, or set DSH_HOME to its home"
        )
    if profile is not None and not (home / "profiles" / profile).is_dir():
        have = sorted(p.name for p in (home / "profiles").glob("*") if p.is_dir())
        known = f" (it has: {', '.join(have)})" if have else ""
        raise NotFoundError(
            f"no dsh profile {profile} in {home / 'profiles'}{known}; create it with dsh "
            f"first, or name one it has with --profile"
        )


HARNESS = Harness(
    id="dsh",
    display="dsh",
    plugin="dsh",
    skills=skills,
    profiles=True,
    check_install=check_install,
)
