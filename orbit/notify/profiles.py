"""Notification profiles: where messages go and which ones.

    ORBIT_HOME/notify.yaml   (mode 0600, replaced atomically)
    format: 1
    profiles:
      NAME: {kind, url, secret, on: [succeeded, failed, group], groups: [...],
             metric, metric_direction, source, created_at}

The URL of a chat tool's webhook is itself a credential (whoever has it may post), so it is
kept like the secret: read from an environment variable or stdin, stored only here, and shown
as `https://host/…last4`. Nothing in this module prints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from orbit.errors import ConflictError, CorruptError, NotFoundError, UsageError
from orbit.notify.platforms import KINDS
from orbit.store.files import atomic_write, dump_yaml, read_yaml
from orbit.store.home import Home
from orbit.store.model import now_iso
from orbit.store.outbox import PROFILES_FILE

FORMAT = 1
EVENTS = ("succeeded", "failed", "group")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Names Orbit uses for itself beside the profiles' own (notify/damaged/outbox/, the log's
# `profile` of a damaged outbox event).
RESERVED = ("outbox",)


@dataclass
class Profile:
    name: str
    kind: str
    url: str
    secret: str | None = None
    on: list[str] = field(default_factory=lambda: ["failed", "group"])
    groups: list[str] = field(default_factory=list)  # empty: every run and group
    metric: str | None = None  # the group summary's best run by this metric
    # max or min; None: the group's objective decides (review/objective.py)
    metric_direction: str | None = None
    source: str = ""  # where the URL came from: "env:VAR", "stdin", "argument"
    created_at: str = ""

    def wants_run(self, state: str, group: str | None) -> bool:
        event = {"succeeded": "succeeded", "failed": "failed", "lost": "failed"}.get(state)
        return event in self.on and self.covers(group)

    def wants_group(self, group: str) -> bool:
        return "group" in self.on and self.covers(group)

    def covers(self, group: str | None) -> bool:
        return not self.groups or group in self.groups

    def hidden(self) -> list[str]:
        """The strings no output, log or other file may show."""
        return [s for s in (self.url, self.secret) if s]


def path_of(home: Home) -> Path:
    return home.root / PROFILES_FILE


def load(home: Home) -> dict[str, Profile]:
    path = path_of(home)
    if not path.exists():
        return {}
    data = read_yaml(path)
    version = data.get("format")
    if version != FORMAT:
        raise CorruptError(f"{path}: format {version!r} is not one this Orbit reads ({FORMAT})")
    entries = data.get("profiles") or {}
    if not isinstance(entries, dict):
        raise CorruptError(f"{path}: `profiles` is not a mapping; fix or remove it")
    out = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict) or entry.get("kind") not in KINDS or not entry.get("url"):
            raise CorruptError(f"{path}: profile {name!r} is malformed; fix or remove it")
        known = {k: v for k, v in entry.items() if k in Profile.__dataclass_fields__}
        known.pop("name", None)
        if entry.get("metric_mode") == "min" and "metric_direction" not in entry:
            known["metric_direction"] = "min"  # written before directions: only --min was said
        out[str(name)] = Profile(name=str(name), **known)
    return out


def save(home: Home, profiles: dict[str, Profile]) -> None:
    body = {
        "format": FORMAT,
        "profiles": {
            name: {k: v for k, v in asdict(p).items() if k != "name"}
            for name, p in sorted(profiles.items())
        },
    }
    home.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path_of(home), dump_yaml(body).encode(), mode=0o600)


def get(home: Home, name: str) -> Profile:
    profiles = load(home)
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none; add one with `orbit notify add`"
        raise NotFoundError(f"no notify profile {name!r} (profiles: {known})")
    return profiles[name]


def add(home: Home, profile: Profile, *, replace: bool = False) -> None:
    check(profile)
    profiles = load(home)
    if profile.name in profiles and not replace:
        raise ConflictError(
            f"notify profile {profile.name!r} exists; `orbit notify rm {profile.name}` first, "
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


def check(profile: Profile) -> None:
    """Everything a profile needs, said before anything is stored."""
    if not NAME.match(profile.name):
        raise UsageError(
            f"bad profile name {profile.name!r}: letters, digits, `.`, `_` and `-`, at most 64"
        )
    if profile.name in RESERVED:
        raise UsageError(f"bad profile name {profile.name!r}: Orbit uses it itself; choose another")
    if profile.kind not in KINDS:
        raise UsageError(f"--kind must be one of {', '.join(KINDS)}, got {profile.kind!r}")
    parts = urlsplit(profile.url)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or any(c.isspace() for c in profile.url)
    ):
        raise UsageError(f"the URL must be an http(s) URL, got {masked_url(profile.url)}")
    bad = [e for e in profile.on if e not in EVENTS]
    if bad or not profile.on:
        raise UsageError(f"--on takes {', '.join(EVENTS)} (comma-separated), got {','.join(bad)!r}")
    if profile.metric_direction not in (None, "max", "min"):
        raise UsageError(f"the metric's direction is max or min, got {profile.metric_direction!r}")


def parse_on(text: str) -> list[str]:
    return list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))


def masked_url(url: str | None) -> str:
    """`https://host/…last4`: enough to tell two hooks apart, never enough to post."""
    if not url:
        return "-"
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        if parts.port:
            host = f"{host}:{parts.port}"
        scheme = parts.scheme or "?"
    except ValueError:
        scheme, host = "?", "?"
    rest = url.split(host, 1)[-1] if host in url else url
    tail = rest[-4:] if len(rest) >= 16 else ""  # a short path could be read back whole
    return f"{scheme}://{host}/…{tail}"


def masked_secret(secret: str | None) -> str:
    if not secret:
        return "-"
    return f"…{secret[-4:]} ({len(secret)} characters)" if len(secret) >= 16 else "set"


def describe(profile: Profile) -> dict[str, Any]:
    """The profile as `notify list` shows it: URL and secret masked."""
    return {
        "name": profile.name,
        "kind": profile.kind,
        "url": masked_url(profile.url),
        "secret": masked_secret(profile.secret),
        "on": profile.on,
        "groups": profile.groups,
        "metric": profile.metric,
        "metric_direction": profile.metric_direction,
        "source": profile.source,
        "created_at": profile.created_at,
    }


def scrub(text: str, profiles: list[Profile] | Profile) -> str:
    """`text` with every URL and secret of `profiles` masked (an error may quote the URL)."""
    for p in profiles if isinstance(profiles, list) else [profiles]:
        if p.url:
            text = text.replace(p.url, masked_url(p.url))
            host_path = p.url.split("://", 1)[-1]
            text = text.replace(host_path, masked_url(p.url))
        if p.secret and len(p.secret) >= 4:
            text = text.replace(p.secret, "[secret]")
    return text


def read_value(
    flag: str,
    *,
    env_var: str | None,
    from_stdin: bool,
    environ: Mapping[str, str],
    stdin_text: str | None,
) -> tuple[str | None, str]:
    """A URL or secret from the one source given, and a description of that source."""
    if env_var:
        value = (environ.get(env_var) or "").strip()
        if not value:
            raise UsageError(f"--{flag}-env {env_var}: not set in this environment")
        return value, f"env:{env_var}"
    if from_stdin:
        value = (stdin_text or "").strip()
        if not value:
            raise UsageError(f"--{flag}-stdin: nothing on stdin")
        return value, "stdin"
    return None, ""
