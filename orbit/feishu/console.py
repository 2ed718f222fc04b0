"""The developer console's pages of an app, in one place: where a person fixes what `orbit feishu
init` or `check` found wrong (docs/notify.md#orbit-feishu-check).

    https://open.feishu.cn/app/<app_id>/event?tab=event   events: the subscription mode
                                                          (persistent connection), the events
    https://open.feishu.cn/app/<app_id>/auth              permissions (scopes); with `?q=` the
                                                          missing ones are offered at once
    https://open.feishu.cn/app/<app_id>/bot               the bot ability
    https://open.feishu.cn/app/<app_id>/baseinfo          the app id and secret
    https://open.feishu.cn/app/<app_id>/version           versions: publish one (changes to
                                                          permissions and events take effect then)

Lark's are the same paths on open.larksuite.com. A stand-in's Open API origin (tests) gets
Feishu's console: there is none to point at.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from orbit.notify.lark import DOMAINS

CONSOLES = {"feishu": "https://open.feishu.cn", "lark": "https://open.larksuite.com"}

# What the bot needs of its app (feishu/registration.py asks for them when it creates one).
SCOPES = (
    "im:message:send_as_bot",  # send cards
    "im:message:update",  # update them (a run's card as it goes)
    "im:message.p2p_msg:readonly",  # read what a user says to the bot
    "im:message.group_at_msg:readonly",  # and what a group says to it when it is mentioned
    "im:resource",  # upload the curves' images
)
EVENTS = ("im.message.receive_v1",)


@dataclass(frozen=True)
class Fix:
    page: str  # events, permissions, bot, credentials, version
    url: str
    why: str

    def line(self) -> str:
        return f"  {self.page}: {self.url} ({self.why})"

    def as_json(self) -> dict[str, str]:
        return {"page": self.page, "url": self.url, "why": self.why}


def console_of(base: str) -> str:
    """The console's origin for an app whose Open API is at `base` (a profile's url)."""
    return CONSOLES["lark"] if base.rstrip("/") == DOMAINS["lark"] else CONSOLES["feishu"]


def app_page(base: str, app_id: str, path: str = "") -> str:
    return f"{console_of(base)}/app/{app_id}{path}"


def events(base: str, app_id: str) -> Fix:
    return Fix(
        "events",
        app_page(base, app_id, "/event?tab=event"),
        "subscription mode: receive events through persistent connection; "
        f"add the event {', '.join(EVENTS)}",
    )


def permissions(base: str, app_id: str) -> Fix:
    query = urlencode({"q": ",".join(SCOPES), "op_from": "openapi", "token_type": "tenant"})
    return Fix(
        "permissions", app_page(base, app_id, f"/auth?{query}"), f"grant {', '.join(SCOPES)}"
    )


def bot(base: str, app_id: str) -> Fix:
    return Fix("bot", app_page(base, app_id, "/bot"), "enable the bot ability")


def credentials(base: str, app_id: str, name: str) -> Fix:
    return Fix(
        "credentials",
        app_page(base, app_id, "/baseinfo"),
        "the app secret: copy it there, then `orbit notify add "
        f"{name} --kind feishu-app --app-id {app_id} --secret-stdin --replace`",
    )


def version(base: str, app_id: str) -> Fix:
    return Fix(
        "version",
        app_page(base, app_id, "/version"),
        "create and publish a version: the bot, permissions and events take effect then",
    )


# Feishu's codes that name what the app lacks (a send refused for them).
NO_SCOPE = {99991672, 99991679}  # "Access denied. One of the following scopes is required"
NOT_AVAILABLE = {230013, 230006}  # the bot may not reach this user / the bot is not enabled


def for_send(base: str, app_id: str, code: int) -> list[Fix]:
    """The pages to fix a test card Feishu refused with `code`."""
    if code in NO_SCOPE:
        return [permissions(base, app_id), version(base, app_id)]
    if code in NOT_AVAILABLE:
        return [bot(base, app_id), version(base, app_id)]
    return [permissions(base, app_id), version(base, app_id)]


def for_connection(base: str, app_id: str) -> list[Fix]:
    """The pages to fix a long connection that did not come up."""
    return [events(base, app_id), version(base, app_id)]
