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
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from orbit.errors import ConflictError, UsageError
from orbit.notify.platforms import KINDS
from orbit.store.home import Home
from orbit.store.outbox import PROFILES_FILE
from orbit.store.profiles import Malformed, ProfileStore, entry_of, fields_of

EVENTS = ("succeeded", "failed", "group")
APP = "feishu-app"  # a Feishu (or Lark) app with a bot: cards to its paired users (orbit.feishu)
ALL_KINDS = (*KINDS, APP)


@dataclass
class Profile:
    name: str
    kind: str
    url: str  # the webhook's URL; for a feishu-app, the Open API's origin (notify/lark.py)
    secret: str | None = None  # for a feishu-app, the app secret
    on: list[str] = field(default_factory=lambda: ["failed", "group"])
    groups: list[str] = field(default_factory=list)  # empty: every run and group
    metric: str | None = None  # the group summary's best run by this metric
    # max or min; None: the group's objective decides (review/objective.py)
    metric_direction: str | None = None
    source: str = ""  # where the URL came from: "env:VAR", "stdin", "argument"
    created_at: str = ""
    app_id: str | None = None  # a feishu-app's `cli_…`

    @property
    def app(self) -> bool:
        return self.kind == APP

    def wants_run(self, state: str, group: str | None) -> bool:
        event = {"succeeded": "succeeded", "failed": "failed", "lost": "failed"}.get(state)
        return event in self.on and self.covers(group)

    def wants_group(self, group: str) -> bool:
        return "group" in self.on and self.covers(group)

    def covers(self, group: str | None) -> bool:
        return not self.groups or group in self.groups


def _parse(name: str, entry: dict[str, Any]) -> Profile:
    if entry.get("kind") not in ALL_KINDS or not entry.get("url"):
        raise Malformed("is malformed")
    if entry.get("kind") == APP and not (entry.get("app_id") and entry.get("secret")):
        raise Malformed("is malformed (a feishu-app needs app_id and secret)")
    known = fields_of(Profile, entry)
    if entry.get("metric_mode") == "min" and "metric_direction" not in entry:
        known["metric_direction"] = "min"  # written before directions: only --min was said
    return Profile(name=name, **known)


STORE: ProfileStore[Profile] = ProfileStore(
    file=PROFILES_FILE,
    kind="notify profile",
    command="orbit notify",
    top="profiles",
    parse=_parse,
    dump=lambda p: {k: v for k, v in entry_of(p).items() if k != "app_id" or v},
    secret=True,
    stamp="created_at",
    # Names Orbit uses for itself beside the profiles' own (notify/damaged/outbox/, the log's
    # `profile` of a damaged outbox event).
    reserved=("outbox",),
)
path_of, load, get, remove = STORE.path, STORE.load, STORE.get, STORE.remove


def add(home: Home, profile: Profile, *, replace: bool = False) -> Profile:
    check(profile)
    other = same_app(home, profile) if profile.app else None
    if other is not None:
        raise ConflictError(
            f"app {profile.app_id} is already the bot {other.name} of this home (one app, "
            f"one bot: Feishu hands each message to one connection); remove it first with "
            f"`orbit notify rm {other.name}`"
        )
    return STORE.add(home, profile, replace=replace)


def check(profile: Profile) -> None:
    """Everything a profile needs, said before anything is stored."""
    STORE.check_name(profile.name)
    if profile.kind not in ALL_KINDS:
        raise UsageError(f"--kind must be one of {', '.join(ALL_KINDS)}, got {profile.kind!r}")
    if profile.app:
        check_app(profile)
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


def check_app(profile: Profile) -> None:
    """A feishu-app's id and secret, and one profile per app in this home (Feishu hands each
    event to one connection: two bots on one app would each miss half the messages)."""
    app_id = profile.app_id or ""
    if not re.fullmatch(r"cli_[0-9A-Za-z]+", app_id):
        raise UsageError(f"--app-id takes a Feishu app id (cli_…), got {app_id!r}")
    if not profile.secret:
        raise UsageError("a feishu-app needs its app secret: --secret-stdin or --secret-env VAR")


def same_app(home: Home, profile: Profile) -> Profile | None:
    """Another profile of this home bound to `profile`'s app, if any."""
    for other in load(home).values():
        if other.app and other.app_id == profile.app_id and other.name != profile.name:
            return other
    return None


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
        "app_id": profile.app_id,
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
