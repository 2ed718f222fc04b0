"""What every web page shares: the store, the login token, the layout and the auth check.

Interface for page modules (orbit.web.run_pages and friends):

    def register(app: bottle.Bottle, ctx: WebContext) -> None:
        @app.get("/runs/<run_id>")
        @ctx.require_auth
        def page(run_id: str) -> str:
            return ctx.render("run", title=f"run {run_id}", run=...)

`ctx.render(name, title=..., **kw)` renders templates/<name>.tpl and wraps it in base.tpl
(which links /static/orbit.css and /static/orbit.js and passes `csrf` for forms: a form that
POSTs puts `<input type="hidden" name="token" value="{{csrf}}">`). `ctx.check_csrf()` raises a
403 unless the request carries the token in the X-Orbit-Token header or a `token` form field;
call it first in every POST handler. `ctx.actor` names the web server in notes and events.
"""

from __future__ import annotations

import functools
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import bottle

from orbit.store.home import Home
from orbit.store.index import IndexCache
from orbit.store.runs import RunStore

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
COOKIE = "orbit_token"
HEADER = "X-Orbit-Token"

F = TypeVar("F", bound=Callable[..., Any])


def token_path(home: Home) -> Path:
    return home.root / "web-token"


def load_or_create_token(home: Home) -> str:
    """The login token in ORBIT_HOME/web-token (mode 0600), made on first use."""
    path = token_path(home)
    try:
        token = path.read_text().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".web-token.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.replace(tmp, path)
    return token


@dataclass
class WebContext:
    home: Home
    token: str
    store: RunStore = field(init=False)
    actor: str = field(default_factory=lambda: f"web:{os.getpid()}")

    def __post_init__(self) -> None:
        self.store = RunStore(self.home, index_cache=IndexCache())

    # --- auth ---------------------------------------------------------------------------
    def token_ok(self, value: str | None) -> bool:
        return bool(value) and hmac.compare_digest(str(value), self.token)

    def authorized(self) -> bool:
        req = bottle.request
        return self.token_ok(req.get_cookie(COOKIE)) or self.token_ok(req.get_header(HEADER))

    def require_auth(self, func: F) -> F:
        """Refuse a request without the token: 401 for the API and POSTs, else a redirect."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.authorized():
                req = bottle.request
                if req.method == "GET" and not req.path.startswith("/api/"):
                    bottle.redirect("/login")
                bottle.abort(401, "not logged in: run `orbit web` and open the URL it prints")
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def check_csrf(self) -> None:
        """A POST must carry the token itself (header or form field), not only the cookie."""
        req = bottle.request
        sent = req.get_header(HEADER) or req.forms.get("token")
        if not self.token_ok(sent):
            bottle.abort(403, "missing or wrong token in the request (X-Orbit-Token or form)")

    # --- rendering ----------------------------------------------------------------------
    def render(self, template_name: str, title: str = "Orbit", **kw: Any) -> str:
        """templates/<template_name>.tpl inside the base layout (SimpleTemplate escapes {{…}}).

        Both templates get `csrf` (the token, for the hidden field of a POST form).
        """
        lookup = [str(TEMPLATES)]
        body = bottle.template(template_name, template_lookup=lookup, csrf=self.token, **kw)
        page = bottle.template(
            "base", template_lookup=lookup, title=title, body=body, csrf=self.token
        )
        return str(page)
