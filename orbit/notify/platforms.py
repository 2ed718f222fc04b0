"""Each platform's native shape, signature, limits and answer (docs/notify.md).

    render(kind, url, secret, message, now) -> Request   what to POST, signed, within limits
    judge(kind, status, body) -> Verdict                   sent, retry later, or given up
    RATES[kind]                                            how fast one endpoint may be sent to
"""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("feishu", "dingtalk", "wecom", "slack", "webhook")


@dataclass(frozen=True)
class Request:
    url: str  # the profile's URL, plus the signed query for dingtalk
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    retry: bool  # a failure worth retrying (429, 5xx, the platform's rate-limit code)
    detail: str  # the endpoint's answer, short, for `orbit notify log`


@dataclass(frozen=True)
class Rate:
    per_second: float | None  # at most this many per second (None: no limit)
    per_minute: float | None  # at most this many per minute (None: no limit)
