"""Creating a Feishu app by QR code: the accounts host's app-registration device flow.

The official SDK has it (lark_oapi/scene/registration: `register_app`); this is the same flow
in the same shapes on the standard library, as notify/lark.py is for the Open API: no 5 s SDK
import before the QR code shows, a timeout on every request, no proxy from the environment, and
a stop that takes effect between requests. tests/test_feishu_init.py runs the SDK's own
`register_app` against the stand-in to keep the two the same.

    POST <accounts>/oauth/v1/app/registration   (form-encoded; answers are JSON, also on 4xx)
      action=init                       -> {"supported_auth_methods": ["client_secret", …]}
      action=begin, archetype=PersonalAgent, auth_method=client_secret, request_user_info=open_id
                                        -> {"device_code", "verification_uri_complete",
                                            "interval" (s, default 5), "expires_in" (s, 600)}
      action=poll, device_code=…        -> {"client_id", "client_secret", "user_info":
                                            {"open_id", "tenant_brand"}} once scanned and
                                           confirmed; else {"error": authorization_pending |
                                           slow_down (interval += 5) | access_denied |
                                           expired_token, "error_description"}; a user of a
                                           Lark tenant: {"user_info": {"tenant_brand": "lark"}}
                                           once, then the poll goes on at Lark's accounts host

The QR code's link is verification_uri_complete with the SDK's marks (from, tp, source), the
app's name, createOnly=true (always a new app) and `addons`: the permissions
and the event the bot needs (console.py: SCOPES, EVENTS) as JSON, gzip, base64url without
padding. `preset: false` leaves out the template's other permissions; the bot ability comes
with the PersonalAgent archetype.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from orbit.errors import ExitCode, OrbitError
from orbit.feishu.console import EVENTS, SCOPES
from orbit.notify.lark import ACCOUNTS

ENDPOINT = "/oauth/v1/app/registration"
SOURCE = "python-sdk/orbit"  # the SDK's `source` mark, with the caller's name
TIMEOUT_S = 10.0  # of one request
READ_LIMIT = 1024 * 1024
SLOW_DOWN_S = 5  # what slow_down adds to the interval (RFC 8628 and the SDK)
DEFAULT_INTERVAL_S = 5.0
DEFAULT_EXPIRES_S = 600.0
APP_NAME = "Orbit"


class RegistrationError(OrbitError):
    """The accounts host refused or could not be reached; one line."""

    exit_code = ExitCode.RUN_FAILED

    def __init__(self, message: str, error: str = "") -> None:
        self.error = error
        super().__init__(message)


class Denied(RegistrationError):
    pass


class Expired(RegistrationError):
    pass


class Stopped(RegistrationError):
    pass


@dataclass
class Begun:
    device_code: str
    url: str  # the QR code's link
    interval: float
    expires_in: float


@dataclass
class Registered:
    app_id: str
    secret: str
    open_id: str | None  # the scanner's, in this app
    brand: str  # feishu or lark: whose accounts host confirmed
    user_info: dict[str, Any] = field(default_factory=dict)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect, urllib.request.ProxyHandler({}))


def addons() -> dict[str, Any]:
    """What the new app comes with beyond the archetype's bot."""
    return {
        "preset": False,
        "scopes": {"tenant": list(SCOPES)},
        "events": {"items": {"tenant": list(EVENTS)}},
    }


def encode_addons(value: dict[str, Any]) -> str:
    """The `addons` query value: compact JSON, gzip (mtime 0), base64url without padding."""
    payload = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(gzip.compress(payload, mtime=0)).decode("ascii").rstrip("=")


def qr_url(verification_uri: str, name: str = APP_NAME) -> str:
    """verification_uri_complete with the marks, the app's preset name and the addons (a
    description too would only make the QR code larger)."""
    parts = urlsplit(verification_uri)
    query: dict[str, Any] = parse_qs(parts.query)
    query.update(
        {
            "from": "sdk",
            "tp": "sdk",
            "source": SOURCE,
            "name": name,
            "addons": encode_addons(addons()),
            "createOnly": "true",
        }
    )
    return urlunsplit(parts._replace(query=urlencode(query, doseq=True)))


class Flow:
    """One registration against `accounts` (Feishu's or Lark's host, or a stand-in's origin);
    `lark` is where a Lark tenant's scan is polled (the same origin for a stand-in)."""

    def __init__(
        self,
        accounts: str,
        lark: str | None = None,
        *,
        timeout: float = TIMEOUT_S,
        stop: threading.Event | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.accounts = accounts.rstrip("/")
        self.lark = (lark or ACCOUNTS["lark"]).rstrip("/")
        self.brand = "lark" if self.accounts == ACCOUNTS["lark"] else "feishu"
        self.timeout = timeout
        self.stop = stop or threading.Event()
        self._sleep = sleep

    def begin(self, name: str = APP_NAME) -> Begun:
        methods = self._post({"action": "init"}).get("supported_auth_methods")
        if not isinstance(methods, list) or "client_secret" not in methods:
            raise RegistrationError(
                f"{self.accounts} does not offer app registration with a client secret "
                f"(supported_auth_methods: {methods!r})",
                "unsupported_auth_method",
            )
        answer = self._post(
            {
                "action": "begin",
                "archetype": "PersonalAgent",
                "auth_method": "client_secret",
                "request_user_info": "open_id",
            }
        )
        code, uri = answer.get("device_code"), answer.get("verification_uri_complete")
        if not isinstance(code, str) or not code or not isinstance(uri, str) or not uri:
            raise RegistrationError(_refusal("starting the registration", answer))
        return Begun(
            code,
            qr_url(uri, name),
            _seconds(answer.get("interval"), DEFAULT_INTERVAL_S),
            _seconds(answer.get("expires_in", answer.get("expire_in")), DEFAULT_EXPIRES_S),
        )

    def wait(self, begun: Begun, on_status: Callable[[str], None] | None = None) -> Registered:
        """Poll until the scan is confirmed (Registered), denied (Denied), or the code expires
        (Expired); Stopped when `stop` is set."""
        deadline = time.monotonic() + begun.expires_in
        interval = begun.interval
        switched = False
        started = time.monotonic()
        while time.monotonic() < deadline:
            self._check_stop()
            answer = self._post({"action": "poll", "device_code": begun.device_code})
            secret = answer.get("client_secret")
            app_id = answer.get("client_id")
            info = answer.get("user_info") if isinstance(answer.get("user_info"), dict) else {}
            assert isinstance(info, dict)
            if isinstance(app_id, str) and app_id and isinstance(secret, str) and secret:
                open_id = info.get("open_id")
                brand = info.get("tenant_brand")
                return Registered(
                    app_id,
                    secret,
                    open_id if isinstance(open_id, str) and open_id else None,
                    brand if isinstance(brand, str) and brand in ACCOUNTS else self.brand,
                    info,
                )
            if info.get("tenant_brand") == "lark" and not switched:
                switched = True
                self.accounts, self.brand = self.lark, "lark"
                if on_status:
                    on_status("domain_switched")
                continue
            error = str(answer.get("error") or "")
            if error == "slow_down":
                interval += SLOW_DOWN_S
            elif error == "access_denied":
                raise Denied("the scan was declined in Feishu: nothing was created", error)
            elif error == "expired_token":
                raise Expired(expired_line(time.monotonic() - started), error)
            elif error != "authorization_pending":
                raise RegistrationError(_refusal("waiting for the scan", answer), error)
            if on_status:
                on_status(error)
            self._pause(min(interval, max(0.0, deadline - time.monotonic())))
        raise Expired(expired_line(begun.expires_in), "expired_token")

    # --- requests
    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise Stopped("stopped", "abort")

    def _pause(self, seconds: float) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        elif self.stop.wait(seconds):
            raise Stopped("stopped", "abort")

    def _post(self, form: dict[str, str]) -> dict[str, Any]:
        url = self.accounts + ENDPOINT
        data = urlencode(form).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        what = f"the app registration at {self.accounts}"
        try:
            with _OPENER.open(req, timeout=self.timeout) as answer:
                status, raw = answer.status, answer.read(READ_LIMIT)
        except urllib.error.HTTPError as exc:  # pending and the errors come as 4xx with JSON
            status = exc.code
            try:
                raw = exc.read(READ_LIMIT)
            except OSError:
                raw = b""
        except urllib.error.URLError as exc:
            reason = exc.reason
            text = reason.strerror if isinstance(reason, OSError) and reason.strerror else reason
            raise RegistrationError(f"{what}: not reached: {text}") from None
        except TimeoutError:
            raise RegistrationError(f"{what}: no answer within {self.timeout:g} s") from None
        except (OSError, ValueError) as exc:
            raise RegistrationError(f"{what}: {exc.__class__.__name__}: {exc}") from None
        try:
            body = json.loads(raw.decode("utf-8"))
        except ValueError:
            raise RegistrationError(f"{what}: HTTP {status}, not JSON") from None
        if not isinstance(body, dict):
            raise RegistrationError(f"{what}: HTTP {status}, not a JSON object")
        return body


def expired_line(seconds: float) -> str:
    return f"the QR code expired after {round(seconds)} s"


def _refusal(what: str, answer: dict[str, Any]) -> str:
    error = answer.get("error") or answer.get("code") or "no error named"
    desc = str(answer.get("error_description") or answer.get("msg") or "")[:200]
    return f"{what}: Feishu answered {error}" + (f" ({desc})" if desc else "")


def _seconds(value: Any, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return default
    return float(value)
