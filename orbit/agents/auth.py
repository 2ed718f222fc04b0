"""Auth profiles: how an agent CLI inside a run's container reaches its model.

    ORBIT_HOME/auth.json   (mode 0600)
    {"version": 1, "profiles": {NAME: {harness, kind, key, files, base_url, host_network,
                                       env, source, created_at, last_test}}}

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbit import harnesses
from orbit.errors import UsageError
from orbit.store.home import Home
from orbit.store.model import now_iso
from orbit.store.profiles import Malformed, ProfileStore, entry_of, fields_of

KINDS = ("login", "api-key", "relay")


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
    last_test: dict[str, Any] | None = None  # the last `orbit auth test`: {at, ok, run, state}

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


def _parse(name: str, entry: dict[str, Any]) -> Profile:
    if entry.get("harness") not in harnesses.ids():
        raise Malformed("is malformed")
    profile = Profile(name=name, **fields_of(Profile, entry))
    if not isinstance(profile.last_test, dict):
        profile.last_test = None  # only a record of the past: never a reason to refuse the file
    return profile


def _dump(profile: Profile) -> dict[str, Any]:
    entry = entry_of(profile)
    if entry["last_test"] is None:
        del entry["last_test"]  # a profile never tested is written as before it was kept
    return entry


STORE: ProfileStore[Profile] = ProfileStore(
    file="auth.json",
    kind="auth profile",
    command="orbit auth",
    top="profiles",
    parse=_parse,
    dump=_dump,
    json_format=True,
    version_key="version",
    secret=True,
    stamp="created_at",
)
auth_path, load, get, add, remove = STORE.path, STORE.load, STORE.get, STORE.add, STORE.remove


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
        "last_test": profile.last_test,
    }


def record_test(home: Home, name: str, *, ok: bool, run: str, state: str) -> None:
    """Keep the outcome of `orbit auth test NAME` in the profile (`last_test`), for `auth ls`
    and the web view's settings page."""

    def change(profile: Profile) -> None:
        profile.last_test = {"at": now_iso(), "ok": ok, "run": run, "state": state}

    STORE.update(home, name, change)


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
