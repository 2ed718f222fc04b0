"""Auth profiles: how an agent CLI inside a run's container reaches its model.

    ORBIT_HOME/auth.json   (mode 0600)
    {"version": 1, "profiles": {NAME: {harness, kind, key, files, base_url, host_network,
                                       env, source, created_at}}}

A profile is one of three kinds. `api-key`: the provider's API key. `login`: the agent's own
login (Claude Code: a `claude setup-token` OAuth token; Codex: the auth.json its login flow
writes). `relay`: a gateway's URL and key. Secrets come from stdin, an environment variable or a
file, never from arguments, and nothing here prints one: `describe` shows the last characters.
How a profile becomes a container's environment and files is orbit/agents/incontainer.py.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orbit import harnesses
from orbit.errors import ConflictError, CorruptError, NotFoundError, UsageError
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.model import now_iso

KINDS = ("login", "api-key", "relay")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
VERSION = 1


@dataclass
class Profile:
    name: str
    harness: str
    kind: str
    key: str | None = None  # API key, OAuth token or relay key
    files: dict[str, str] = field(default_factory=dict)  # e.g. Codex's auth.json
    base_url: str | None = None
    host_network: bool = False
    env: dict[str, str] = field(default_factory=dict)  # non-secret: model choices
    source: str = ""  # where the secret came from ("stdin", "env:VAR", "file", "device login")
    created_at: str = ""

    def secret_strings(self) -> list[str]:
        """Every secret string of the profile, for redaction: the key and the string values of
        its files' JSON (tokens), long enough to be worth hiding."""
        found = [self.key] if self.key else []
        for text in self.files.values():
            found.extend(_strings(_json_or_none(text)))
        return [s for s in found if len(s) >= 8]


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def auth_path(home: Home) -> Path:
    return home.root / "auth.json"


def load(home: Home) -> dict[str, Profile]:
    path = auth_path(home)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CorruptError(f"{path} cannot be read ({exc}); fix or remove it") from None
    profiles = data.get("profiles") if isinstance(data, dict) else None
    if not isinstance(profiles, dict):
        raise CorruptError(f"{path} has no `profiles` object; fix or remove it")
    out = {}
    for name, entry in profiles.items():
        if not isinstance(entry, dict) or entry.get("harness") not in harnesses.ids():
            raise CorruptError(f"{path}: profile {name!r} is malformed; fix or remove it")
        known = {k: v for k, v in entry.items() if k in Profile.__dataclass_fields__}
        known.pop("name", None)
        out[str(name)] = Profile(name=str(name), **known)
    return out


def save(home: Home, profiles: dict[str, Profile]) -> None:
    body = {
        "version": VERSION,
        "profiles": {
            name: {k: v for k, v in asdict(p).items() if k != "name"}
            for name, p in sorted(profiles.items())
        },
    }
    home.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(auth_path(home), (json.dumps(body, indent=2) + "\n").encode(), mode=0o600)


def get(home: Home, name: str) -> Profile:
    profiles = load(home)
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none; add one with `orbit auth add`"
        raise NotFoundError(f"no auth profile {name!r} (profiles: {known})")
    return profiles[name]


def add(home: Home, profile: Profile, *, replace: bool = False) -> None:
    if not NAME.match(profile.name):
        raise UsageError(
            f"bad profile name {profile.name!r}: letters, digits, `.`, `_` and `-`, at most 64"
        )
    profiles = load(home)
    if profile.name in profiles and not replace:
        raise ConflictError(
            f"auth profile {profile.name!r} exists; `orbit auth rm {profile.name}` first, "
            "or add it again with --replace"
        )
    profile.created_at = profile.created_at or now_iso()
    profiles[profile.name] = profile
    save(home, profiles)


def remove(home: Home, name: str) -> Profile:
    profiles = load(home)
    profile = get(home, name)
    del profiles[name]
    save(home, profiles)
    return profile


def masked(secret: str | None) -> str:
    """A secret as `auth list` shows it: never more than its last four characters."""
    if not secret:
        return "-"
    if len(secret) < 16:
        return f"set ({len(secret)} characters)"
    return f"…{secret[-4:]} ({len(secret)} characters)"


def describe(profile: Profile) -> dict[str, Any]:
    """The profile for `auth list`: every field but the secrets, which are masked."""
    return {
        "name": profile.name,
        "harness": profile.harness,
        "kind": profile.kind,
        "secret": masked(profile.key) if profile.key else ", ".join(sorted(profile.files)) or "-",
        "base_url": profile.base_url,
        "host_network": profile.host_network,
        "env": profile.env,
        "source": profile.source,
        "created_at": profile.created_at,
    }


# --- reading a secret ---------------------------------------------------------------------
def read_key(
    *,
    key_env: str | None,
    key_stdin: bool,
    key_file: str | None,
    environ: Mapping[str, str],
    stdin_text: str | None,
) -> tuple[str | None, str]:
    """The secret from the one source given, and a description of that source."""
    if key_env:
        value = environ.get(key_env)
        if not value:
            raise UsageError(f"--key-env {key_env}: not set in this environment")
        return value.strip(), f"env:{key_env}"
    if key_stdin:
        value = (stdin_text or "").strip()
        if not value:
            raise UsageError("--key-stdin: nothing on stdin")
        return value, "stdin"
    if key_file:
        try:
            value = Path(key_file).expanduser().read_text().strip()
        except OSError as exc:
            raise UsageError(f"--key-file {key_file}: {exc.strerror or exc}") from None
        if not value:
            raise UsageError(f"--key-file {key_file}: the file is empty")
        return value, "file"
    return None, ""


def from_environment(harness: str, kind: str, environ: Mapping[str, str]) -> Profile:
    """A profile's secret, URL and models taken from this environment (and from wherever else
    the harness keeps them: orbit/harnesses/)."""
    found = harnesses.cli_of(harness).from_environment(kind, environ)
    return Profile(
        name="",
        harness=harness,
        kind=kind,
        key=found.key,
        files=found.files,
        base_url=found.base_url,
        env=found.env,
        source=found.source,
    )


def check(profile: Profile) -> None:
    """What each kind needs, said before anything is stored."""
    if profile.kind == "relay" and not profile.base_url:
        raise UsageError("--kind relay needs --base-url URL (or --from-env with the URL set)")
    if profile.base_url and not re.match(r"^https?://[^\s/]+", profile.base_url):
        raise UsageError(f"--base-url must be an http(s) URL, got {profile.base_url!r}")
    if not profile.key and not profile.files:
        raise UsageError(
            f"--kind {profile.kind} needs a secret: --key-env VAR, --key-stdin or --key-file"
        )


def private_dir(home: Home) -> Path:
    """An empty folder only this user can enter, for a login flow's home."""
    base = home.runtime_dir / "login"
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = base / f"{os.getpid()}-{os.urandom(4).hex()}"
    path.mkdir(mode=0o700)
    return path
