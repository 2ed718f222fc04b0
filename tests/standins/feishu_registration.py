"""The accounts host's app registration (a device flow) on the stand-in Feishu: what `orbit
feishu init` and the SDK's `lark_oapi.scene.registration.register_app` talk to.

    with StandinFeishu() as fs:
        reg = StandinRegistration(fs)          # POST /oauth/v1/app/registration on fs.base
        reg.when_begun(reg.approve, open_id="ou_alice", name="Alice")   # "the scan", later
        ...                                     # orbit feishu init phone --domain fs.base

The shapes (orbit/feishu/registration.py has them with their sources): a form-encoded POST with
`action` init, begin or poll; JSON answers, the poll's errors as HTTP 400 (RFC 8628).
`approve` creates the app in the stand-in (its id and secret then work for tokens and
messages) and the scanner as a user; `deny` and `expire` end the code as a person declining or
a code timing out would. A Lark tenant's scan (`brand="lark"`) answers one poll with the
brand only, as Feishu's host does before the client switches to Lark's.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from standins.feishu import Answer, Req, StandinFeishu

ENDPOINT = "/oauth/v1/app/registration"


@dataclass
class Code:
    device_code: str
    user_code: str
    begun_at: float
    form: dict[str, str]
    state: str = "pending"  # pending, approved, denied, expired
    open_id: str = ""
    brand: str = "feishu"
    brand_told: bool = False
    app: tuple[str, str] | None = None  # (app_id, secret) once approved
    polls: int = 0
    user_info: dict[str, Any] = field(default_factory=dict)


class StandinRegistration:
    def __init__(
        self,
        fs: StandinFeishu,
        interval: float = 0.2,
        expires_in: float = 60,
        methods: tuple[str, ...] = ("client_secret",),
    ) -> None:
        self.fs = fs
        self.interval = interval
        self.expires_in = expires_in
        self.methods = methods
        self.hang = 0.0  # seconds each poll is held before its answer (a hung host)
        self.slow_down = 0  # the next N polls answer slow_down
        self.codes: dict[str, Code] = {}
        self.cond = threading.Condition()
        fs.route("POST", ENDPOINT, self._serve)

    # --- the scan, played by a test
    def wait_begun(self, timeout: float = 15.0) -> Code:
        """The newest code handed out, waiting up to `timeout` for one."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.codes:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no registration begun within {timeout} s")
                self.cond.wait(min(left, 0.2))
            return list(self.codes.values())[-1]

    def approve(
        self,
        code: Code | None = None,
        open_id: str = "ou_scanner",
        name: str = "Scanner",
        brand: str = "feishu",
        app_id: str | None = None,
        secret: str | None = None,
    ) -> tuple[str, str]:
        """The scanner confirms: the app is created (with the name the link asked for)."""
        code = code or self.wait_begun()
        if app_id and app_id in self.fs.apps:  # an app the scanner already had
            creds = (app_id, self.fs.apps[app_id].secret)
        else:
            creds = self.fs.add_app(app_id, secret, name="Orbit")
        self.fs.add_user(open_id, name)
        with self.cond:
            code.state, code.open_id, code.brand, code.app = "approved", open_id, brand, creds
            code.user_info = {"open_id": open_id, "tenant_brand": brand}
            self.cond.notify_all()
        return creds

    def deny(self, code: Code | None = None) -> None:
        self._end(code, "denied")

    def expire(self, code: Code | None = None) -> None:
        self._end(code, "expired")

    def when_begun(self, action: Callable[..., Any], **kwargs: Any) -> threading.Thread:
        """Run `action(code, **kwargs)` in a thread once a code is handed out (the person
        scanning while the command waits)."""

        def scan() -> None:
            action(self.wait_begun(), **kwargs)

        thread = threading.Thread(target=scan, daemon=True)
        thread.start()
        return thread

    def _end(self, code: Code | None, state: str) -> None:
        code = code or self.wait_begun()
        with self.cond:
            code.state = state
            self.cond.notify_all()

    # --- the host
    def _serve(self, fs: StandinFeishu, req: Req) -> Answer:
        form = req.form
        if form is None:
            return 400, {"error": "invalid_request", "error_description": "not a form"}
        action = form.get("action")
        if action == "init":
            return 200, {"supported_auth_methods": list(self.methods)}
        if action == "begin":
            return self._begin(form)
        if action == "poll":
            return self._poll(form)
        return 400, {"error": "invalid_request", "error_description": f"action {action!r}"}

    def _begin(self, form: dict[str, str]) -> Answer:
        wanted = {
            "archetype": "PersonalAgent",
            "auth_method": "client_secret",
            "request_user_info": "open_id",
        }
        for key, value in wanted.items():
            if form.get(key) != value:
                return 400, {"error": "invalid_request", "error_description": f"{key} {value}"}
        user_code = f"{secrets.token_hex(2).upper()}-{secrets.token_hex(2).upper()}"
        code = Code(f"dc_{secrets.token_hex(16)}", user_code, time.monotonic(), dict(form))
        with self.cond:
            self.codes[code.device_code] = code
            self.cond.notify_all()
        uri = f"{self.fs.base}/page/launcher?user_code={user_code}"
        return 200, {
            "device_code": code.device_code,
            "user_code": user_code,
            "verification_uri": f"{self.fs.base}/page/launcher",
            "verification_uri_complete": uri,
            "interval": self.interval,
            "expires_in": self.expires_in,
        }

    def _poll(self, form: dict[str, str]) -> Answer:
        if self.hang:
            time.sleep(self.hang)
        with self.cond:
            code = self.codes.get(form.get("device_code") or "")
            if code is None:
                return 400, {"error": "invalid_grant", "error_description": "unknown device_code"}
            code.polls += 1
            if code.state == "pending" and time.monotonic() - code.begun_at > self.expires_in:
                code.state = "expired"
            if self.slow_down > 0:  # a throttling host, whatever the scan did
                self.slow_down -= 1
                return 400, {"error": "slow_down", "error_description": "polling too fast"}
            if code.state == "pending":
                return 400, {
                    "error": "authorization_pending",
                    "error_description": "the user has not scanned yet",
                }
            if code.state == "denied":
                return 400, {"error": "access_denied", "error_description": "user declined"}
            if code.state == "expired":
                return 400, {"error": "expired_token", "error_description": "device code expired"}
            if code.brand == "lark" and not code.brand_told:
                code.brand_told = True  # Feishu's host: this tenant is Lark's, ask there
                return 400, {
                    "error": "authorization_pending",
                    "user_info": {"tenant_brand": "lark"},
                }
            assert code.app is not None
            app_id, secret = code.app
            return 200, {"client_id": app_id, "client_secret": secret,
                         "user_info": dict(code.user_info)}  # fmt: skip
